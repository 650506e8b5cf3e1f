"""The ``InstanceNorm`` fused op: declaration and reference implementation."""
from __future__ import annotations

from typing import Any, Sequence

from ....core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg

NHWC, NCHW = "NHWC", "NCHW"

#: Label of the ``moments`` scopes this pass finds (its own, so no other pass counts them).
MOMENTS_LABEL = "InstanceNormMoments"


def instance_norm_reference(
    x: Any, gamma: Any, beta: Any, *, epsilon: float, axes: Sequence[int], data_format: str, T: Any
) -> tuple[Any, Any, Any]:
    """Normalise every instance and channel of ``x`` over its spatial ``axes``,
    then scale by ``gamma`` and shift by ``beta`` (both per channel, shape [C])."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    axes = [int(a) for a in axes]
    rank = len(axes) + 2  # batch, channels, spatial axes
    channel = 1 if data_format == NCHW else rank - 1
    # float16 moments are computed in float32, as tf.nn.moments does
    stats = tf.cast(x, tf.float32) if x.dtype == tf.float16 else x
    mean = tf.reduce_mean(stats, axes, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(stats, mean), axes, keepdims=True)
    mean, variance = tf.cast(mean, x.dtype), tf.cast(variance, x.dtype)
    per_channel = [1] * rank
    per_channel[channel] = -1
    scale = tf.reshape(gamma, per_channel) * tf.math.rsqrt(variance + tf.cast(epsilon, x.dtype))
    y = (x - mean) * scale + tf.reshape(beta, per_channel)
    return y, mean, variance


INSTANCE_NORM = FusedOpDef(
    name="InstanceNorm",
    inputs=(
        TensorArg("x", type_attr="T", description="rank >= 3, laid out as data_format says"),
        TensorArg("gamma", type_attr="T", description="scale, one per channel: shape [C]"),
        TensorArg("beta", type_attr="T", description="offset, one per channel: shape [C]"),
    ),
    outputs=(
        TensorArg("y", type_attr="T", description="same shape as x"),
        TensorArg("mean", type_attr="T", description="per instance and channel, reduced axes kept as 1"),
        TensorArg("variance", type_attr="T", description="per instance and channel, reduced axes kept as 1"),
    ),
    attrs=(
        AttrDef("epsilon", "float", description="added to the variance"),
        AttrDef("axes", "list(int)", description="the normalised (spatial) axes, non-negative"),
        AttrDef("data_format", "string", description="NHWC (channels last) or NCHW (channels at axis 1)"),
        AttrDef("T", "type"),
    ),
    same_shape={0: 0},
    reference=instance_norm_reference,
    description="Instance normalization: y = (x - mean) / sqrt(variance + epsilon) * gamma + beta, "
                "moments per instance and channel over the spatial axes",
)


