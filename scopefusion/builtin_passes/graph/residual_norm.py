"""ResidualNormFusionPass: a residual add and the norm that reads it -> ``AddLayerNorm`` /
``AddRMSNorm``.

``norm(x + residual)`` is how every transformer block closes a sub-layer: post-norm blocks
(BERT, T5's encoder output) normalise the sum and nothing else reads it; pre-norm blocks
(GPT-2, Llama, Mistral, Gemma) also carry the sum on as the next residual.  The forms:

* ``LayerNorm(Add(x, residual), gamma, beta)`` -> ``AddLayerNorm(x, residual, gamma, beta)``
  with the layer norm's ``begin_norm_axis``, ``begin_params_axis`` and ``epsilon``;
* ``RMSNorm(Add(x, residual), gamma)`` -> ``AddRMSNorm(x, residual, gamma)`` with the RMS
  norm's ``epsilon`` and ``axes``.

Both ops have two outputs, the normalised sum and the sum itself; the sum's readers outside
the match (the next residual add of a pre-norm block) read output 1.

The pass runs in the ``UBFusion`` stage, on the ``LayerNorm`` and ``RMSNorm`` ops that scope
fusion (``ScopeLayerNormPass``) and graph fusion (``LayerNormFusionPass``,
``RMSNormFusionPass``) made of whatever form the model wrote, so every spelling of a norm
that those passes recognise gives the same fused op here.  The layer norm's axes are written
counted from the end (``-1``, whether the norm said ``-1`` or ``2`` of a rank-3 input), so
that the attributes do not depend on which pass made the norm either.  ``Add`` and ``AddV2``
commute: ``x`` is the add's first operand, ``residual`` its second.

Refused with the reason: an add that broadcasts (the operands' shapes differ, so it is a bias
or a scale, not a residual; operands whose shapes cannot be told are refused too: TensorFlow's
shape inference sees through the ``MatMulBiasAdd`` of the graph stage by
:func:`.fused_shapes.static_shape`), and a
layer norm whose mean or variance output something else reads.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...core.fusion.refusal import fail
from ...core.fusion.fused_ops import FusedOpDef, TensorArg
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, op
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass
from ..scope.layer_norm.op import LAYER_NORM, layer_norm_reference
from .fused_shapes import static_shape as _shape
from .fused_shapes import unequal_shapes
from .rms_norm import RMS_NORM, rms_norm_reference

ADDS = ("Add", "AddV2")


def add_layer_norm_reference(x: Any, residual: Any, gamma: Any, beta: Any, *, begin_norm_axis: int,
                             begin_params_axis: int, epsilon: float, T: Any) -> tuple[Any, Any]:
    """``LayerNorm(x + residual, gamma, beta)`` and the sum."""
    total = x + residual
    y = layer_norm_reference(total, gamma, beta, begin_norm_axis=begin_norm_axis,
                             begin_params_axis=begin_params_axis, epsilon=epsilon, T=T)[0]
    return y, total


def add_rms_norm_reference(x: Any, residual: Any, gamma: Any, *, epsilon: float, axes: Sequence[int],
                           T: Any) -> tuple[Any, Any]:
    """``RMSNorm(x + residual, gamma)`` and the sum."""
    total = x + residual
    return rms_norm_reference(total, gamma, epsilon=epsilon, axes=axes, T=T)[0], total


_SUMMANDS = (
    TensorArg("x", type_attr="T", description="the sub-layer's output"),
    TensorArg("residual", type_attr="T", description="the residual, same shape as x"),
)
_OUTPUTS = (
    TensorArg("y", type_attr="T", description="the normalised sum"),
    TensorArg("sum", type_attr="T", description="x + residual (the next residual of a pre-norm block)"),
)

ADD_LAYER_NORM = FusedOpDef(
    name="AddLayerNorm",
    inputs=(*_SUMMANDS, *LAYER_NORM.inputs[1:]),
    outputs=_OUTPUTS,
    attrs=LAYER_NORM.attrs,
    same_shape={0: 0, 1: 0},
    reference=add_layer_norm_reference,
    description="LayerNorm of a residual sum: y = LayerNorm(x + residual), and the sum",
)

ADD_RMS_NORM = FusedOpDef(
    name="AddRMSNorm",
    inputs=(*_SUMMANDS, *RMS_NORM.inputs[1:]),
    outputs=_OUTPUTS,
    attrs=RMS_NORM.attrs,
    same_shape={0: 0, 1: 0},
    reference=add_rms_norm_reference,
    description="RMSNorm of a residual sum: y = RMSNorm(x + residual), and the sum",
)

#: Fused op per norm op, and the norm's parameters after the summands.
_FUSED = {"LayerNorm": (ADD_LAYER_NORM, ["gamma", "beta"]), "RMSNorm": (ADD_RMS_NORM, ["gamma"])}


class ResidualNormFusionPass(PatternFusionBasePass):
    """LayerNorm / RMSNorm of a residual Add -> AddLayerNorm / AddRMSNorm (the sum as a second output)."""

    name = "ResidualNormFusionPass"
    fusion_type = "UBFusion"
    description = ("LayerNorm/RMSNorm of x + residual (after scope and graph fusion made the norms) -> "
                   "AddLayerNorm / AddRMSNorm, the sum as a second output")

    def define_patterns(self) -> list[OpPattern]:
        total = op(ADDS, "$x", "$residual", label="add", commutative=False)
        return [
            OpPattern("AddLayerNorm", op("LayerNorm", total, "$gamma", "$beta", label="norm")),
            OpPattern("AddRMSNorm", op("RMSNorm", total, "$gamma", label="norm")),
        ]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        norm = match.node("norm")
        op_def, params = _FUSED[norm.op]
        index = match.view.index
        statistics = [index.names[c] for c, port, _ in index.consumers[match.nodes["norm"]] if port > 0]
        if statistics:
            fail(f"the layer norm's mean or variance is read by {statistics[0]!r}; "
                 f"{op_def.name} has no such output")
        problem = _broadcast_problem(match)
        if problem:
            fail(problem)
        attrs: dict[str, Any] = {a.name: norm.attr[a.name] for a in op_def.attrs if a.name in norm.attr}
        if norm.op == "LayerNorm":
            rank = len(_shape(match.view, match.tensor("x")) or ())  # known: _broadcast_problem read it
            for key in ("begin_norm_axis", "begin_params_axis"):
                axis = norm.attr[key].i
                attrs[key] = axis - rank if axis >= 0 else axis
        outputs = ["norm", "add"] if self.outside_readers(match, "add") else ["norm"]
        carried = ", the sum read on" if len(outputs) == 2 else ""
        return FusedOp(op_def.name, inputs=["x", "residual", *params], outputs=outputs, attrs=attrs,
                       description=f"Add + {norm.op}{carried}")


def _broadcast_problem(match: PatternMatch) -> str | None:
    """Why ``x + residual`` is no element-wise sum of two tensors of one shape (None when it is).
    Dimensions unknown in both operands are taken as equal: both come from the same batch."""
    found = unequal_shapes(match, ("x", "residual"), "the summand ")
    if isinstance(found, tuple):
        return (f"the add broadcasts ({match.tensor_name('x')!r} has shape {found[0]}, "
                f"{match.tensor_name('residual')!r} {found[1]}): it is no residual sum")
    return found

