"""Graphs whose fusible subgraphs live in the function library, built by the real libraries at
small sizes with random weights and frozen to constants:

* Keras 3 / tf_keras ``LSTM`` and ``GRU`` layers that are not unrolled: traced in a
  ``tf.function`` and frozen with the loop kept functional, so each layer's step is the body
  function of a ``While`` / ``StatelessWhile`` node;
* ``tf.compat.v1.nn.dynamic_rnn`` under control flow v2 in a TF1 graph (a ``StatelessWhile``);
  ``static_rnn`` with ``sequence_length`` under control flow v2 puts each step in the branches
  of a ``StatelessIf`` (``rnn_models.static_rnn``);
* a tf_keras ``Dense(activation="gelu")`` and ``LayerNormalization`` called through a
  ``tf.function`` from a TF1 graph: a ``StatefulPartitionedCall`` of the function, which
  freezing keeps (the variables become constants fed to the call).
"""
from __future__ import annotations

from typing import Any, Callable

from tests.helpers.freeze import freeze_function, freeze_graph, random_variables
from tests.models import rnn_models as rm
from tests.models.rnn_models import BATCH, HIDDEN, STEPS, RnnModel


def keras_loop(library: str, kind: str, *, layers: int = 2, inputs: int = 5, seed: int = 0,
               bidirectional: bool = False, policy: str = "float32", steps: int = STEPS,
               return_sequences: bool = True, return_state: bool = False, masking: bool = False,
               unknown_batch: bool = False, **options: Any) -> RnnModel:
    """``layers`` stacked Keras 3 (``library="keras"``) or tf_keras ``LSTM`` / ``GRU`` layers
    (not unrolled, ``options``; each in ``Bidirectional``), built under the dtype ``policy``,
    traced on a float32 input and frozen with their loops kept as ``While`` nodes.  The layers
    below the top one return sequences; the top one ``return_sequences`` and, with
    ``return_state``, its final state too (a functional model, every tensor an output).  With
    ``masking`` a ``Masking`` layer (mask value 0) comes first; with ``unknown_batch`` the model
    is traced on a batch of unknown size (verified on ``BATCH``)."""
    import numpy as np
    import tensorflow as tf

    lib = __import__(library)
    lib.utils.set_random_seed(seed)

    def layer(top: bool) -> Any:
        made = getattr(lib.layers, kind)(HIDDEN, return_sequences=return_sequences or not top,
                                         return_state=return_state and top, **options)
        return lib.layers.Bidirectional(made) if bidirectional else made

    batch = None if unknown_batch else BATCH
    lib.mixed_precision.set_global_policy(policy)
    try:
        made = [lib.layers.Masking(0.0)] if masking else []
        made += [layer(k == layers - 1) for k in range(layers)]
        if return_state:
            x = y = lib.Input(batch_shape=(batch, steps, inputs))
            for each in made:
                y = each(y)
            model = lib.Model(x, y)
        else:
            model = lib.Sequential(made)
            model.build((batch, steps, inputs))
    finally:
        lib.mixed_precision.set_global_policy("float32")
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(-0.8, 0.8, np.shape(w)).astype(np.float32) for w in model.get_weights()])
    spec = tf.TensorSpec([batch, steps, inputs], tf.float32, name="x")
    graph_def, outputs, _ = freeze_function(lambda x: model(x), {"x": spec}, lower_control_flow=False)
    return RnnModel(graph_def, {"x": [BATCH, steps, inputs]}, outputs)


def dynamic_rnn(make_cell: Callable[[], Any], *, inputs: int = 5) -> RnnModel:
    """``tf.compat.v1.nn.dynamic_rnn(cell)`` in a TF1 graph under control flow v2: the output
    sequence and the final state; the time loop is a functional ``StatelessWhile``."""
    import tensorflow as tf

    from tests.models.detection_models import tf1_graph_mode

    def build(x: Any) -> list[Any]:
        outs, state = tf.compat.v1.nn.dynamic_rnn(make_cell(), x, dtype=tf.float32)
        return [outs] + tf.nest.flatten(state)

    with tf1_graph_mode(control_flow_v1=False):
        return rm.freeze(build, inputs=inputs)


def called_dense_gelu_layer_norm(*, inputs: int = 5, units: int = 8, seed: int = 0) -> RnnModel:
    """A tf_keras ``Dense(gelu)`` then ``LayerNormalization``, called through a ``tf.function``
    from a TF1 graph and frozen: one ``StatefulPartitionedCall`` whose function holds both."""
    import tensorflow as tf
    import tf_keras

    from tests.models.detection_models import tf1_graph_mode

    tf1 = tf.compat.v1

    def build() -> tuple[dict, list]:
        x = tf1.placeholder(tf.float32, [BATCH, inputs], name="x")
        dense = tf_keras.layers.Dense(units, activation="gelu")
        norm = tf_keras.layers.LayerNormalization()

        @tf.function
        def block(t: Any) -> Any:
            return norm(dense(t))

        return {}, [tf.identity(block(x) * 2.0, name="out")]

    with tf1_graph_mode(control_flow_v1=False):
        graph_def, _, outputs = freeze_graph(build, seed, initialize=random_variables(seed))
    return RnnModel(graph_def, {"x": [BATCH, inputs]}, outputs)


def called_dynamic_rnn(make_cell: Callable[[], Any], *, inputs: int = 5, seed: int = 0) -> RnnModel:
    """``dynamic_rnn(cell)`` inside a ``tf.function`` called from a TF1 graph (control flow v2),
    frozen: a ``StatefulPartitionedCall`` of a function holding a ``While`` whose body holds the step."""
    import tensorflow as tf

    from tests.models.detection_models import tf1_graph_mode

    tf1 = tf.compat.v1

    def build() -> tuple[dict, list]:
        x = tf1.placeholder(tf.float32, [BATCH, STEPS, inputs], name="x")
        cell = make_cell()

        @tf.function
        def block(t: Any) -> Any:
            return tf1.nn.dynamic_rnn(cell, t, dtype=tf.float32)[0]

        return {}, [tf.identity(block(x), name="out")]

    with tf1_graph_mode(control_flow_v1=False):
        graph_def, _, outputs = freeze_graph(build, seed, initialize=random_variables(seed))
    return RnnModel(graph_def, {"x": [BATCH, STEPS, inputs]}, outputs)
