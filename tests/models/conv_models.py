"""Frozen graphs with convolutions followed by batch norms, built by the libraries that
produce them (tf_keras, Keras 3, tf_slim, Keras applications), at tiny sizes with
random weights and random batch-norm statistics (so that every batch norm does
real work), for ``ConvBatchnormFusionPass``.

Every builder returns a :class:`ConvModel`: the frozen GraphDef, a feed, how many
convolution -> batch norm pairs the model's code builds (``pairs``), how many of
them fold (``folds``: every pair but those the library does not emit as a
convolution directly followed by its batch norm) and how many the pass must refuse
(``refusals``, each saying ``reason``). Counts come from the model's layers or the
builder's own loop, never from running the pass. Written against TensorFlow 2.21,
Keras 3.15, tf_keras 2.21 and tf_slim 1.1.

``FOLD_FORMS``, ``REFUSED_FORMS`` and ``LOOK_ALIKES`` name every builder, for
parametrized tests.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from tests.models.activation_models import _tf1, _traced
from tests.models.corpus_models import CorpusModel, keras_mobilenet_v2
from tests.models.model_builders import FrozenModel

#: Op types of a batch norm in either form (FusedBatchNorm, or tf.nn.batch_normalization's Rsqrt).
FUSED_BATCH_NORMS = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
CONVOLUTIONS = ("Conv2D", "DepthwiseConv2dNative")


@dataclass(repr=False)
class ConvModel(FrozenModel):
    """A frozen model and what its code builds."""

    name: str = ""
    pairs: int = 0  # convolution -> batch norm pairs in the model code
    folds: int = 0  # pairs the pass folds: the convolution directly followed by the batch norm
    depthwise_folds: int = 0  # of those, the depthwise convolutions
    refusals: int = 0  # pairs the pass must refuse
    reason: str = ""  # a phrase every refusal says
    decomposed: bool = False  # the batch norms are tf.nn.batch_normalization's ops (else FusedBatchNorm*)
    signature: tuple[str, ...] = ()  # op types the form is made of (each present in the graph)
    float16: bool = False  # the convolutions compute in float16

    def __repr__(self) -> str:  # short, for assertion messages
        return f"ConvModel({self.name!r}, pairs={self.pairs}, folds={self.folds}, refusals={self.refusals})"


# ------------------------------------------------------------------ helpers


def randomize(model: Any, batch_norm: type, seed: int, others: bool = True) -> None:
    """Random weights: a batch norm's gamma in [0.5, 1.5], beta and moving mean around 0,
    moving variance in [0.5, 2]; with ``others``, every other weight (biases too) normal
    with std 0.5 (without, they keep their initializers' values)."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        weights = layer.get_weights()
        if isinstance(layer, batch_norm):
            # in the layer's order (gamma, beta, mean, variance), each only when the layer has it
            names = [w.name.split("/")[-1].split(":")[0] for w in layer.weights]
            draw = {"gamma": lambda n: rng.uniform(0.5, 1.5, n), "beta": lambda n: rng.normal(0.0, 0.1, n),
                    "moving_mean": lambda n: rng.normal(0.0, 0.1, n),
                    "moving_variance": lambda n: rng.uniform(0.5, 2.0, n)}
            layer.set_weights([draw[name](w.shape).astype(w.dtype) for name, w in zip(names, weights, strict=True)])
        elif weights and others:
            layer.set_weights([rng.normal(0.0, 0.5, w.shape).astype(w.dtype) for w in weights])


def producer_layer(layer: Any) -> Any:
    """The layer whose output ``layer`` reads (tf_keras and Keras 3 both keep it first in
    the input's ``_keras_history``)."""
    return layer.input._keras_history[0]


def conv_batch_norm_pairs(model: Any, lib: Any) -> dict[str, int]:
    """The batch norms of ``model`` that read a convolution, by the convolution's class name."""
    convs = (lib.layers.Conv1D, lib.layers.Conv2D, lib.layers.DepthwiseConv2D)
    out: dict[str, int] = {}
    for layer in model.layers:
        if isinstance(layer, lib.layers.BatchNormalization):
            producer = producer_layer(layer)
            if isinstance(producer, convs):
                key = type(producer).__name__
                out[key] = out.get(key, 0) + 1
    return out


def _keras_traced(name: str, model: Any, shape: list[int], seed: int, **known: Any) -> ConvModel:
    """Trace ``model(x, training=False)`` over a fixed-shape input, freeze it, feed normal floats."""
    import tensorflow as tf

    def fn(x):
        return model(x, training=False)

    frozen = _traced(name, fn, {"x": tf.TensorSpec(shape, tf.float32, name="x")}, np.random.default_rng(seed))
    return ConvModel(frozen.graph_def, frozen.inputs, frozen.outputs, name=name, **known)


def _batch_norm_form(library: str) -> dict[str, Any]:
    """What a library's BatchNormalization emits in inference on 4-D data."""
    if library == "keras":  # Keras 3: ops.batch_normalization -> tf.nn.batch_normalization
        return {"decomposed": True, "signature": ("Rsqrt", "Mul", "Sub", "AddV2")}
    return {"decomposed": False, "signature": ("FusedBatchNormV3",)}


# ------------------------------------------------------------ Keras layers


def keras_convnet(library: str, data_format: str = "channels_last", seed: int = 0) -> ConvModel:
    """tf_keras or Keras 3 (``library="keras"``): a functional model of three blocks, each a
    convolution then ``BatchNormalization``: ``Conv2D`` with a bias (then ReLU),
    ``DepthwiseConv2D`` with depth multiplier 2 (then ReLU), and ``Conv2D`` without a bias
    followed by a batch norm without gamma and beta (``scale=False, center=False``).

    With ``channels_first`` both libraries wrap the depthwise convolution in Transposes
    on a CPU (it runs it as NHWC), so that pair is no convolution directly followed by
    its batch norm."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    axis = -1 if data_format == "channels_last" else 1
    shape = [2, 8, 8, 3] if data_format == "channels_last" else [2, 3, 8, 8]
    x = lib.Input(batch_shape=tuple(shape), name="x")
    # 6 channels on 8x8 images: Keras 3 tells a bias's axis by its length (below)
    h = lib.layers.Conv2D(6, 3, padding="same", data_format=data_format, name="conv")(x)
    h = lib.layers.ReLU()(lib.layers.BatchNormalization(axis=axis, name="bn")(h))
    h = lib.layers.DepthwiseConv2D(3, depth_multiplier=2, use_bias=False, data_format=data_format, name="dw")(h)
    h = lib.layers.ReLU()(lib.layers.BatchNormalization(axis=axis, name="dw_bn")(h))
    h = lib.layers.Conv2D(4, 1, use_bias=False, data_format=data_format, name="pw")(h)
    h = lib.layers.BatchNormalization(axis=axis, scale=False, center=False, name="pw_bn")(h)
    model = lib.Model(x, h, name="net")
    randomize(model, lib.layers.BatchNormalization, seed)
    pairs = conv_batch_norm_pairs(model, lib)
    depthwise = pairs.get("DepthwiseConv2D", 0) if data_format == "channels_last" else 0  # else transposed
    return _keras_traced(f"{library}_convnet[{data_format}]", model, shape, seed, pairs=sum(pairs.values()),
                         folds=sum(pairs.values()) - pairs.get("DepthwiseConv2D", 0) + depthwise,
                         depthwise_folds=depthwise, **_batch_norm_form(library))


def keras_conv1d(library: str, seed: int = 0) -> ConvModel:
    """tf_keras or Keras 3 (``library="keras"``): two ``Conv1D`` + ``BatchNormalization`` blocks, a
    causal convolution with a bias (then ReLU) and a dilated one (rate 2) without. A ``Conv1D``
    is a ``Conv2D`` over an ``ExpandDims`` of its input, squeezed back (``Squeeze``); Keras 3
    dilates through ``SpaceToBatchND`` / ``BatchToSpaceND`` around it."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    shape = [2, 12, 3]
    x = lib.Input(batch_shape=tuple(shape), name="x")
    h = lib.layers.Conv1D(6, 3, padding="causal", name="conv")(x)
    h = lib.layers.ReLU()(lib.layers.BatchNormalization(name="bn")(h))
    h = lib.layers.Conv1D(4, 2, dilation_rate=2, padding="causal", use_bias=False, name="dilated")(h)
    h = lib.layers.BatchNormalization(name="dilated_bn")(h)
    model = lib.Model(x, h, name="net")
    randomize(model, lib.layers.BatchNormalization, seed)
    pairs = sum(conv_batch_norm_pairs(model, lib).values())
    # on 3-D data both libraries write the batch norm out as ops
    return _keras_traced(f"{library}_conv1d", model, shape, seed, pairs=pairs, folds=pairs, decomposed=True,
                         signature=("ExpandDims", "Conv2D", "Squeeze", "Rsqrt", "Mul", "AddV2"))


@contextlib.contextmanager
def _float16_policy(lib: Any) -> Iterator[None]:
    """The ``mixed_float16`` dtype policy while layers are built, the previous one after."""
    before = lib.mixed_precision.global_policy()
    lib.mixed_precision.set_global_policy("mixed_float16")
    try:
        yield
    finally:
        lib.mixed_precision.set_global_policy(before)


def tf_keras_mixed_float16_convnet(seed: int = 0) -> ConvModel:
    """tf_keras under the ``mixed_float16`` policy: ``Conv2D`` (bias) and ``DepthwiseConv2D``
    compute in float16 with their float32 weights cast, each followed by
    ``BatchNormalization`` (a ``FusedBatchNormV3`` with T=half, float32 statistics)."""
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    shape = [2, 8, 8, 3]
    with _float16_policy(tf_keras):
        x = tf_keras.Input(batch_shape=tuple(shape), name="x")
        h = tf_keras.layers.Conv2D(8, 3, name="conv")(x)
        h = tf_keras.layers.BatchNormalization(name="bn")(h)
        h = tf_keras.layers.DepthwiseConv2D(3, depth_multiplier=2, use_bias=False, name="dw")(h)
        h = tf_keras.layers.BatchNormalization(name="dw_bn")(h)
        model = tf_keras.Model(x, h, name="net")
    randomize(model, tf_keras.layers.BatchNormalization, seed)
    pairs = conv_batch_norm_pairs(model, tf_keras)
    return _keras_traced("tf_keras_convnet[mixed_float16]", model, shape, seed, pairs=sum(pairs.values()),
                         folds=sum(pairs.values()), depthwise_folds=pairs.get("DepthwiseConv2D", 0),
                         signature=("FusedBatchNormV3", "Cast"), float16=True)


def keras_axis_mismatch(library: str, seed: int = 0) -> ConvModel:
    """A ``channels_first`` ``Conv2D`` followed by ``BatchNormalization()`` left at its
    default ``axis=-1``: it normalizes along W, not along the convolution's channels
    (a real mistake; Keras builds it without complaint)."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    shape = [2, 3, 7, 7]  # 4 channels of 5x5
    x = lib.Input(batch_shape=tuple(shape), name="x")
    h = lib.layers.Conv2D(4, 3, data_format="channels_first", name="conv")(x)
    model = lib.Model(x, lib.layers.BatchNormalization(name="bn")(h), name="net")
    randomize(model, lib.layers.BatchNormalization, seed)
    pairs = sum(conv_batch_norm_pairs(model, lib).values())
    return _keras_traced(f"{library}_axis_mismatch", model, shape, seed, pairs=pairs, refusals=pairs,
                         reason="unsupported data format combination", **_batch_norm_form(library))


def keras_square_channels_first_bias(seed: int = 0) -> ConvModel:
    """Keras 3 ``Conv2D(data_format="channels_first")`` with a bias, as many filters as its
    output is wide, then ``BatchNormalization(axis=1)``: Keras 3's TensorFlow backend adds
    a bias with ``tf.nn.bias_add`` along the last axis whenever its length equals the last
    dimension, so this bias goes along W (``BiasAdd`` NHWC on NCHW data)."""
    import keras

    keras.utils.set_random_seed(seed)
    shape = [2, 3, 6, 6]  # 4 channels of 4x4
    x = keras.Input(batch_shape=tuple(shape), name="x")
    h = keras.layers.Conv2D(4, 3, data_format="channels_first", name="conv")(x)
    model = keras.Model(x, keras.layers.BatchNormalization(axis=1, name="bn")(h), name="net")
    randomize(model, keras.layers.BatchNormalization, seed)
    pairs = sum(conv_batch_norm_pairs(model, keras).values())
    return _keras_traced("keras_square_channels_first_bias", model, shape, seed, pairs=pairs, refusals=pairs,
                         reason="the BiasAdd", **_batch_norm_form("keras"))


def keras_shared_conv(library: str, seed: int = 0) -> ConvModel:
    """A ``Conv2D`` whose output feeds its ``BatchNormalization`` and, through a ReLU, a
    ``Concatenate`` with the normalized branch: the convolution's output is needed twice."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    shape = [2, 6, 6, 3]
    x = lib.Input(batch_shape=tuple(shape), name="x")
    c = lib.layers.Conv2D(4, 3, name="conv")(x)
    y = lib.layers.Concatenate()([lib.layers.BatchNormalization(name="bn")(c), lib.layers.ReLU()(c)])
    model = lib.Model(x, y, name="net")
    randomize(model, lib.layers.BatchNormalization, seed)
    pairs = sum(conv_batch_norm_pairs(model, lib).values())
    return _keras_traced(f"{library}_shared_conv", model, shape, seed, pairs=pairs, refusals=pairs,
                         reason="is also read by", **_batch_norm_form(library))


def keras_negative_variance(seed: int = 0) -> ConvModel:
    """Keras 3 ``Conv2D`` + ``BatchNormalization`` whose moving variance was loaded with a
    negative entry (``variance + epsilon < 0``: the original computes NaN there)."""
    import keras

    keras.utils.set_random_seed(seed)
    shape = [2, 6, 6, 3]
    x = keras.Input(batch_shape=tuple(shape), name="x")
    bn = keras.layers.BatchNormalization(name="bn")
    model = keras.Model(x, bn(keras.layers.Conv2D(4, 3, name="conv")(x)), name="net")
    randomize(model, keras.layers.BatchNormalization, seed)
    gamma, beta, mean, variance = bn.get_weights()
    bn.set_weights([gamma, beta, mean, np.where(np.arange(variance.size) == 2, -0.5, variance).astype(np.float32)])
    return _keras_traced("keras_negative_variance", model, shape, seed, pairs=1, refusals=1,
                         reason="variance + epsilon is not positive in channel 2", **_batch_norm_form("keras"))


def keras_dense_batch_norm(library: str, seed: int = 0) -> ConvModel:
    """A look-alike: ``Dense`` (MatMul + BiasAdd) then ``BatchNormalization`` on rank-2 data."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    x = lib.Input(batch_shape=(2, 8), name="x")
    model = lib.Model(x, lib.layers.BatchNormalization(name="bn")(lib.layers.Dense(4, name="dense")(x)), name="net")
    randomize(model, lib.layers.BatchNormalization, seed)
    return _keras_traced(f"{library}_dense_batch_norm", model, [2, 8], seed, pairs=0,
                         signature=("MatMul", "BiasAdd", "Rsqrt"), decomposed=True)


# ------------------------------------------------------------ Keras applications


def keras_applications_mobilenet_v2(corpus: CorpusModel | None = None) -> ConvModel:
    """Keras 3 ``applications.MobileNetV2`` (alpha 0.35, 32x32 images) as the corpus builds it
    (``corpus``: one the corpus built already, with those settings)."""
    import keras

    if corpus is None:
        corpus = keras_mobilenet_v2(image_size=32, alpha=0.35, classes=10, batch=2, seed=0)
    pairs = _mobilenet_v2_pairs(keras)
    return ConvModel(corpus.graph_def, corpus.inputs, corpus.outputs, name="keras_mobilenet_v2",
                     pairs=sum(pairs.values()), folds=sum(pairs.values()),
                     depthwise_folds=pairs.get("DepthwiseConv2D", 0), **_batch_norm_form("keras"))


def tf_keras_mobilenet_v2(seed: int = 0) -> ConvModel:
    """tf_keras ``applications.MobileNetV2`` (alpha 0.35, 32x32 images, 10 classes, logits),
    random weights and batch-norm statistics, traced over a batch of 2 and frozen."""
    import tensorflow as tf
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    model = tf_keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=10,
                                              classifier_activation=None)
    randomize(model, tf_keras.layers.BatchNormalization, seed, others=False)  # as the corpus' Keras 3 one
    pairs = conv_batch_norm_pairs(model, tf_keras)

    def fn(images):
        return model(images, training=False)

    frozen = _traced("tf_keras_mobilenet_v2", fn, {"images": tf.TensorSpec([2, 32, 32, 3], tf.float32, name="images")},
                     np.random.default_rng(seed))
    return ConvModel(frozen.graph_def, frozen.inputs, frozen.outputs, name=frozen.name, pairs=sum(pairs.values()),
                     folds=sum(pairs.values()), depthwise_folds=pairs.get("DepthwiseConv2D", 0),
                     **_batch_norm_form("tf_keras"))


def _mobilenet_v2_pairs(keras: Any) -> dict[str, int]:
    """Conv -> batch norm pairs of the MobileNetV2 the corpus builds (the same
    architecture, counted on a fresh instance: the corpus keeps only the graph)."""
    model = keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=10,
                                           classifier_activation=None)
    return conv_batch_norm_pairs(model, keras)



# ------------------------------------------------------------------ tf_slim


@contextlib.contextmanager
def _slim_batch_norm_compatible() -> Iterator[None]:
    """tf_slim 1.1's ``batch_norm`` asks ``isinstance(x, ops.Tensor)`` of
    ``tensorflow.python.framework.ops``, which TensorFlow 2.21 no longer defines; while
    the graph is built, that name is the class it always named (``tf.Tensor``)."""
    import tensorflow as tf
    from tensorflow.python.framework import ops

    had = hasattr(ops, "Tensor")
    if not had:
        ops.Tensor = tf.Tensor
    try:
        yield
    finally:
        if not had:
            del ops.Tensor


def slim_conv_batch_norm(fused: bool, data_format: str = "NHWC", is_training: bool = False,
                         seed: int = 0) -> ConvModel:
    """tf_slim ``conv2d`` (3x3, 8 channels) and ``separable_conv2d(num_outputs=None)``
    (a depthwise convolution, multiplier 2), each with ``normalizer_fn=batch_norm``
    (tf_slim's own ``batch_norm``: ``updates_collections`` other than the default keeps it
    off the ``tf.compat.v1.layers`` route), then a 1x1 ``conv2d`` with a bias and no
    normalizer: ``fused=True`` emits ``FusedBatchNormV3``, ``fused=False``
    ``tf.nn.batch_normalization``'s ops; ``is_training=True`` is the training graph."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    shape = [2, 8, 8, 3] if data_format == "NHWC" else [2, 3, 8, 8]
    normalized = [("conv", lambda h, p: tf_slim.conv2d(h, 8, [3, 3], scope="conv", **p)),
                  ("dw", lambda h, p: tf_slim.separable_conv2d(h, None, [3, 3], depth_multiplier=2, scope="dw", **p))]

    def build():
        x = tf1.placeholder(tf.float32, shape, name="x")
        params = {"is_training": is_training, "fused": fused, "scale": True, "data_format": data_format,
                  "updates_collections": "batch_norm_updates", "param_initializers": _slim_initializers(seed)}
        h = x
        for _, layer in normalized:
            h = layer(h, {"normalizer_fn": tf_slim.batch_norm, "normalizer_params": params,
                          "data_format": data_format})
        h = tf_slim.conv2d(h, 4, [1, 1], activation_fn=None, data_format=data_format, scope="head",
                           biases_initializer=tf1.random_normal_initializer(stddev=0.5, seed=seed))
        return {x: rng.normal(size=shape).astype(np.float32)}, [tf.identity(h, name="out")]

    with _slim_batch_norm_compatible():
        frozen = _tf1(f"tf_slim[fused={fused},{data_format},is_training={is_training}]", build, seed)
    pairs = len(normalized)
    depthwise = sum(name == "dw" for name, _ in normalized)
    reason = ("in training mode" if fused else "is not a constant") if is_training else ""
    signature = ("FusedBatchNormV3",) if fused else ("Rsqrt", "Mul", "Sub", "AddV2")
    return ConvModel(frozen.graph_def, frozen.inputs, frozen.outputs, name=frozen.name, pairs=pairs,
                     folds=0 if is_training else pairs, depthwise_folds=0 if is_training else depthwise,
                     refusals=pairs if is_training else 0, reason=reason,
                     decomposed=not fused, signature=signature + ("Conv2D", "DepthwiseConv2dNative"))


def _slim_initializers(seed: int) -> dict[str, Any]:
    import tensorflow as tf

    tf1 = tf.compat.v1
    return {"gamma": tf1.random_uniform_initializer(0.5, 1.5, seed=seed),
            "beta": tf1.random_normal_initializer(stddev=0.1, seed=seed + 1),
            "moving_mean": tf1.random_normal_initializer(stddev=0.1, seed=seed + 2),
            "moving_variance": tf1.random_uniform_initializer(0.5, 2.0, seed=seed + 3)}


def slim_instance_norm(seed: int = 0) -> ConvModel:
    """A look-alike: tf_slim ``conv2d`` then ``instance_norm`` (the corpus' convnet): the same
    ``tf.nn.batch_normalization`` ops, over statistics computed from each image."""
    from tests.models.corpus_models import slim_instance_norm_convnet

    corpus = slim_instance_norm_convnet(convs=2, channels=8, image_size=8, batch=2, seed=seed)
    return ConvModel(corpus.graph_def, corpus.inputs, corpus.outputs, name="tf_slim_instance_norm", pairs=0,
                     refusals=corpus.instance_norms, reason="is not a constant", decomposed=True,
                     signature=("Conv2D", "BiasAdd", "Rsqrt", "SquaredDifference"))


# ------------------------------------------------------------ TensorFlow's API


def tf_nn_fused_batch_norm(read_statistics: bool, seed: int = 0) -> ConvModel:
    """``tf.nn.conv2d`` then ``tf.compat.v1.nn.fused_batch_norm(is_training=False)`` in a
    ``tf.function``, unscoped (the nodes are ``Conv2D`` and ``FusedBatchNormV3``).  The
    function returns the normalized output or, with ``read_statistics``, all three of the
    call's outputs (y, mean, variance), as a caller of TensorFlow's API may."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    w = rng.normal(0.0, 0.5, (3, 3, 3, 4)).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 1.5, 4).astype(np.float32), rng.normal(0.0, 0.1, 4).astype(np.float32)
    mean, variance = rng.normal(0.0, 0.1, 4).astype(np.float32), rng.uniform(0.5, 2.0, 4).astype(np.float32)

    def fn(x):
        conv = tf.nn.conv2d(x, w, strides=1, padding="SAME")
        y, batch_mean, batch_variance = tf.compat.v1.nn.fused_batch_norm(conv, gamma, beta, mean=mean,
                                                                         variance=variance, is_training=False)
        return (y, batch_mean, batch_variance) if read_statistics else y

    name = f"tf_nn_fused_batch_norm[read_statistics={read_statistics}]"
    frozen = _traced(name, fn, {"x": tf.TensorSpec([2, 6, 6, 3], tf.float32, name="x")}, rng)
    known = ({"refusals": 1, "reason": "folding keeps only the normalized output"} if read_statistics
             else {"folds": 1})
    return ConvModel(frozen.graph_def, frozen.inputs, frozen.outputs, name=name, pairs=1,
                     signature=("Conv2D", "FusedBatchNormV3"), **known)


# ------------------------------------------------------------------ tables

FOLD_FORMS: dict[str, Callable[[], ConvModel]] = {
    "tf_keras_convnet[channels_last]": lambda: keras_convnet("tf_keras", "channels_last"),
    "tf_keras_convnet[channels_first]": lambda: keras_convnet("tf_keras", "channels_first"),
    "keras_convnet[channels_last]": lambda: keras_convnet("keras", "channels_last"),
    "keras_convnet[channels_first]": lambda: keras_convnet("keras", "channels_first"),
    "tf_keras_convnet[mixed_float16]": tf_keras_mixed_float16_convnet,
    "tf_keras_conv1d": lambda: keras_conv1d("tf_keras"),
    "keras_conv1d": lambda: keras_conv1d("keras"),
    "tf_slim[fused,NHWC]": lambda: slim_conv_batch_norm(True, "NHWC"),
    "tf_slim[fused,NCHW]": lambda: slim_conv_batch_norm(True, "NCHW"),
    "tf_slim[ops,NHWC]": lambda: slim_conv_batch_norm(False, "NHWC"),
    "tf_slim[ops,NCHW]": lambda: slim_conv_batch_norm(False, "NCHW"),
    "tf_nn_fused_batch_norm": lambda: tf_nn_fused_batch_norm(read_statistics=False),
}
REFUSED_FORMS: dict[str, Callable[[], ConvModel]] = {
    "tf_slim[fused,training]": lambda: slim_conv_batch_norm(True, "NHWC", is_training=True),
    "tf_slim[ops,training]": lambda: slim_conv_batch_norm(False, "NHWC", is_training=True),
    "tf_slim[ops,NCHW,training]": lambda: slim_conv_batch_norm(False, "NCHW", is_training=True),
    "tf_keras_axis_mismatch": lambda: keras_axis_mismatch("tf_keras"),
    "keras_axis_mismatch": lambda: keras_axis_mismatch("keras"),
    "keras_square_channels_first_bias": keras_square_channels_first_bias,
    "tf_keras_shared_conv": lambda: keras_shared_conv("tf_keras"),
    "keras_shared_conv": lambda: keras_shared_conv("keras"),
    "keras_negative_variance": keras_negative_variance,
    "tf_nn_fused_batch_norm[read_statistics]": lambda: tf_nn_fused_batch_norm(read_statistics=True),
    "tf_slim_instance_norm": slim_instance_norm,
}
LOOK_ALIKES: dict[str, Callable[[], ConvModel]] = {
    "tf_keras_dense_batch_norm": lambda: keras_dense_batch_norm("tf_keras"),
    "keras_dense_batch_norm": lambda: keras_dense_batch_norm("keras"),
}
