"""Frozen graphs of the corpus libraries that cannot be built in the test process, built here
in a process of their own and written to a directory::

    TF_USE_LEGACY_KERAS=1 python tests/models/library_graphs.py legacy OUT_DIR
    python tests/models/library_graphs.py tflearn OUT_DIR

``legacy`` (tf_keras as ``tf.keras``, chosen before TensorFlow is imported):

* keras-bert ``get_model`` (Keras 3 cannot build it: it iterates over symbolic tensors), its
  attention keras-self-attention's ``ScaledDotProductAttention`` (scaled by ``K.sqrt`` of
  ``K.shape(query)[-1]``, the mask subtracted: ``e - 1e4 * (1 - mask)``); keras-multi-head's
  ``MultiHeadAttention`` alone, traced with a dynamic batch (its ``Shape`` ops stay);
* deepctr's ``Transformer`` layer (it passes ``add_weight`` a positional name, which Keras 3
  refuses);
* keras-cv-attention-models (it asks for tf_keras): its own convolution + batch norm + swish
  blocks, ``RMSNorm`` (``x * rsqrt(mean(x ** 2) + eps) * gamma``), layer and group norms, a tiny
  ``LLaMA2``, and look-alikes (``gelu_linear``, ``EvoNormalization``);
* params-flow, bert-for-tf2's layers: its ``LayerNormalization`` (``x * inv + (beta - mean *
  inv)``), ``gelu`` (tanh form with ``tf.pow(x, 3)``) and ``gelu_exact`` (``x * erfc(-x /
  sqrt(2)) / 2``).

``tflearn``: tflearn turns TensorFlow 2 behaviour off when imported (``disable_v2_behavior``),
so it gets a process of its own: its own LSTM and GRU cells, statically unrolled.

Each mode writes ``<name>.pb`` per model and ``models.json``: name -> the library, the input's
shape and dtype, and what the model computes by construction (``expected``: family ->
count; none for a look-alike), read back by
``tests.models.library_models.load_graphs``.
"""
from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

BATCH = 2


def _randomize(weights: list[Any], seed: int) -> None:
    """Every weight uniform in [-0.8, 0.8); moving variances in [0.5, 1.5) (a variance is positive)."""
    rng = np.random.default_rng(seed)
    for w in weights:
        lo, hi = (0.5, 1.5) if "variance" in w.name else (-0.8, 0.8)
        w.assign(rng.uniform(lo, hi, w.shape).astype(np.float32))


def _count(model: Any, cls: type | tuple[type, ...]) -> int:
    return sum(isinstance(layer, cls) for layer in model._flatten_layers(include_self=False))


def import_deepctr_quietly() -> None:
    """Make ``deepctr``'s modules importable without its package ``__init__``, which starts a
    version check against PyPI in a thread (no network call from the tests)."""
    import importlib.util
    import types

    if "deepctr" in sys.modules:
        return
    spec = importlib.util.find_spec("deepctr")
    assert spec is not None and spec.submodule_search_locations, "deepctr is not installed"
    package = types.ModuleType("deepctr")
    package.__path__ = list(spec.submodule_search_locations)
    package.__version__ = "0.9.4"  # type: ignore[attr-defined]
    sys.modules["deepctr"] = package


class Writer:
    """Writes the graphs of one mode and their descriptions."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.models: dict[str, dict[str, Any]] = {}

    def traced(self, library: str, name: str, call: Callable[[Any], Any], shape: list[int], dtype: str = "float32",
               traced_shape: list[int | None] | None = None, **known: Any) -> None:
        """Trace ``call(x)`` over one input ``x`` (of ``traced_shape`` when given: a dynamic batch) and
        freeze it; ``shape`` is the one the tests feed."""
        import tensorflow as tf
        from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

        spec = tf.TensorSpec(shape if traced_shape is None else traced_shape, dtype, name="x")
        concrete = tf.function(call, autograph=False).get_concrete_function(spec)
        frozen = convert_variables_to_constants_v2(concrete)
        self.save(library, name, frozen.graph.as_graph_def(), shape, dtype, outputs=[t.name for t in frozen.outputs],
                  **known)

    def save(self, library: str, name: str, graph_def: Any, shape: list[int], dtype: str = "float32",
             **known: Any) -> None:
        (self.out / f"{name}.pb").write_bytes(graph_def.SerializeToString())
        self.models[name] = {"library": library, "shape": list(shape), "dtype": dtype, **known}

    def close(self) -> None:
        (self.out / "models.json").write_text(json.dumps(self.models, indent=2))


# ------------------------------------------------------------------------ tf_keras as tf.keras


def keras_bert(w: Writer) -> None:
    """``keras_bert.get_model``: embeddings, two transformer blocks (hidden 16, 2 heads,
    feed-forward 32, gelu), sequence length 8; segments are the tokens modulo 2."""
    import keras_bert
    import tf_keras as keras
    from keras_layer_normalization import LayerNormalization
    from keras_position_wise_feed_forward import FeedForward
    from keras_multi_head import MultiHeadAttention

    keras.utils.set_random_seed(0)
    inputs, output = keras_bert.get_model(token_num=30, pos_num=8, seq_len=8, embed_dim=16, transformer_num=2,
                                          head_num=2, feed_forward_dim=32, dropout_rate=0.0, training=False,
                                          trainable=False)
    model = keras.Model(inputs, output)
    _randomize(model.weights, 0)
    w.traced("keras-bert", "bert_encoder", lambda x: model([x, x % 2], training=False), [BATCH, 8], "int32",
             int_range=[0, 30], signature=["Maximum", "Sqrt", "RealDiv", "Tanh"],
             expected={"LayerNorm": _count(model, LayerNormalization), "Gelu": _count(model, FeedForward),
                       # keras-multi-head's MultiHeadAttention calls keras-self-attention's
                       # ScaledDotProductAttention once (a layer it makes in its call, not tracked)
                       "Attention": _count(model, MultiHeadAttention)})


def keras_multi_head_dynamic_batch(w: Writer) -> None:
    """keras-multi-head's ``MultiHeadAttention`` (2 heads, hidden 16) traced with a dynamic batch: its
    head split and keras-self-attention's scale, ``K.sqrt(K.cast(K.shape(query)[-1]))``, keep their
    ``Shape`` ops, whose static axes the shape propagation knows."""
    import tf_keras as keras
    from keras_multi_head import MultiHeadAttention

    keras.utils.set_random_seed(6)
    x = keras.Input((6, 16))
    model = keras.Model(x, MultiHeadAttention(head_num=2, name="mha")(x))
    _randomize(model.weights, 6)
    w.traced("keras-bert", "multi_head_dynamic_batch", lambda x: model(x, training=False), [BATCH, 6, 16],
             traced_shape=[None, 6, 16], signature=["Shape", "StridedSlice", "Maximum", "Sqrt", "Exp"],
             expected={"Attention": _count(model, MultiHeadAttention)})


def deepctr_transformer(w: Writer) -> None:
    """deepctr's ``Transformer`` with ``attention_type="ln"`` and ``use_layer_norm``: its own
    ``LayerNormalization`` on the queries and the keys, and one more after the attention and after
    the feed-forward (the same layer called twice), between two more of its layer norms; the
    sequence lengths (deepctr masks by length) are constants."""
    import tensorflow as tf
    import tf_keras as keras

    import_deepctr_quietly()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from deepctr.layers.normalization import LayerNormalization
        from deepctr.layers.sequence import Transformer

    keras.utils.set_random_seed(1)
    first, last = LayerNormalization(name="ln_0"), LayerNormalization(name="ln_1")
    transformer = Transformer(att_embedding_size=4, head_num=2, dropout_rate=0.0, use_positional_encoding=False,
                              use_res=True, use_feed_forward=True, use_layer_norm=True, blinding=False,
                              attention_type="ln", output_type=None, name="transformer")

    def call(x: Any) -> Any:
        lengths = tf.constant([[6], [4]])
        h = first(x)
        return last(transformer([h, h, lengths, lengths], training=False))

    call(tf.zeros([BATCH, 6, 8]))  # builds the layers
    _randomize(first.weights + transformer.weights + last.weights, 1)
    # ln_0, ln_1, and the Transformer's: its query and key norms, and its ``ln`` called twice
    calls = {"LayerNorm": 2 + len([transformer.att_ln_q, transformer.att_ln_k]) + 2,
             "Attention": len([transformer])}  # every head in one product
    w.traced("deepctr", "transformer", call, [BATCH, 6, 8], expected=calls, signature=["Maximum", "Sqrt", "RealDiv"])


def kecam(w: Writer) -> None:
    """keras-cv-attention-models' ``common_layers`` (its own conv / batch norm / activation
    helpers) and llama2's ``RMSNorm``: a stem convolution and a depthwise convolution, each with a
    batch norm and swish, a group norm, a layer norm, then the RMS norm over the flattened
    positions and a quick GELU (``x * sigmoid(1.702 x)``, a swish of beta 1.702)."""
    import tf_keras as keras
    from keras_cv_attention_models import common_layers as cl
    from keras_cv_attention_models.llama2.llama2 import RMSNorm

    keras.utils.set_random_seed(2)
    x = keras.Input((8, 8, 3), batch_size=BATCH)
    h = cl.conv2d_no_bias(x, 8, 3, padding="same", name="stem_")
    h = cl.batchnorm_with_activation(h, activation="swish", name="stem_")
    h = cl.depthwise_conv2d_no_bias(h, 3, padding="same", name="dw_")
    h = cl.batchnorm_with_activation(h, activation="swish", name="dw_")
    h = cl.group_norm(h, groups=2, name="block_")
    h = cl.layer_norm(h, name="block_")
    s = RMSNorm(name="rms")(keras.layers.Reshape((64, 8))(h))
    s = cl.activation_by_name(s, "gelu/quick", name="out_")
    model = keras.Model(x, s)
    _randomize(model.weights, 2)
    swishes = sum(isinstance(layer, keras.layers.Activation) and layer.activation.__name__ == "swish"
                  for layer in model.layers)
    w.traced("keras-cv-attention-models", "conv_norm_blocks", lambda x: model(x, training=False), [BATCH, 8, 8, 3],
             signature=["Conv2D", "DepthwiseConv2dNative", "FusedBatchNormV3", "Pow", "Rsqrt", "Sigmoid"],
             expected={"ConvBatchNorm": _count(model, keras.layers.BatchNormalization),
                       "Swish": swishes + 1,  # and the quick GELU, a swish of beta 1.702
                       "GroupNorm": _count(model, keras.layers.GroupNormalization),
                       "LayerNorm": _count(model, keras.layers.LayerNormalization), "RMSNorm": _count(model, RMSNorm)})


def kecam_llama2(w: Writer) -> None:
    """keras-cv-attention-models' ``LLaMA2`` (2 blocks, hidden 16, 2 heads, vocabulary 50): its
    ``RMSNorm`` before each attention and feed-forward and at the end, and the feed-forward's swish
    gate, and each block's causal self-attention (its ``Softmax`` layer)."""
    import tf_keras as keras
    from keras_cv_attention_models.llama2.llama2 import LLaMA2, RMSNorm

    keras.utils.set_random_seed(5)
    model = LLaMA2(num_blocks=2, embedding_size=16, hidden_divisible=8, num_heads=2, vocab_size=50, max_block_size=8,
                   pretrained=None)
    _randomize(model.weights, 5)
    swishes = sum(isinstance(layer, keras.layers.Activation) and layer.activation.__name__ == "swish"
                  for layer in model._flatten_layers(include_self=False))
    w.traced("keras-cv-attention-models", "llama2", lambda x: model(x, training=False), [BATCH, 8], "int64",
             int_range=[0, 50], signature=["Pow", "Rsqrt", "Mean", "Sigmoid"],
             expected={"RMSNorm": _count(model, RMSNorm), "Swish": swishes,
                       "Attention": _count(model, keras.layers.Softmax)})


def kecam_look_alikes(w: Writer) -> None:
    """Look-alikes: ``gelu_linear`` (a piecewise quadratic of ``|x|``, not a GELU) and
    ``EvoNormalization`` S0 (``x * sigmoid(v x)`` over a group standard deviation: no group norm)."""
    import tf_keras as keras
    from keras_cv_attention_models import common_layers as cl

    keras.utils.set_random_seed(3)
    x = keras.Input((8, 8, 8), batch_size=BATCH)
    gelu_like = cl.activation_by_name(x, "gelu/linear", name="gl_")
    evo = cl.EvoNormalization(nonlinearity=True, num_groups=2, name="evo")(x)
    model = keras.Model(x, [gelu_like, evo])
    _randomize(model.weights, 3)
    w.traced("keras-cv-attention-models", "gelu_linear_evo_norm", lambda x: model(x, training=False),
             [BATCH, 8, 8, 8], signature=["Abs", "Sign", "Relu", "Sigmoid"])


def params_flow(w: Writer) -> None:
    """params-flow (bert-for-tf2's layers): ``LayerNormalization`` around two ``Dense`` layers
    with its ``gelu`` and ``gelu_exact``."""
    import params_flow as pf
    import tf_keras as keras

    keras.utils.set_random_seed(4)
    x = keras.Input((6, 16), batch_size=BATCH)
    h = pf.LayerNormalization(name="ln_in")(x)
    h = keras.layers.Dense(32, activation=pf.gelu, name="dense_gelu")(h)
    h = keras.layers.Dense(16, activation=pf.gelu_exact, name="dense_gelu_exact")(h)
    h = pf.LayerNormalization(name="ln_out")(h)
    model = keras.Model(x, h)
    _randomize(model.weights, 4)
    gelus = sum(isinstance(layer, keras.layers.Dense) and layer.activation in (pf.gelu, pf.gelu_exact)
                for layer in model.layers)
    w.traced("params-flow", "layer_norm_gelus", lambda x: model(x, training=False), [BATCH, 6, 16],
             signature=["Rsqrt", "Pow", "Tanh", "Erfc", "Sqrt", "RealDiv"],
             expected={"LayerNorm": _count(model, pf.LayerNormalization), "Gelu": gelus})


# ------------------------------------------------------------------------------------ tflearn


def _tflearn() -> Any:
    """tflearn 0.5 imports ``nest.is_sequence`` (``is_nested`` since TF 2.x) and Pillow's
    ``Image.ANTIALIAS`` (``LANCZOS`` since Pillow 10): both given under the old names (this
    process is tflearn's alone)."""
    from PIL import Image
    from tensorflow.python.util import nest

    nest.is_sequence = nest.is_nested
    Image.ANTIALIAS = Image.LANCZOS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tflearn
    return tflearn


def tflearn_rnn(w: Writer, kind: str, steps: int = 4) -> None:
    """``tflearn.lstm`` / ``tflearn.gru`` (8 units) over ``steps`` steps of 5 inputs, then
    ``tflearn.fully_connected``: tflearn's own cells, statically unrolled (TF1 graph)."""
    import tensorflow as tf

    tflearn = _tflearn()
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(5)
        x = tf1.placeholder(tf.float32, [BATCH, steps, 5], name="x")
        init = tflearn.initializations.uniform(minval=-0.8, maxval=0.8, seed=5)
        h = {"lstm": tflearn.lstm, "gru": tflearn.gru}[kind](x, 8, return_seq=False, weights_init=init)
        out = tf.identity(tflearn.fully_connected(h, 3), name="out")
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            graph_def = tf1.graph_util.convert_variables_to_constants(session, graph.as_graph_def(), [out.op.name])
    family = {"lstm": "LSTM", "gru": "GRU"}[kind]
    w.save("tflearn", f"{kind}_static", graph_def, [BATCH, steps, 5], outputs=["out:0"], expected={family: steps},
           signature=["ConcatV2", "MatMul", "Split", "Sigmoid", "Tanh"])


def keras3_models(w: Writer) -> None:
    """The Keras 3 builders of ``library_models`` (keras-layer-normalization and its siblings, deepctr,
    keras-tcn), in a process where ``tf.keras`` is Keras 3: these libraries bind ``tensorflow.keras`` when
    imported, which in a process that has imported ``transformers`` (it sets ``TF_USE_LEGACY_KERAS``) is
    tf_keras instead."""
    from tests.models.library_models import BUILDERS

    for build in BUILDERS.values():
        m = build()
        (feed,) = m.inputs.values()
        w.save(m.library, m.name, m.graph_def, list(feed.shape), str(feed.dtype), outputs=list(m.outputs),
               expected=dict(m.expected), signature=list(m.signature), int_range=list(m.int_range))


MODES: dict[str, list[Callable[[Writer], None]]] = {
    "keras3": [keras3_models],
    "legacy": [keras_bert, keras_multi_head_dynamic_batch, deepctr_transformer, kecam, kecam_llama2, kecam_look_alikes,
               params_flow],
    "tflearn": [lambda w: tflearn_rnn(w, "lstm"), lambda w: tflearn_rnn(w, "gru")],
}


def main(mode: str, out: Path) -> None:
    if mode == "keras3" and os.environ.get("TF_USE_LEGACY_KERAS", "0") != "0":
        sys.exit("unset TF_USE_LEGACY_KERAS: these builders need Keras 3 as tf.keras")
    if mode == "legacy" and os.environ.get("TF_USE_LEGACY_KERAS") != "1":
        sys.exit("set TF_USE_LEGACY_KERAS=1: these libraries need tf_keras as tf.keras")
    writer = Writer(out)
    for build in MODES[mode]:
        build(writer)
    writer.close()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
