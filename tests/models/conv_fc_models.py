"""Frozen graphs with convolutions whose filter covers the whole input (fully connected layers written
as convolutions), built by the libraries that write them: a tf_slim VGG head, Keras 3 and tf_keras
MobileNet (its ``conv_preds``), Keras "fully convolutional" classifier heads; and their look-alikes
(a grouped convolution, written with ``tf.nn.conv2d`` as no library writes one outside a function).

Each builder returns an ``activation_models2.PassModel`` whose ``expected`` counts the convolutions the
architecture makes fully connected and whose ``attrs`` say how many carry a bias (``biased``), how
many matches are refused (``refused``) and the reason they share (``reason``).  Tiny sizes, random
weights (biases too).  ``FC_FORMS`` and ``FC_REFUSALS`` name every builder.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from tests.models import activation_models as am
from tests.models.activation_models2 import PassModel, traced


def slim_vgg_head(seed: int = 0) -> PassModel:
    """tf_slim's VGG head, as ``tf_slim.nets.vgg`` writes it (under ``vgg_arg_scope``, SAME padding by
    default), at a size a test runs: a 3x3 convolution and a 2x2 pool of an 8x8 image, then ``fc6`` a
    4x4 VALID convolution over the 4x4 map, ``fc7`` and ``fc8`` 1x1 convolutions over the 1x1 result,
    and the spatial squeeze.  3 fully connected layers, each with its bias; the 3x3 SAME convolution
    is not looked at."""
    import tensorflow as tf
    import tf_slim as slim
    from tf_slim.nets import vgg

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        x = tf1.placeholder(tf.float32, [2, 8, 8, 3], name="x")
        with slim.arg_scope(vgg.vgg_arg_scope()), slim.arg_scope(
                [slim.conv2d], biases_initializer=tf1.random_normal_initializer(stddev=0.5)):
            net = slim.conv2d(x, 8, [3, 3], scope="conv1")
            net = slim.max_pool2d(net, [2, 2], scope="pool1")
            net = slim.conv2d(net, 16, [4, 4], padding="VALID", scope="fc6")
            net = slim.dropout(net, 0.5, is_training=False, scope="dropout6")
            net = slim.conv2d(net, 16, [1, 1], scope="fc7")
            net = slim.conv2d(net, 5, [1, 1], activation_fn=None, normalizer_fn=None, scope="fc8")
        return {x: rng.normal(size=(2, 8, 8, 3)).astype(np.float32)}, [tf.squeeze(net, [1, 2], name="logits")]

    model = am._tf1("slim_vgg_head", build, seed, signature=("Conv2D", "BiasAdd"))
    return PassModel.of(model, 3, biased=3, refused=0)


def mobilenet(library: str, seed: int = 0) -> PassModel:
    """Keras 3 (``library="keras"``) or tf_keras MobileNet (alpha 0.25, 64x64 images, 4 classes): its
    ``conv_preds`` is a 1x1 convolution with a bias over the 1x1 map the global pooling keeps.  The 13
    pointwise convolutions slide over larger maps: refused."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    net = lib.applications.MobileNet(input_shape=(64, 64, 3), alpha=0.25, weights=None, classes=4)
    am._randomize_keras([net.get_layer("conv_preds")], seed)
    model = am._traced(f"{library}_mobilenet", lambda x: net(x, training=False), {"x": am._spec([2, 64, 64, 3])},
                       np.random.default_rng(seed), signature=("Conv2D", "DepthwiseConv2dNative"))
    return PassModel.of(model, 1, biased=1, refused=13, reason="1x1 filter slides over a")


def keras_head(library: str, use_bias: bool = True, kernel: int = 3, seed: int = 0) -> PassModel:
    """A Keras 3 or tf_keras classifier ending in a convolution as large as its feature map: a 3x3 SAME
    ``Conv2D`` of a [2, 6, 6, 3] image to 4 channels, then ``Conv2D(5, kernel, padding="valid")`` with
    a relu.  ``kernel`` 6 covers the map: one fully connected layer (with the bias or without);
    ``kernel`` 3 slides: refused."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    layers = lib.layers
    image = lib.Input((6, 6, 3), batch_size=2)
    hidden = layers.Conv2D(4, 3, padding="same")(image)
    head = layers.Conv2D(5, kernel, padding="valid", use_bias=use_bias, activation="relu")
    net = lib.Model(image, head(hidden))
    am._randomize_keras(net.layers[1:], seed)
    name = f"{library}_head[bias={use_bias},kernel={kernel}]"
    model = am._traced(name, lambda x: net(x), {"x": am._spec([2, 6, 6, 3])}, np.random.default_rng(seed),
                       signature=("Conv2D",))
    if kernel != 6:
        return PassModel.of(model, 0, refused=1, reason="3x3 filter slides over a 6x6 input")
    return PassModel.of(model, 1, biased=int(use_bias), refused=0)


def grouped_covering() -> PassModel:
    """``tf.nn.conv2d`` of a [2, 6, 6, 4] map with a [6, 6, 2, 6] filter: a VALID filter as large as
    the map, but taking 2 of its 4 channels, a grouped convolution (2 groups), which Keras writes
    inside a function of its own; no CPU kernel runs it.  Refused."""
    import tensorflow as tf

    w = np.random.default_rng(1).normal(size=(6, 6, 2, 6)).astype(np.float32)

    def fn(x):
        return tf.nn.relu(tf.nn.conv2d(x, tf.constant(w), 1, "VALID"))

    return traced("grouped_covering", fn, [2, 6, 6, 4], 0, signature=("Conv2D",), refused=1,
                  reason="a grouped convolution")


FC_FORMS: dict[str, Callable[[], PassModel]] = {
    "slim_vgg_head": slim_vgg_head,
    **{f"{lib}_mobilenet": functools.partial(mobilenet, lib) for lib in ("keras", "tf_keras")},
    **{f"{lib}_head": functools.partial(keras_head, lib, kernel=6) for lib in ("keras", "tf_keras")},
    "keras_head_no_bias": functools.partial(keras_head, "keras", use_bias=False, kernel=6),
}
FC_REFUSALS: dict[str, Callable[[], PassModel]] = {
    "grouped_covering": grouped_covering,
    "tf_keras_sliding": functools.partial(keras_head, "tf_keras", kernel=3),
}
