"""Frozen graphs in which a convolution adds its bias with nothing after it, built by the
libraries that produce them (Keras 3, tf_keras, tf_slim, TensorFlow), and graphs where such
a pair must not be fused.

Every builder returns an ``activation_models2.PassModel`` whose ``attrs`` say how many
``Conv2DBiasAdd`` (``conv``) and ``DepthwiseConv2dNativeBiasAdd`` (``depthwise``) ops the
model's layers call for, or (refusals) the words the refusal must contain.  Sizes are
tiny, weights and biases random.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from tests.models import activation_models as am
from tests.models.activation_models2 import PassModel, traced

IMAGE = [2, 6, 6, 3]


def keras_layers(library: str, seed: int = 0) -> PassModel:
    """Keras 3 or tf_keras ``Conv2D(4, 3)``, then ``DepthwiseConv2D(3)``, then a 1x1
    ``Conv2D`` with ``strides=2``, none with an activation: two fused convolutions and one
    fused depthwise convolution."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    conv = lib.layers.Conv2D(4, 3, padding="same", name="conv")
    depthwise = lib.layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2, name="depthwise")
    pointwise = lib.layers.Conv2D(5, 1, strides=2, name="pointwise")
    conv.build(tuple(IMAGE))
    depthwise.build((2, 6, 6, 4))
    pointwise.build((2, 6, 6, 8))
    am._randomize_keras([conv, depthwise, pointwise], seed)
    return traced(f"{library}_conv", lambda x: pointwise(depthwise(conv(x))), IMAGE, 3,
                  signature=("Conv2D", "DepthwiseConv2dNative", "BiasAdd"), conv=2, depthwise=1)


def keras_conv_batchnorm(seed: int = 0) -> PassModel:
    """tf_keras ``Conv2D(use_bias=False)`` + ``BatchNormalization``: the batch-norm pass folds
    it into a Conv2D + BiasAdd, which this pass then fuses."""
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    conv = tf_keras.layers.Conv2D(4, 3, padding="same", use_bias=False, name="conv")
    norm = tf_keras.layers.BatchNormalization(name="bn")
    conv.build(tuple(IMAGE))
    norm.build((2, 6, 6, 4))
    am._randomize_keras([conv], seed)
    rng = np.random.default_rng(seed)
    norm.set_weights([rng.uniform(0.5, 1.5, 4).astype(np.float32), rng.normal(0, 0.5, 4).astype(np.float32),
                      rng.normal(0, 0.5, 4).astype(np.float32), rng.uniform(0.5, 1.5, 4).astype(np.float32)])
    return traced("tf_keras_conv_batchnorm", lambda x: norm(conv(x), training=False), IMAGE, 1,
                  signature=("Conv2D", "FusedBatchNormV3"), conv=1, depthwise=0)


def _tf1_graph(name: str, body: Callable, expected: int, signature: tuple[str, ...], seed: int = 0,
               **attrs: object) -> PassModel:
    """A TF1 graph: ``body(x, variable)`` returns the output tensors."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        x = tf1.placeholder(tf.float32, IMAGE, name="x")
        kernel, _ = am._initializers(seed)

        def variable(var_name, shape):
            return tf1.get_variable(var_name, shape, initializer=kernel)

        with tf1.variable_scope("block"):
            outs = body(x, variable)
        return {x: rng.normal(size=IMAGE).astype(np.float32)}, [tf.identity(o, name=f"out{i}")
                                                                  for i, o in enumerate(outs)]

    return PassModel.of(am._tf1(name, build, seed, signature=signature), expected, **attrs)


def slim_layers(seed: int = 0) -> PassModel:
    """tf_slim ``conv2d(activation_fn=None)`` and ``separable_conv2d(activation_fn=None)``
    (a depthwise convolution, then a pointwise Conv2D with the bias): two fused convolutions."""
    import tf_slim

    def body(x, variable):
        kernel, bias = am._initializers(seed)
        h = tf_slim.conv2d(x, 4, [3, 3], activation_fn=None, weights_initializer=kernel,
                           biases_initializer=bias, scope="conv")
        return [tf_slim.separable_conv2d(h, 6, [3, 3], depth_multiplier=1, activation_fn=None,
                                         weights_initializer=kernel, pointwise_initializer=kernel,
                                         biases_initializer=bias, scope="separable")]

    return _tf1_graph("tf_slim_conv", body, 2, ("Conv2D", "DepthwiseConv2dNative", "BiasAdd"), seed,
                      conv=2, depthwise=0)


def hand_written(form: str, seed: int = 0) -> PassModel:
    """``tf.nn.conv2d`` / ``tf.nn.depthwise_conv2d`` plus a bias, as TF users write it:

    ``bias_add``: ``tf.nn.bias_add(conv, b)``; ``add``: ``conv + b``, b of shape [C];
    ``radd_1x1x1xc``: ``b + conv``, b of shape [1, 1, 1, C]; ``depthwise_add``:
    ``tf.nn.depthwise_conv2d(x, w) + b`` with a channel multiplier of 2 (C = 6)."""
    import tensorflow as tf

    def body(x, variable):
        if form == "depthwise_add":
            conv = tf.nn.depthwise_conv2d(x, variable("w", [3, 3, 3, 2]), [1, 1, 1, 1], "SAME")
            return [conv + variable("b", [6])]
        conv = tf.nn.conv2d(x, variable("w", [3, 3, 3, 4]), strides=1, padding="VALID")
        if form == "bias_add":
            return [tf.nn.bias_add(conv, variable("b", [4]))]
        if form == "add":
            return [conv + variable("b", [4])]
        return [variable("b", [1, 1, 1, 4]) + conv]

    depthwise = form == "depthwise_add"
    conv_op = "DepthwiseConv2dNative" if depthwise else "Conv2D"
    return _tf1_graph(f"tf[{form}]", body, 1, (conv_op, "BiasAdd" if form == "bias_add" else "AddV2"), seed,
                      conv=int(not depthwise), depthwise=int(depthwise))


def refusal(which: str, seed: int = 0) -> PassModel:
    """A convolution and an added tensor that must stay apart:

    ``convolution_read``: ``tf.nn.conv2d`` plus a bias, the convolution also a graph output;
    ``feature_map``: a convolution plus another [N, H, W, C] tensor (a residual shortcut);
    ``wrong_axis``: a [4, 1, 1] tensor added to a [2, 4, 4, 4] NHWC convolution (it
    broadcasts along the rows).  (A BiasAdd in NCHW after an NHWC convolution, refused with the
    same check as the epilogue pass's, cannot be run alone: TensorFlow's own remapper fuses the
    pair and fails on it.)"""
    import tensorflow as tf

    def body(x, variable):
        padding = "VALID" if which == "wrong_axis" else "SAME"  # [2, 4, 4, 4]: the vector broadcasts
        conv = tf.nn.conv2d(x, variable("w", [3, 3, 3, 4]), strides=1, padding=padding)
        if which == "convolution_read":
            return [conv + variable("b", [4]), conv]
        if which == "feature_map":
            return [conv + tf.tile(x[..., :1], [1, 1, 1, 4])]
        if which == "wrong_axis":
            return [conv + variable("b", [4, 1, 1])]
        raise ValueError(which)

    reason = {"convolution_read": "is also read by", "feature_map": "not one value per output channel",
              "wrong_axis": "not one value per output channel"}[which]
    return _tf1_graph(f"refusal[{which}]", body, 0, ("Conv2D", "AddV2"), seed, reason=reason)


CONV_BIAS_FORMS: dict[str, Callable[[], PassModel]] = {
    "keras": functools.partial(keras_layers, "keras"),
    "tf_keras": functools.partial(keras_layers, "tf_keras"),
    "tf_keras_conv_batchnorm": keras_conv_batchnorm,
    "tf_slim": slim_layers,
    **{f"tf_{f}": functools.partial(hand_written, f) for f in ("bias_add", "add", "radd_1x1x1xc", "depthwise_add")},
}

CONV_BIAS_REFUSALS: dict[str, Callable[[], PassModel]] = {
    w: functools.partial(refusal, w) for w in ("convolution_read", "feature_map", "wrong_axis")
}
