"""Frozen graphs whose norms and activations are spelt in ways no pattern writes out, built by
the real library code that spells them so, for the canonical-matching tests
(``test_canonical_forms.py``):

* a layer norm written with tf_keras backend functions (``K.mean``, ``K.var``, ``K.sqrt``):
  ``K.sqrt`` clips its argument with ``tf.maximum(x, 0)`` before the root, so the square
  root reads ``Maximum(variance + epsilon, 0)``; and the same with the variance clipped to a
  tiny floor instead of an epsilon added (``K.sqrt(K.maximum(variance, 1e-12))``);
* a tanh GELU written with Keras 3 ``ops`` as ``0.044715 * x * x * x`` (the constant
  multiplied first) and in other groupings;
* Sonnet 2 ``snt.BatchNorm`` after ``snt.Conv2D`` in inference: the fused batch norm reads
  its moving mean and variance as ``Squeeze(Identity(Const))``;
* Sonnet 2 ``snt.GroupNorm``: moments over the grouped input, ``tf.nn.batch_normalization``
  without scale or offset, the reshape back, then ``* scale + offset`` per channel.

Each builder says what its code computes (the counts come from the layers it builds), and
each has a look-alike that must not fuse.  Tiny sizes, random weights.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tests.models.activation_models import ActivationModel, _traced
from tests.models.conv_models import ConvModel
from tests.models.norm_models import HIDDEN, NormModel, params, traced

EPS = 1e-5


def keras_backend_layer_norm(clip: str, layers: int = 2) -> NormModel:
    """Layer norms written with ``tf_keras.backend``: ``(x - K.mean(x)) / K.sqrt(...) * gamma +
    beta`` over the last axis, ``layers`` of them.  ``clip``: ``"epsilon"`` takes ``K.sqrt(var +
    eps)`` (the root reads ``Maximum(var + eps, 0)``), ``"tiny"`` ``K.sqrt(K.maximum(var,
    1e-12))`` (a floor for epsilon), ``"large"`` the look-alike ``K.sqrt(K.maximum(var, 0.5))``,
    which no layer norm computes."""
    import tensorflow as tf
    from tf_keras import backend as K

    floor = {"tiny": 1e-12, "large": 0.5}.get(clip)

    def norm(x: Any, i: int) -> Any:
        gamma, beta = params(HIDDEN, 10 + i, 1.0), params(HIDDEN, 20 + i)
        mean = K.mean(x, axis=-1, keepdims=True)
        var = K.var(x, axis=-1, keepdims=True)
        std = K.sqrt(var + EPS) if floor is None else K.sqrt(K.maximum(var, floor))
        return (x - mean) / std * gamma + beta

    def fn(x: Any) -> Any:
        for i in range(layers):
            x = tf.nn.relu(norm(x, i))
        return x

    specs = {"x": tf.TensorSpec([2, 4, HIDDEN], tf.float32, name="x")}
    fused = layers if clip != "large" else 0
    return traced(f"keras_backend_layer_norm[{clip}]", fn, specs, graph_layer_norms=fused, layer_norms=fused,
                  signature=("Maximum", "Sqrt", "RealDiv"),
                  attrs={"begin_norm_axis": -1, "begin_params_axis": -1, "epsilon": floor or EPS})


def keras_ops_tanh_gelu(grouping: str, layers: int = 2) -> ActivationModel:
    """A dense layer's output through the tanh GELU written with Keras 3 ``ops``, ``layers``
    times, the cube in the grouping named: ``"constant_first"`` ``0.044715 * x * x * x``,
    ``"nested"`` ``x * (x * x) * 0.044715``, ``"middle"`` ``x * 0.044715 * x * x``; the
    look-alike ``"square"`` multiplies by ``x * x`` only (not a GELU); ``"shared_square"``
    computes ``0.044715 * (x * x) * x`` and returns ``x * x`` too, which fusing would lose."""
    import keras
    import tensorflow as tf
    from keras import ops

    c, k = 0.044715, math.sqrt(2.0 / math.pi)

    def cube_term(x: Any) -> Any:
        if grouping == "constant_first":
            return c * x * x * x
        if grouping == "nested":
            return x * (x * x) * c
        if grouping == "middle":
            return x * c * x * x
        return c * x * x  # "square"

    def gelu(x: Any) -> Any:
        return 0.5 * x * (1.0 + ops.tanh(k * (x + cube_term(x))))

    squares = []

    def gelu_sharing_its_square(x: Any) -> Any:  # x * x is read by the GELU and returned
        square = x * x
        squares.append(square)
        return 0.5 * x * (1.0 + ops.tanh(k * (x + c * square * x)))

    rng = np.random.default_rng(3)
    denses = [keras.layers.Dense(HIDDEN) for _ in range(layers)]
    for d in denses:
        d.build((None, HIDDEN))
        d.set_weights([rng.normal(0, 0.5, (HIDDEN, HIDDEN)).astype(np.float32),
                       rng.normal(0, 0.5, HIDDEN).astype(np.float32)])

    def fn(x: Any) -> Any:
        squares.clear()
        for d in denses:
            x = gelu_sharing_its_square(d(x)) if grouping == "shared_square" else gelu(d(x))
        return [x, *squares] if squares else x

    specs = {"x": tf.TensorSpec([2, HIDDEN], tf.float32, name="x")}
    gelus = 0 if grouping in ("square", "shared_square") else layers
    return _traced(f"keras_ops_tanh_gelu[{grouping}]", fn, specs, rng, gelus=gelus, approximate=True,
                   signature=("Tanh", "Mul"))


def sonnet_conv_batch_norm(local_stats: bool = False, layers: int = 2, seed: int = 0) -> ConvModel:
    """``snt.Conv2D`` then ``snt.BatchNorm`` (channels last, so fused: ``FusedBatchNormV2``),
    ``layers`` times, called with ``is_training=False``.  The batch norm reads its moving
    statistics squeezed to one value per channel, ``Squeeze(Identity(Const))`` once frozen;
    with ``test_local_stats=True`` (the look-alike) it normalises by the batch's own statistics
    (the fused op in training mode)."""
    import sonnet as snt
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    convs = [snt.Conv2D(4, 3, name=f"conv{i}") for i in range(layers)]
    norms = [snt.BatchNorm(create_scale=True, create_offset=True, name=f"bn{i}") for i in range(layers)]
    h = tf.zeros([2, 6, 6, 3])
    for conv, bn in zip(convs, norms, strict=True):  # create every variable, then give it random values
        h = bn(conv(h), is_training=False)
    for conv, bn in zip(convs, norms, strict=True):
        conv.w.assign(rng.normal(0, 0.5, conv.w.shape).astype(np.float32))
        conv.b.assign(rng.normal(0, 0.5, conv.b.shape).astype(np.float32))
        bn.scale.assign(rng.uniform(0.5, 1.5, bn.scale.shape).astype(np.float32))
        bn.offset.assign(rng.normal(0, 0.1, bn.offset.shape).astype(np.float32))
        bn.moving_mean.average.assign(rng.normal(0, 0.1, bn.moving_mean.average.shape).astype(np.float32))
        bn.moving_variance.average.assign(rng.uniform(0.5, 2.0, bn.moving_variance.average.shape).astype(np.float32))

    def fn(x: Any) -> Any:
        for conv, bn in zip(convs, norms, strict=True):
            x = tf.nn.relu(bn(conv(x), is_training=False, test_local_stats=local_stats))
        return x

    frozen = _traced(f"sonnet_conv_batch_norm[local_stats={local_stats}]", fn,
                     {"x": tf.TensorSpec([2, 6, 6, 3], tf.float32, name="x")}, rng)
    return ConvModel(frozen.graph_def, frozen.inputs, frozen.outputs, name=frozen.name, pairs=layers,
                     folds=0 if local_stats else layers, refusals=layers if local_stats else 0,
                     reason="training mode",
                     signature=("FusedBatchNormV2",) if local_stats else ("FusedBatchNormV2", "Squeeze"))


def sonnet_group_norm(create_scale: bool = True, layers: int = 2, seed: int = 0) -> NormModel:
    """``snt.GroupNorm(groups=2)`` on channels-last activations, ``layers`` times: the scale
    and offset are applied after the reshape back to the input's shape.  With
    ``create_scale=False`` (the look-alike) there is no scale: GroupNorm cannot take it."""
    import sonnet as snt
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    norms = [snt.GroupNorm(groups=2, create_scale=create_scale, create_offset=True, name=f"gn{i}")
             for i in range(layers)]
    x0 = tf.zeros([2, 5, 5, HIDDEN])
    for gn in norms:
        gn(x0)
        if create_scale:
            gn.scale.assign(rng.uniform(0.5, 1.5, gn.scale.shape).astype(np.float32))
        gn.offset.assign(rng.normal(0, 0.1, gn.offset.shape).astype(np.float32))

    def fn(x: Any) -> Any:
        for gn in norms:
            x = tf.nn.relu(gn(x))
        return x

    specs = {"x": tf.TensorSpec([2, 5, 5, HIDDEN], tf.float32, name="x")}
    return traced(f"sonnet_group_norm[scale={create_scale}]", fn, specs, group_norms=layers if create_scale else 0,
                  signature=("Reshape", "Mean", "Rsqrt"),
                  attrs={"num_groups": 2, "epsilon": 1e-5, "data_format": "NHWC"})
