"""ConvToFullyConnectionFusionPass: a convolution whose filter covers its whole input -> ``FullyConnection``.

A ``Conv2D`` whose filter is as high and as wide as its input, that pads nothing and joins
every input channel (no groups) has one output position, and there it takes the dot product
of the whole input with each filter: it is a fully connected layer over the flattened input.
Real code writes it so: tf_slim's VGG and OverFeat heads (``fc6`` a 7x7 ``VALID`` convolution
over a 7x7 map, ``fc7`` and ``fc8`` 1x1 ones over the 1x1 result), Keras' MobileNet head
(``conv_preds``, a 1x1 convolution after the global pooling kept as a 1x1 map), a "fully
convolutional" classifier ending in a convolution as large as its feature map.

Looked at: a ``Conv2D`` with a constant filter, of any size under ``VALID`` padding, 1x1 under
any other (the convolutions that can cover their input without padding).  The convolution, and
the ``BiasAdd`` of a ``[C_out]`` bias after it when there is one, become ``FullyConnection(x, w[,
b])`` with ``num_output`` the output channels and ``axis`` 1 (the flattening starts after the
batch axis), as the reference system re-types such a convolution.
Its output keeps the convolution's ``[N, 1, 1, C_out]`` shape, so its readers do not change.

Refused with the reason: a filter smaller than the input (it slides: a real convolution),
nonzero explicit pads, fewer filter channels than input channels (a grouped convolution), shapes
that cannot be told, NCHW data (the reference takes it, but TensorFlow's CPU kernels run no
NCHW convolution, so the rewrite could not be verified), a convolution read by more than
its bias add, a convolution an inference batch norm follows (``ConvBatchnormFusionPass`` folds the
batch norm into it in the same stage, as the reference runs that pass first; Keras' MobileNetV2 at
32x32 has eight such convolutions over its 1x1 maps).
"""
from __future__ import annotations

from typing import Any

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.graph.matching import MatchFailure, PatternMatch, match_at
from ...core.graph.pattern import OpPattern, const, one_of, op
from ...core.graph.vocabulary import FLOAT_DTYPES, dtype_name
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass
from .conv_batchnorm.patterns import decomposed_pattern, fused_pattern
from .fused_shapes import static_shape

#: A constant filter: any size under VALID padding, 1x1 under any other (a larger one pads under SAME
#: unless the stride spans the input, which the pass checks); other convolutions are not looked at.
CONV = one_of(
    op("Conv2D", "$x", const(where=lambda v: v.ndim == 4, label="w", description="a constant filter"),
       padding="VALID", label="conv"),
    op("Conv2D", "$x", const(where=lambda v: v.ndim == 4 and v.shape[:2] == (1, 1), label="w",
                             description="a constant 1x1 filter"), label="conv"))
#: ConvBatchnormFusionPass's patterns: a convolution they take is left to that pass.
_BATCH_NORMS = (fused_pattern(), decomposed_pattern())
CONV_TO_FC = OpPattern("ConvToFullyConnection", one_of(op("BiasAdd", CONV, "$b", label="bias_add"), CONV))


def fully_connection_reference(x: Any, w: Any, b: Any, *, num_output: int, axis: int, T: Any) -> tuple[Any]:
    """Flatten ``x`` [N, H, W, C] and ``w`` [H, W, C, num_output] in the same order, multiply, add ``b``;
    the result shaped [N, 1, 1, num_output] like the convolution it stands for."""
    import tensorflow as tf  # deferred: TensorFlow runs a reference only when a graph is verified

    flat = tf.reshape(x, tf.concat([tf.shape(x)[:axis], [-1]], 0))
    y = tf.matmul(flat, tf.reshape(w, [-1, num_output]))
    if b is not None:
        y = y + b
    return (tf.reshape(y, [-1, 1, 1, num_output]),)


FULLY_CONNECTION = FusedOpDef(
    name="FullyConnection",
    inputs=(
        TensorArg("x", type_attr="T", description="[N, H, W, C] (NHWC)"),
        TensorArg("w", type_attr="T", description="[H, W, C, num_output]: the convolution's filter"),
        TensorArg("b", type_attr="T", description="[num_output]", optional=True),
    ),
    outputs=(TensorArg("y", type_attr="T", description="[N, 1, 1, num_output]"),),
    attrs=(
        AttrDef("num_output", "int", description="output channels"),
        AttrDef("axis", "int", default=1, description="the first axis flattened into one"),
        AttrDef("T", "type"),
    ),
    reference=fully_connection_reference,
    description="A fully connected layer over the flattened input, from a convolution covering its whole input",
)


class ConvToFullyConnectionFusionPass(PatternFusionBasePass):
    """Conv2D whose filter covers its whole unpadded input, no groups (+ BiasAdd) -> FullyConnection."""

    name = "ConvToFullyConnectionFusionPass"
    fusion_type = "GraphFusion"
    description = "Conv2D whose filter covers the whole unpadded input, no groups [+ BiasAdd] -> FullyConnection"

    def define_patterns(self) -> list[OpPattern]:
        return [CONV_TO_FC]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        conv = match.node("conv")
        dtype = conv.attr["T"].type
        if dtype not in FLOAT_DTYPES:
            fail(f"a {dtype_name(dtype)} convolution: FullyConnection takes floating-point input")
        if conv.attr["data_format"].s.decode() != "NHWC":
            fail("an NCHW convolution: TensorFlow's CPU kernels run none, so the rewrite cannot be verified here")
        x, w = _shape(match, "x", 4), _shape(match, "w", 4)  # a dilated filter covering x cannot exist
        _check_covers(match, x, w)
        _check_no_batch_norm(match)
        inputs = ["x", "w"]
        attrs: dict[str, Any] = {"num_output": w[3], "axis": 1, "T": dtype}
        if "bias_add" in match.nodes:
            readers = self.outside_readers(match, "conv")
            if readers:
                fail(f"{match.name('conv')!r} is also read by {readers[0]!r}; fusing would lose it",
                     match.name("conv"), readers[0])
            if match.node("bias_add").attr["data_format"].s.decode() != "NHWC":
                fail(f"{match.name('bias_add')!r} adds along another axis than the convolution's channels")
            bias = static_shape(match.view, match.tensor("b"))
            if bias != [w[3]]:
                fail(f"the bias {match.tensor_name('b')!r} has shape {bias}, not [{w[3]}]")
            inputs.append("b")
            attrs["optional_inputs"] = ["b"]
        form = f"{w[0]}x{w[1]} filter over a {x[1]}x{x[2]} input, {x[3]} -> {w[3]} channels"
        return FusedOp("FullyConnection", inputs=inputs, attrs=attrs,
                       description=f"FullyConnection ({form}{', with bias' if 'b' in inputs else ''})")


def _shape(match: PatternMatch, name: str, rank: int) -> list[int]:
    """The shape of tensor ``name``, of rank ``rank``, every dimension but the batch known."""
    shape = static_shape(match.view, match.tensor(name))
    if shape is None or len(shape) != rank or None in shape[1:] or (name == "w" and shape[0] is None):
        fail(f"cannot tell the shape of {match.tensor_name(name)!r} ({shape}), to tell whether the filter covers "
             "the whole input")
    return shape  # type: ignore[return-value]


def _check_no_batch_norm(match: PatternMatch) -> None:
    """Refuse a convolution an inference batch norm follows: ConvBatchnormFusionPass folds the batch norm
    into it in this stage (the reference runs that pass first), and the two results would overlap."""
    index, conv = match.view.index, match.nodes["conv"]
    near = {c for c, port, _ in index.consumers[conv] if port >= 0}
    near |= {c for n in list(near) for c, port, _ in index.consumers[n] if port >= 0}  # BiasAdd, Mul, ...
    for root in sorted(near):
        for pattern in _BATCH_NORMS:
            if index.ops[root] not in pattern.root_types:
                continue
            try:
                found = match_at(match.view, pattern, root)
            except MatchFailure:
                continue
            if conv in found.members:
                fail(f"{match.name('conv')!r} is followed by the batch norm {index.names[root]!r}, which "
                     "ConvBatchnormFusionPass folds into it in this stage")


def _check_covers(match: PatternMatch, x: list[int], w: list[int]) -> None:
    """Refuse unless the filter [kH, kW, C_in, C_out] covers x [N, H, W, C] whole, without padding."""
    conv = match.node("conv")
    name = match.name("conv")
    if (w[0], w[1]) != (x[1], x[2]):
        fail(f"{name!r}: a {w[0]}x{w[1]} filter slides over a {x[1]}x{x[2]} input: a convolution, not a "
             "fully connected layer")
    if w[2] != x[3]:
        fail(f"{name!r}: the filter takes {w[2]} of the input's {x[3]} channels: a grouped convolution")
    pads = list(conv.attr["explicit_paddings"].list.i) if "explicit_paddings" in conv.attr else []
    if conv.attr["padding"].s.decode() == "EXPLICIT" and any(pads):
        fail(f"{name!r} pads its input explicitly ({pads})")
