"""A convolution plus its bias, with nothing after it -> one op (part of the epilogue pass).

``Conv2D`` becomes ``Conv2DBiasAdd(x, filter, bias)`` and ``DepthwiseConv2dNative``
becomes ``DepthwiseConv2dNativeBiasAdd(x, filter, bias)``, each with the convolution's
attributes.  The forms real code writes:

* ``BiasAdd`` of a 1-D bias: tf_keras and Keras 3 ``Conv2D`` / ``DepthwiseConv2D``
  (Keras 3 passes ``Squeeze(Reshape(bias))``, which is still a ``[C]`` tensor), tf_slim
  ``conv2d`` / ``separable_conv2d``, ``tf.nn.bias_add``, and the ``BiasAdd`` that
  ``ConvBatchnormFusionPass`` leaves after folding a batch norm into a convolution;
* ``Add``/``AddV2`` of a channel vector, either operand first: ``tf.nn.conv2d(x, w) + b``
  with ``b`` of shape ``[C]`` (or ``[1, 1, 1, C]``) on NHWC data, ``[C, 1, 1]`` (or
  ``[1, C, 1, 1]``) on NCHW data.  The fused op takes the bias as ``[C]``: a ``Squeeze``
  of the vector's unit axes comes before it when it has more than one axis.

These are patterns of :class:`EpilogueFusionPass` (the ``UBFusion`` stage, after graph fusion):
a convolution followed by an activation is that pass's ``Conv2DBiasAddActivation``, whose match
contains this one, and the outermost match of a pass wins, so this op is made exactly for the
convolutions whose bias add no activation the epilogue takes follows.

Refused with the reason: a convolution something else reads too (fusing would lose it), a
``BiasAdd`` in another data format than its convolution, an added tensor that is not one
value per output channel (a scalar, a full feature map, a vector along another axis).
"""
from __future__ import annotations

from typing import Any

from ...core.fusion.refusal import fail
from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, op
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, fused_input, inner_node
from .fused_shapes import static_shape
from .naming import common_scope
from ...core.graph.vocabulary import ADD_OPS as ADDS

#: A convolution's own attributes, which its fused ops (these and the epilogue's) carry as they are.
CONV_ATTR_DEFS = (
    AttrDef("strides", "list(int)"),
    AttrDef("padding", "string", description="SAME, VALID or EXPLICIT"),
    AttrDef("explicit_paddings", "list(int)", default=[]),
    AttrDef("data_format", "string", default="NHWC"),
    AttrDef("dilations", "list(int)", default=[1, 1, 1, 1]),
)
CONV_ATTRS = tuple(a.name for a in CONV_ATTR_DEFS)
#: Fused op type per convolution op type.
FUSED_TYPES = {"Conv2D": "Conv2DBiasAdd", "DepthwiseConv2dNative": "DepthwiseConv2dNativeBiasAdd"}
OUTPUT_RANK = 4


def _reference(conv_op: str):
    def reference(x: Any, filter: Any, bias: Any, *, strides: list[int], padding: str,
                  explicit_paddings: list[int] | None, data_format: str, dilations: list[int], T: Any) -> tuple[Any]:
        import tensorflow as tf  # deferred: TensorFlow runs a reference only when a graph is verified

        conv = getattr(tf.raw_ops, conv_op)
        y = conv(input=x, filter=filter, strides=strides, padding=padding,
                 explicit_paddings=explicit_paddings or [], data_format=data_format, dilations=dilations)
        return (tf.nn.bias_add(y, bias, data_format=data_format),)

    reference.__name__ = reference.__qualname__ = f"{FUSED_TYPES[conv_op].lower()}_reference"
    reference.__doc__ = f"``bias_add({conv_op}(x, filter), bias)`` with the convolution's own attributes."
    return reference


def _op_def(conv_op: str, filter_shape: str, channels: str) -> FusedOpDef:
    return FusedOpDef(
        name=FUSED_TYPES[conv_op],
        inputs=(
            TensorArg("x", type_attr="T", description="[N, H, W, C] (NHWC) or [N, C, H, W] (NCHW)"),
            TensorArg("filter", type_attr="T", description=filter_shape),
            TensorArg("bias", type_attr="T", description=f"[{channels}]"),
        ),
        outputs=(TensorArg("y", type_attr="T"),),
        attrs=(*CONV_ATTR_DEFS, AttrDef("T", "type")),
        reference=_reference(conv_op),
        description=f"{conv_op} plus a bias along the output channels",
    )


CONV2D_BIAS_ADD = _op_def("Conv2D", "[height, width, C, out channels]", "out channels")
DEPTHWISE_CONV2D_BIAS_ADD = _op_def("DepthwiseConv2dNative", "[height, width, C, multiplier]",
                                    "C * multiplier")


def conv_bias_patterns() -> list[OpPattern]:
    """``BiasAdd`` or ``Add`` of a bias to a ``Conv2D`` / ``DepthwiseConv2dNative`` (labels ``conv``, ``add``)."""
    conv = op(tuple(FUSED_TYPES), "$x", "$filter", label="conv")
    return [
        OpPattern("ConvBiasAdd", op("BiasAdd", conv, "$bias", label="add")),
        OpPattern("ConvAddBias", op(ADDS, conv, "$bias", label="add")),
    ]


def conv_bias_fusion(match: PatternMatch, outside_readers: Any) -> FusionAnswer:
    """What a match of :func:`conv_bias_patterns` becomes; ``outside_readers(match, label)`` names the
    readers of a node outside the match."""
    readers = outside_readers(match, "conv")
    if readers:
        fail(f"the convolution {match.name('conv')!r} is also read by {readers[0]!r}; fusing would lose it")
    conv, add = match.node("conv"), match.node("add")
    conv_format = _data_format(conv)
    attrs: dict[str, Any] = {key: conv.attr[key] for key in CONV_ATTRS if key in conv.attr}
    attrs["T"] = conv.attr["T"].type
    fused_type = FUSED_TYPES[conv.op]
    if add.op == "BiasAdd":
        if _data_format(add) != conv_format:
            fail(f"the BiasAdd {match.name('add')!r} adds in data format {_data_format(add)} to a "
                 f"{conv_format} convolution: the bias lies along another axis than the channels")
        return FusedOp(fused_type, inputs=["x", "filter", "bias"], attrs=attrs, description=f"{conv.op} + BiasAdd")
    shape = static_shape(match.view, match.tensor("bias"))
    problem = _channel_vector_problem(match, shape, conv_format)
    if problem:
        fail(problem)
    assert shape is not None  # _channel_vector_problem refuses an unknown shape
    if len(shape) == 1:
        return FusedOp(fused_type, inputs=["x", "filter", "bias"], attrs=attrs, description=f"{conv.op} + Add")
    return _squeezed(match, fused_type, attrs, len(shape), conv_format)


def _data_format(node: Any) -> str:
    return node.attr["data_format"].s.decode() if "data_format" in node.attr else "NHWC"


def _channels(match: PatternMatch) -> int | None:
    """The convolution's output channels: from the filter, else from its output's shape."""
    view = match.view
    conv = match.node("conv")
    filter_shape = static_shape(view, match.tensor("filter"))
    if filter_shape is not None and len(filter_shape) == 4:
        in_channels, multiplier = filter_shape[2], filter_shape[3]
        if in_channels is not None and multiplier is not None:
            return multiplier if conv.op == "Conv2D" else in_channels * multiplier
    out = static_shape(view, match.tensor("conv"))
    if out is None or len(out) != OUTPUT_RANK:
        return None
    return out[1 if _data_format(conv) == "NCHW" else 3]


def _channel_vector_problem(match: PatternMatch, shape: list[int | None] | None, conv_format: str) -> str | None:
    """Why the added tensor is not one value per output channel (None when it is)."""
    name = match.tensor_name("bias")
    if shape is None:
        return f"cannot tell the shape of the added tensor {name!r}"
    channels = _channels(match)
    if channels is None:
        return "cannot tell the convolution's output channels, to check the added tensor against them"
    axis = 1 if conv_format == "NCHW" else 3
    wanted = [1] * OUTPUT_RANK
    wanted[axis] = channels
    aligned = [1] * (OUTPUT_RANK - len(shape)) + list(shape)
    if len(shape) > OUTPUT_RANK or aligned != wanted or len(shape) < OUTPUT_RANK - axis:
        along = "the last axis" if conv_format == "NHWC" else "axis 1"
        return (f"the added tensor {name!r} has shape {shape}, not one value per output channel "
                f"({channels}) along {along} of a {conv_format} convolution")
    return None


def _squeezed(match: PatternMatch, fused_type: str, attrs: dict[str, Any], rank: int, conv_format: str) -> FusedOp:
    """The bias as a vector of the channel axis (a Squeeze of its unit axes), then the fused op,
    which takes over the add's name."""
    channel_axis = rank - (OUTPUT_RANK - (1 if conv_format == "NCHW" else 3))
    unit_axes = [k for k in range(rank) if k != channel_axis]
    prefix, (_, output) = common_scope(match.name("conv"), match.name("add"), (fused_type, fused_type))
    bias = f"{output}_bias"
    nodes = [
        inner_node(bias, "Squeeze", [fused_input(2)], {"T": attrs["T"], "squeeze_dims": unit_axes}),
        inner_node(output, fused_type, [fused_input(0), fused_input(1), bias], attrs),
    ]
    return FusedOp(fused_type, inputs=["x", "filter", "bias"], name=prefix, inner_nodes=nodes,
                   inner_outputs={0: output},
                   description=f"{match.node('conv').op} + Add of a [{rank}-D] channel vector")
