"""Frozen graphs of tensorflow-addons layers, built in a process of their own.

tensorflow-addons 0.23 (its last release) runs only with tf_keras as ``tf.keras``
(``TF_USE_LEGACY_KERAS=1``, set before TensorFlow is imported) and imports
``keras.src.engine.keras_tensor``, which Keras 3 no longer has; tf_keras's own module is
put in its place.  The test suite imports TensorFlow with Keras 3 long before, so the
graphs are built here, in a subprocess::

    TF_USE_LEGACY_KERAS=1 python tests/models/tfa_graphs.py OUT_DIR

writes ``<name>.pb`` per model and ``models.json`` (name -> input shape and what the
model computes: the group count, the number of layer norms).
"""
from __future__ import annotations

import json
import os
import sys
import types
import warnings
from pathlib import Path

import numpy as np

from scopefusion.testing import graph_from_function

H = 8  # channels / units


def _import_addons():
    import tf_keras.src.engine.keras_tensor as keras_tensor

    engine = sys.modules.setdefault("keras.src.engine", types.ModuleType("keras.src.engine"))
    engine.keras_tensor = keras_tensor  # type: ignore[attr-defined]
    sys.modules["keras.src.engine.keras_tensor"] = keras_tensor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not a tested TensorFlow version", end-of-life notice
        import tensorflow_addons as tfa
    return tfa


def _randomize(layer, seed: int) -> None:
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.uniform(0.5, 1.5, w.shape).astype(np.float32) for w in layer.get_weights()])


def _freeze(fn, shape):
    import tensorflow as tf

    return graph_from_function(fn, tf.TensorSpec(shape, tf.float32, "x"))


def build(out: Path) -> None:
    import tensorflow as tf

    tfa = _import_addons()
    models = {}

    def save(name, graph_def, shape, **known):
        (out / f"{name}.pb").write_bytes(graph_def.SerializeToString())
        models[name] = {"shape": list(shape), **known}

    gn = tfa.layers.GroupNormalization(groups=4, epsilon=1e-3, name="group_norm")
    gn.build((2, 6, 6, H))
    _randomize(gn, 1)
    save("group_normalization", _freeze(lambda x: tf.nn.relu(gn(x)), (2, 6, 6, H)), (2, 6, 6, H),
         groups=4, epsilon=1e-3)

    inorm = tfa.layers.InstanceNormalization(epsilon=1e-5, name="instance_norm")
    inorm.build((2, 6, 6, H))
    _randomize(inorm, 2)
    save("instance_normalization", _freeze(lambda x: tf.nn.relu(inorm(x)), (2, 6, 6, H)), (2, 6, 6, H),
         groups=H, epsilon=1e-5)

    cell = tfa.rnn.LayerNormLSTMCell(H, norm_epsilon=1e-3, name="ln_lstm")
    cell.build((2, 5))
    _randomize(cell, 3)

    def unrolled(x):  # three steps of the cell, as an unrolled RNN calls it
        state = [tf.zeros((2, H)), tf.zeros((2, H))]
        outputs = []
        for t in range(3):
            y, state = cell(x[:, t], state)
            outputs.append(y)
        return tf.stack(outputs, 1)

    # per step: the kernel and recurrent products' norms, and the cell state's norm
    save("layer_norm_lstm_cell", _freeze(unrolled, (2, 3, 5)), (2, 3, 5), layer_norms=3 * 3, epsilon=1e-3)
    (out / "models.json").write_text(json.dumps(models, indent=2))


if __name__ == "__main__":
    if os.environ.get("TF_USE_LEGACY_KERAS") != "1":
        sys.exit("set TF_USE_LEGACY_KERAS=1: tensorflow-addons needs tf_keras as tf.keras")
    build(Path(sys.argv[1]))
