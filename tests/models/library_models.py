"""The generalization corpus: tiny models built with the layer code of libraries the rest of
the suite does not use, random weights, frozen.  Each library writes the known computations
(layer norm, GELU, swish, RMS norm, group norm, convolution + batch norm, LSTM, GRU, attention)
its own way, which is the point: the passes must recognise the computation, not the spelling.

Built by the functions here, in a process of their own where ``tf.keras`` is Keras 3
(``library_graphs.py keras3``):

* **keras-bert**'s layer packages (keras-layer-normalization, keras-position-wise-feed-forward,
  keras-transformer): its own ``LayerNormalization`` (``(x - mean) / sqrt(mean((x - mean)^2) +
  eps)``, ``K.sqrt`` clipping at zero: ``Sqrt(Maximum(v + eps, 0))``) and keras-transformer's
  ``gelu`` (tanh form, ``x * x * x``) in ``FeedForward``;
* **deepctr**: a look-alike of its own ``LayerNormalization``: with ``axis=1`` it takes the
  mean over axis 1 but the variance over the last axis;
* **keras-tcn**: ``TCN`` residual blocks of causal dilated ``Conv1D`` (``ExpandDims``,
  ``SpaceToBatchND``, ``Conv2D``, ``BatchToSpaceND``, ``Squeeze``), each followed by a batch
  norm or a layer norm.

Built in processes of their own by ``library_graphs.py`` (see there): keras-bert's
``get_model``, deepctr's ``Transformer``, keras-cv-attention-models and params-flow
(bert-for-tf2's layers) with tf_keras as ``tf.keras``; tflearn's own LSTM and GRU cells.

Every builder returns a :class:`LibraryModel` whose ``expected`` says, by construction (the
layers it built), how many ops of each fused family (:data:`FAMILIES`) fusion must make.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tests.helpers.freeze import freeze_function
from tests.models.library_graphs import import_deepctr_quietly
from tests.models.model_builders import FrozenModel

#: The fused families the corpus counts: family -> the fused op types that count for it.
#: ``ConvBatchNorm`` counts the convolutions ConvBatchnormFusionPass folded a batch norm into.
FAMILIES: dict[str, tuple[str, ...]] = {
    "LayerNorm": ("LayerNorm",),
    "Gelu": ("Gelu",),
    "Swish": ("Swish",),
    "RMSNorm": ("RMSNorm",),
    "GroupNorm": ("GroupNorm",),
    "InstanceNorm": ("InstanceNorm",),
    "ConvBatchNorm": (),
    "LSTM": ("BasicLSTMCell", "DynamicRNN"),
    "GRU": ("GRUCell", "DynamicGRUV2"),
    "Attention": ("ScaledDotProductAttention",),
}

BATCH = 2


@dataclass(repr=False)
class LibraryModel(FrozenModel):
    """A frozen model of the corpus and the fused ops its layers call for."""

    library: str = ""
    name: str = ""
    #: family -> how many the model's code computes (families left out: none)
    expected: dict[str, int] = field(default_factory=dict)
    #: op types the library's spelling is made of (each present in the graph)
    signature: tuple[str, ...] = ()
    int_range: tuple[int, int] = (0, 10)

    def __repr__(self) -> str:
        return f"LibraryModel({self.library}:{self.name})"

    def expected_counts(self) -> dict[str, int]:
        """Every family's expected count (0 where the model builds none)."""
        return {family: self.expected.get(family, 0) for family in FAMILIES}


def _randomize(weights: list[Any], seed: int, low: float = -0.8, high: float = 0.8) -> None:
    """Every weight uniform in [low, high); moving variances in [0.5, 1.5) (a variance is positive)."""
    rng = np.random.default_rng(seed)
    for w in weights:
        lo, hi = (0.5, 1.5) if "variance" in w.path else (low, high)
        w.assign(rng.uniform(lo, hi, w.shape).astype(np.float32))


def _count(model: Any, cls: type | tuple[type, ...]) -> int:
    """How many layers of ``cls`` the Keras 3 ``model`` holds, nested ones included."""
    return sum(isinstance(layer, cls) for layer in model._flatten_layers(include_self=False))


def _traced(library: str, name: str, model: Any, shape: list[int], dtype: str = "float32",
            **known: Any) -> LibraryModel:
    """Trace ``model(x, training=False)`` over one input ``x`` of ``shape`` and freeze it."""
    import tensorflow as tf

    spec = tf.TensorSpec(shape, dtype, name="x")
    graph_def, outputs, _ = freeze_function(lambda x: model(x, training=False), {"x": spec}, autograph=False)
    rng = np.random.default_rng(7)
    feed = rng.normal(size=shape).astype(dtype) if dtype.startswith("float") else \
        rng.integers(*known.get("int_range", (0, 10)), size=shape).astype(dtype)
    return LibraryModel(graph_def, {"x:0": feed}, outputs, library=library, name=name, **known)


# ---------------------------------------------------------------------------------- keras-bert


def keras_transformer_blocks(seed: int = 0) -> LibraryModel:
    """keras-layer-normalization's ``LayerNormalization`` around keras-position-wise-feed-forward
    ``FeedForward`` layers with keras-transformer's ``gelu``."""
    import keras
    from keras_layer_normalization import LayerNormalization
    from keras_position_wise_feed_forward import FeedForward
    from keras_transformer import gelu

    keras.utils.set_random_seed(seed)
    x = keras.Input((6, 16), batch_size=BATCH)
    h = LayerNormalization(name="ln_in")(x)
    for i in range(2):
        h = LayerNormalization(name=f"ln_{i}")(keras.layers.Add()([h, FeedForward(32, activation=gelu,
                                                                                  name=f"ffn_{i}")(h)]))
    model = keras.Model(x, h)
    _randomize(model.weights, seed)
    return _traced("keras-bert", "layer_norm_feed_forward", model, [BATCH, 6, 16],
                   signature=("Maximum", "Sqrt", "RealDiv", "Square", "Tanh"),
                   expected={"LayerNorm": _count(model, LayerNormalization), "Gelu": _count(model, FeedForward)})


# ------------------------------------------------------------------------------------- deepctr


def deepctr_layer_norm_axis_1(seed: int = 0) -> LibraryModel:
    """Look-alike: deepctr ``LayerNormalization(axis=1)`` takes the mean over axis 1 but the
    variance over the last axis: not a normalization over any one set of axes."""
    import keras

    import_deepctr_quietly()
    from deepctr.layers.normalization import LayerNormalization

    keras.utils.set_random_seed(seed)
    x = keras.Input((6, 8), batch_size=BATCH)
    model = keras.Model(x, LayerNormalization(axis=1, name="ln_axis_1")(x))
    _randomize(model.weights, seed)
    return _traced("deepctr", "layer_norm_axis_1", model, [BATCH, 6, 8], signature=("Maximum", "Sqrt", "RealDiv"))


# ----------------------------------------------------------------------------------- keras-tcn


def tcn(norm: str, seed: int = 0) -> LibraryModel:
    """``tcn.TCN`` (8 filters, kernel 2, dilations 1 and 2: two residual blocks of two causal
    convolutions each) with ``use_batch_norm`` or ``use_layer_norm`` (``norm``)."""
    import keras
    from tcn import TCN

    keras.utils.set_random_seed(seed)
    x = keras.Input((12, 3), batch_size=BATCH)
    layer = TCN(nb_filters=8, kernel_size=2, dilations=[1, 2], nb_stacks=1, return_sequences=True,
                **{f"use_{norm}": True}, name="tcn")
    model = keras.Model(x, layer(x))
    _randomize(model.weights, seed)
    family = {"batch_norm": "ConvBatchNorm", "layer_norm": "LayerNorm"}[norm]
    cls = {"batch_norm": keras.layers.BatchNormalization, "layer_norm": keras.layers.LayerNormalization}[norm]
    return _traced("keras-tcn", f"tcn_{norm}", model, [BATCH, 12, 3], expected={family: _count(model, cls)},
                   signature=("ExpandDims", "Conv2D", "Squeeze", "SpaceToBatchND", "BatchToSpaceND"))


#: Every in-process builder by key (``library:name``).
BUILDERS: dict[str, Callable[[], LibraryModel]] = {
    "keras-bert:layer_norm_feed_forward": keras_transformer_blocks,
    "deepctr:layer_norm_axis_1": deepctr_layer_norm_axis_1,
    "keras-tcn:tcn_batch_norm": lambda: tcn("batch_norm"),
    "keras-tcn:tcn_layer_norm": lambda: tcn("layer_norm"),
}


def load_graphs(directory: Path) -> dict[str, LibraryModel]:
    """The models ``library_graphs.py`` wrote to ``directory``, by key (``library:name``)."""
    from scopefusion.core.graph.io import load_model

    out = {}
    rng = np.random.default_rng(7)
    for name, known in json.loads((directory / "models.json").read_text()).items():
        shape, dtype = known.pop("shape"), known.pop("dtype")
        int_range = tuple(known.pop("int_range", (0, 10)))
        feed = rng.normal(size=shape).astype(dtype) if dtype.startswith("float") else \
            rng.integers(*int_range, size=shape).astype(dtype)
        graph_def = load_model(directory / f"{name}.pb").graph_def
        model = LibraryModel(graph_def, {"x:0": feed}, known.pop("outputs"), name=name, int_range=int_range,
                             signature=tuple(known.pop("signature", ())), **known)
        out[f"{model.library}:{name}"] = model
    return out



#: What each mode of ``library_graphs.py`` builds, by key.
SUBPROCESS_KEYS: dict[str, tuple[str, ...]] = {
    "keras3": tuple(BUILDERS),
    "legacy": ("keras-bert:bert_encoder", "keras-bert:multi_head_dynamic_batch", "deepctr:transformer",
               "keras-cv-attention-models:conv_norm_blocks",
               "keras-cv-attention-models:llama2", "keras-cv-attention-models:gelu_linear_evo_norm",
               "params-flow:layer_norm_gelus"),
    "tflearn": ("tflearn:lstm_static", "tflearn:gru_static"),
}
#: Every model of the corpus, by key.
KEYS: tuple[str, ...] = tuple(k for keys in SUBPROCESS_KEYS.values() for k in keys)
GRAPHS_SCRIPT = Path(__file__).resolve().parent / "library_graphs.py"


def build_subprocess_graphs(mode: str, directory: Path) -> dict[str, LibraryModel]:
    """Run ``library_graphs.py`` in ``mode`` (in a process of its own) into ``directory`` and load
    what it wrote."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("TF_USE_LEGACY_KERAS", None)
    if mode == "legacy":
        env["TF_USE_LEGACY_KERAS"] = "1"
    root = str(GRAPHS_SCRIPT.parents[2])  # the tests import this checkout's scopefusion and tests
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    run = subprocess.run([sys.executable, str(GRAPHS_SCRIPT), mode, str(directory)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, f"library_graphs.py {mode} failed:\n{run.stderr[-3000:]}"
    models = load_graphs(directory)
    assert sorted(models) == sorted(SUBPROCESS_KEYS[mode]), sorted(models)
    return models


def build_all(directory: Path) -> dict[str, LibraryModel]:
    """Every model of the corpus, by key, each mode built in a process of its own (under ``directory``):
    which Keras ``tf.keras`` is depends on what the process imported before."""
    models: dict[str, LibraryModel] = {}
    for mode in SUBPROCESS_KEYS:
        (directory / mode).mkdir(parents=True, exist_ok=True)
        models.update(build_subprocess_graphs(mode, directory / mode))
    return {key: models[key] for key in KEYS}

#: Known misses: key -> family -> why the passes miss it (the family's test is a strict xfail).
MISSES: dict[str, dict[str, str]] = {
    "deepctr:transformer": {
        "Attention": "deepctr's Transformer multiplies the probabilities by its query mask (Softmax times a "
                     "Tile of the query lengths' sequence mask) before the product with v, which "
                     "ScaledDotProductAttention has no input for: refused, a Mul lies between the softmax "
                     "and the product with v"},
}
