"""Frozen graphs in which a dense layer or a convolution, with its bias, is followed by
one activation, built by the libraries that produce them (Keras 3, tf_keras, tf_slim),
and graphs where such a pair must not be fused.

Every builder returns an ``activation_models2.PassModel`` whose ``attrs`` say how many
``MatMulBiasAddActivation`` (``matmul``) and ``Conv2DBiasAddActivation`` (``conv``) ops the
model's layers call for and the activation attributes every one must carry
(``fused``).  Sizes are tiny, weights and biases random.

``EPILOGUE_FORMS`` and ``EPILOGUE_REFUSALS`` name every builder, for parametrized tests.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from tests.models import activation_models as am
from tests.models.activation_models2 import PassModel, traced

#: Keras activation name -> what the fused op carries (Keras' own defaults: LeakyReLU's
#: negative slope 0.2, GELU's erf form, SiLU/swish with beta 1).
KERAS_ACTIVATIONS: dict[str, dict[str, Any]] = {
    "relu": {"activation": "Relu"},
    "relu6": {"activation": "Relu6"},
    "elu": {"activation": "Elu"},
    "leaky_relu": {"activation": "LeakyRelu", "alpha": 0.2},
    "sigmoid": {"activation": "Sigmoid"},
    "tanh": {"activation": "Tanh"},
    "gelu": {"activation": "Gelu", "approximate": False},
    "silu": {"activation": "Swish", "beta": 1.0},
    "swish": {"activation": "Swish", "beta": 1.0},
}


def keras_layers(library: str, activation: str, seed: int = 0) -> PassModel:
    """Keras 3 (``library="keras"``) or tf_keras: ``Conv2D(4, 3, padding="same",
    activation=...)`` on a [2, 6, 6, 3] image, then ``Dense(5, activation=...)`` on it
    flattened (rank 2: MatMul + BiasAdd) and on it as it is (rank 4: through Tensordot).
    One fused convolution, two fused products."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    conv = lib.layers.Conv2D(4, 3, padding="same", activation=activation, name="conv")
    flat = lib.layers.Dense(5, activation=activation, name="dense")
    pointwise = lib.layers.Dense(5, activation=activation, name="pointwise")
    conv.build((2, 6, 6, 3))
    flat.build((2, 144))
    pointwise.build((2, 6, 6, 4))
    am._randomize_keras([conv, flat, pointwise], seed)

    def fn(x):
        h = conv(x)
        return flat(lib.layers.Flatten()(h)), pointwise(h)

    return traced(f"{library}[{activation}]", fn, [2, 6, 6, 3], 3, signature=("Conv2D", "MatMul", "BiasAdd"),
                  matmul=2, conv=1, fused=KERAS_ACTIVATIONS[activation])


#: tf_slim ``activation_fn`` (a TensorFlow function and keyword arguments) -> what the
#: fused op carries (parameters other than the defaults included).
SLIM_ACTIVATIONS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "relu": ("nn.relu", {}, {"activation": "Relu"}),
    "relu6": ("nn.relu6", {}, {"activation": "Relu6"}),
    "elu": ("nn.elu", {}, {"activation": "Elu"}),
    "leaky_relu_0.1": ("nn.leaky_relu", {"alpha": 0.1}, {"activation": "LeakyRelu", "alpha": 0.1}),
    "sigmoid": ("sigmoid", {}, {"activation": "Sigmoid"}),
    "tanh": ("tanh", {}, {"activation": "Tanh"}),
    "gelu_tanh": ("nn.gelu", {"approximate": True}, {"activation": "Gelu", "approximate": True}),
    "swish_1.5": ("nn.swish", {"beta": 1.5}, {"activation": "Swish", "beta": 1.5}),
}


def slim_layers(activation: str, seed: int = 0) -> PassModel:
    """tf_slim ``conv2d(activation_fn=...)`` on a [2, 6, 6, 3] image, ``flatten``, then
    ``fully_connected(activation_fn=...)`` in a TF1 graph: one of each fused op."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    path, kwargs, fused = SLIM_ACTIVATIONS[activation]
    activation_fn = functools.partial(functools.reduce(getattr, path.split("."), tf), **kwargs)

    def build():
        x = tf1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
        kernel, bias = am._initializers(seed)
        h = tf_slim.conv2d(x, 4, [3, 3], activation_fn=activation_fn, weights_initializer=kernel,
                           biases_initializer=bias, scope="conv")
        h = tf_slim.fully_connected(tf_slim.flatten(h), 5, activation_fn=activation_fn, weights_initializer=kernel,
                                    biases_initializer=bias, scope="fc")
        return {x: rng.normal(size=(2, 6, 6, 3)).astype(np.float32)}, [tf.identity(h, name="out")]

    model = am._tf1(f"tf_slim[{activation}]", build, seed, signature=("Conv2D", "MatMul", "BiasAdd"))
    return PassModel.of(model, 2, matmul=1, conv=1, fused=fused)


def refusal(which: str, seed: int = 0) -> PassModel:
    """A product, convolution or bias add followed by an activation that must stay apart:

    ``keras_pre_activation_read``: Keras 3 ``Dense(8)``, ``Activation("relu")`` and a
    residual ``Add`` of the pre-activation; ``slim_pre_activation_read``: tf_slim
    ``conv2d(activation_fn=None)``, ReLU, and the pre-activation added back (a residual
    block's shortcut); ``convolution_read``: ``tf.nn.conv2d`` whose output is also a graph
    output; ``bias_add_nchw``: a BiasAdd in NCHW after an NHWC convolution (the bias runs
    along the rows)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    if which == "keras_pre_activation_read":
        import keras

        keras.utils.set_random_seed(seed)
        dense = keras.layers.Dense(8, name="dense")
        dense.build((2, 8))
        am._randomize_keras([dense], seed)
        relu, add = keras.layers.Activation("relu"), keras.layers.Add()

        def fn(x):
            h = dense(x)
            return add([relu(h), h])

        return traced(which, fn, [2, 8], 0, signature=("MatMul", "BiasAdd", "Relu"), matmul=0, conv=0,
                      reason="the pre-activation")

    def build():
        import tf_slim

        x = tf1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
        kernel, bias = am._initializers(seed)
        if which == "slim_pre_activation_read":
            h = tf_slim.conv2d(x, 3, [3, 3], activation_fn=None, weights_initializer=kernel,
                               biases_initializer=bias, scope="conv")
            outs = [tf.nn.relu(h) + h]
        else:
            w = tf1.get_variable("w", [3, 3, 3, 6], initializer=kernel)
            b = tf1.get_variable("b", [6], initializer=bias)
            conv = tf.nn.conv2d(x, w, strides=1, padding="SAME")
            fmt = "NCHW" if which == "bias_add_nchw" else "NHWC"
            outs = [tf.nn.relu(tf.nn.bias_add(conv, b, data_format=fmt))]
            if which == "convolution_read":
                outs.append(conv * 2.0)
        feed = rng.normal(size=(2, 6, 6, 3)).astype(np.float32)
        return {x: feed}, [tf.identity(o, name=f"out{i}") for i, o in enumerate(outs)]

    reason = {"slim_pre_activation_read": "the pre-activation", "convolution_read": "the convolution",
              "bias_add_nchw": "adds in data format NCHW to a NHWC convolution"}[which]
    model = am._tf1(which, build, seed, signature=("Conv2D", "BiasAdd", "Relu"))
    return PassModel.of(model, 0, matmul=0, conv=0, reason=reason)


def look_alike(which: str, seed: int = 0) -> PassModel:
    """Not an epilogue this pass takes: ``softplus`` and ``selu``: Keras 3 ``Dense`` with an
    activation it does not carry; ``no_bias``: ``Dense(use_bias=False, activation="relu")``
    (a MatMul, no MatMulBiasAdd)."""
    import keras

    keras.utils.set_random_seed(seed)
    if which == "no_bias":
        dense = keras.layers.Dense(5, activation="relu", use_bias=False)
    else:
        dense = keras.layers.Dense(5, activation=which)
    dense.build((2, 8))
    am._randomize_keras([dense], seed)
    return traced(f"look_alike[{which}]", lambda x: dense(x), [2, 8], 0, signature=("MatMul",), matmul=0, conv=0)


EPILOGUE_FORMS: dict[str, Callable[[], PassModel]] = {
    **{f"{lib}_{act}": functools.partial(keras_layers, lib, act)
       for lib in ("keras", "tf_keras") for act in KERAS_ACTIVATIONS},
    **{f"tf_slim_{act}": functools.partial(slim_layers, act) for act in SLIM_ACTIVATIONS},
}

EPILOGUE_REFUSALS: dict[str, Callable[[], PassModel]] = {
    w: functools.partial(refusal, w)
    for w in ("keras_pre_activation_read", "slim_pre_activation_read", "convolution_read", "bias_add_nchw")
}

EPILOGUE_LOOK_ALIKES: dict[str, Callable[[], PassModel]] = {
    w: functools.partial(look_alike, w) for w in ("softplus", "selu", "no_bias")
}
