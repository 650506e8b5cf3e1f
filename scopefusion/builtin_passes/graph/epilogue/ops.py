"""The fused ops of epilogue fusion: a product or convolution, its bias, and an activation."""
from __future__ import annotations

from typing import Any

from ....core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ..conv_bias_add import CONV_ATTR_DEFS
from ..matmul_bias_add import MATMUL_BIAS_ADD, matmul_bias_add_reference
from .activations import ACTIVATION_ATTRS, apply_activation


def matmul_bias_add_activation_reference(a: Any, b: Any, bias: Any, *, transpose_a: bool, transpose_b: bool,
                                         activation: str, alpha: float, approximate: bool, beta: float,
                                         T: Any) -> tuple[Any]:
    """``activation(matmul(a, b) + bias)``."""
    (y,) = matmul_bias_add_reference(a, b, bias, transpose_a=transpose_a, transpose_b=transpose_b, T=T)
    return (apply_activation(y, activation, alpha=alpha, approximate=approximate, beta=beta),)


MATMUL_BIAS_ADD_ACTIVATION = FusedOpDef(
    name="MatMulBiasAddActivation",
    inputs=MATMUL_BIAS_ADD.inputs,
    outputs=MATMUL_BIAS_ADD.outputs,
    attrs=(*(a for a in MATMUL_BIAS_ADD.attrs if a.name != "T"), *ACTIVATION_ATTRS, AttrDef("T", "type")),
    reference=matmul_bias_add_activation_reference,
    description="MatMulBiasAdd followed by an activation",
)


def conv2d_bias_add_activation_reference(x: Any, filter: Any, bias: Any, *, strides: list[int], padding: str,
                                         explicit_paddings: list[int] | None, data_format: str,
                                         dilations: list[int], activation: str, alpha: float,
                                         approximate: bool, beta: float, T: Any) -> tuple[Any]:
    """``activation(bias_add(conv2d(x, filter), bias))`` with the Conv2D's own attributes."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    y = tf.raw_ops.Conv2D(input=x, filter=filter, strides=strides, padding=padding,
                          explicit_paddings=explicit_paddings or [], data_format=data_format, dilations=dilations)
    y = tf.nn.bias_add(y, bias, data_format=data_format)
    return (apply_activation(y, activation, alpha=alpha, approximate=approximate, beta=beta),)


CONV2D_BIAS_ADD_ACTIVATION = FusedOpDef(
    name="Conv2DBiasAddActivation",
    inputs=(
        TensorArg("x", type_attr="T", description="[N, H, W, C] (NHWC) or [N, C, H, W] (NCHW)"),
        TensorArg("filter", type_attr="T", description="[height, width, C, out channels]"),
        TensorArg("bias", type_attr="T", description="[out channels]"),
    ),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(*CONV_ATTR_DEFS, *ACTIVATION_ATTRS, AttrDef("T", "type")),
    reference=conv2d_bias_add_activation_reference,
    description="Conv2D plus a bias along the channels, followed by an activation",
)
