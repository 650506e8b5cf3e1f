"""The ``LayerNormGrad`` fused op: its definition and TensorFlow reference."""
from __future__ import annotations

from typing import Any

from ....core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg


def layer_norm_grad_reference(
    dy: Any, x: Any, variance: Any, mean: Any, gamma: Any, *, begin_norm_axis: int, begin_params_axis: int,
    epsilon: float, T: Any,
) -> tuple[Any, Any, Any]:
    """The gradients of ``LayerNorm(x, gamma, beta)`` given ``dy``, the gradient of its ``y``, and its
    ``mean`` and ``variance`` outputs: ``dx`` (normalised axes ``[begin_norm_axis, rank)``), ``dgamma`` and
    ``dbeta`` (summed over the axes before ``begin_params_axis``)."""
    import tensorflow as tf  # deferred: TensorFlow runs a reference only when a graph is verified

    rank = tf.rank(x)
    norm_axes = tf.range(begin_norm_axis % rank if begin_norm_axis < 0 else begin_norm_axis, rank)
    params_axes = tf.range(0, begin_params_axis % rank if begin_params_axis < 0 else begin_params_axis)
    rstd = tf.math.rsqrt(variance + tf.cast(epsilon, x.dtype))
    xhat = (x - mean) * rstd
    dxhat = dy * gamma
    dx = rstd * (dxhat - tf.reduce_mean(dxhat, norm_axes, keepdims=True)
                 - xhat * tf.reduce_mean(dxhat * xhat, norm_axes, keepdims=True))
    return dx, tf.reduce_sum(dy * xhat, params_axes), tf.reduce_sum(dy, params_axes)


LAYER_NORM_GRAD = FusedOpDef(
    name="LayerNormGrad",
    inputs=(
        TensorArg("dy", type_attr="T", description="the gradient of LayerNorm's y, shaped like x"),
        TensorArg("x", type_attr="T"),
        TensorArg("variance", type_attr="T", description="LayerNorm's variance output (kept dimensions)"),
        TensorArg("mean", type_attr="T", description="LayerNorm's mean output (kept dimensions)"),
        TensorArg("gamma", type_attr="T", description="the scale, x.shape[begin_params_axis:] (leading 1s allowed)"),
    ),
    outputs=(
        TensorArg("pd_x", type_attr="T", description="the gradient of x"),
        TensorArg("pd_gamma", type_attr="T", description="the gradient of gamma, x.shape[begin_params_axis:]"),
        TensorArg("pd_beta", type_attr="T", description="the gradient of beta, x.shape[begin_params_axis:]"),
    ),
    attrs=(
        AttrDef("begin_norm_axis", "int", description="first normalised axis; the rest follow"),
        AttrDef("begin_params_axis", "int", description="first axis gamma and beta span"),
        AttrDef("epsilon", "float", description="added to the variance"),
        AttrDef("T", "type"),
    ),
    same_shape={0: 1},
    reference=layer_norm_grad_reference,
    description="The gradient of a layer normalization: dx, dgamma, dbeta from dy, x, mean, variance and gamma",
)
