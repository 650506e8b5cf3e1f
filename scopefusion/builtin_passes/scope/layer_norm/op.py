"""The ``LayerNorm`` fused op: its definition and TensorFlow reference."""
from __future__ import annotations

from typing import Any

from ....core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg


def layer_norm_reference(
    x: Any, gamma: Any, beta: Any, *, begin_norm_axis: int, begin_params_axis: int, epsilon: float, T: Any
) -> tuple[Any, Any, Any]:
    """Normalise ``x`` over axes ``[begin_norm_axis, rank)``, then scale and shift."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    rank = tf.rank(x)
    start = begin_norm_axis if begin_norm_axis >= 0 else rank + begin_norm_axis
    axes = tf.range(start, rank)
    mean = tf.reduce_mean(x, axes, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(x, mean), axes, keepdims=True)
    y = (x - mean) * tf.math.rsqrt(variance + tf.cast(epsilon, x.dtype)) * gamma + beta
    return y, mean, variance


LAYER_NORM = FusedOpDef(
    name="LayerNorm",
    inputs=(
        TensorArg("x", type_attr="T"),
        TensorArg("gamma", type_attr="T", description="scale, shape x.shape[begin_params_axis:]"),
        TensorArg("beta", type_attr="T", description="offset, same shape as gamma"),
    ),
    outputs=(
        TensorArg("y", type_attr="T"),
        TensorArg("mean", type_attr="T", description="kept dimensions"),
        TensorArg("variance", type_attr="T", description="kept dimensions"),
    ),
    attrs=(
        AttrDef("begin_norm_axis", "int", description="first normalised axis; the rest follow"),
        AttrDef("begin_params_axis", "int", description="first axis gamma and beta span"),
        AttrDef("epsilon", "float", description="added to the variance"),
        AttrDef("T", "type"),
    ),
    same_shape={0: 0},
    reference=layer_norm_reference,
    description="Layer normalization: y = (x - mean) / sqrt(variance + epsilon) * gamma + beta",
)
