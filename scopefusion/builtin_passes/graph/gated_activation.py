"""GatedActivationFusionPass: a gated MLP's ``act(gate) * up`` -> ``GatedActivation(gate, up)``.

The feed-forward of SwiGLU and GeGLU models multiplies an activated projection by a second,
linear one: transformers ``TFT5`` with ``feed_forward_proj="gated-gelu"`` (``gelu_new(wi_0(h))
* wi_1(h)``) and ``TFMistralMLP`` (``silu(gate_proj(x)) * up_proj(x)``), keras-hub Llama and
Mistral (``x * silu(gate)``) and Gemma (``gelu(x1, approximate=True) * x2``).  The activation
travels as an attribute: ``activation`` ``Swish`` (with ``beta``; SiLU is ``beta = 1``) or
``Gelu`` (with ``approximate``), as :class:`SwishFusionPass` and :class:`GeluFusionPass` name them.

The pass runs in the ``UBFusion`` stage and takes the activation in either form, so the result
is the same whichever stage made it:

* the ``Swish`` / ``Gelu`` op the graph stage made of whatever form the model wrote;
* the raw ops, when those passes are switched off: every GELU form ``GeluFusionPass`` knows,
  ``tf.nn.silu``'s custom-gradient ``IdentityN`` and ``x * sigmoid(beta * x)``.

The ``Mul`` commutes: the activated operand is ``gate``, the other ``up``.

Refused with the reason: an activation (or, in the raw form, one of its ops) something else
reads too (fusing would lose it), a product that broadcasts (``up`` is a scale or a mask, not a
projection of the gate's shape) and a non-float product.
"""
from __future__ import annotations

from typing import Any

from ...core.fusion.refusal import fail
from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, one_of, op
from ...core.graph.vocabulary import FLOAT_DTYPES, dtype_name
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass
from .gelu import erf_forms, gelu_reference, tanh_forms
from .fused_shapes import unequal_shapes
from .swish import CUSTOM_GRADIENT, PRODUCT, swish_reference

#: The activations a gate may have (the fused ops of the graph stage).
GATE_ACTIVATIONS = ("Swish", "Gelu")


def gated_activation_reference(gate: Any, up: Any, *, activation: str, approximate: bool, beta: float,
                               T: Any) -> tuple[Any]:
    """``activation(gate) * up``."""
    if activation == "Swish":
        return (swish_reference(gate, beta=beta, T=T)[0] * up,)
    if activation == "Gelu":
        return (gelu_reference(gate, approximate=approximate, T=T)[0] * up,)
    raise ValueError(f"unknown gate activation {activation!r}; known: {', '.join(GATE_ACTIVATIONS)}")


GATED_ACTIVATION = FusedOpDef(
    name="GatedActivation",
    inputs=(
        TensorArg("gate", type_attr="T", description="the activated projection"),
        TensorArg("up", type_attr="T", description="the linear projection, same shape as gate"),
    ),
    outputs=(TensorArg("y", type_attr="T", description="activation(gate) * up"),),
    attrs=(
        AttrDef("activation", "string", description="Swish (SwiGLU) or Gelu (GeGLU)"),
        AttrDef("approximate", "bool", default=False, description="Gelu: the tanh approximation"),
        AttrDef("beta", "float", default=1.0, description="Swish: gate * sigmoid(beta * gate)"),
        AttrDef("T", "type"),
    ),
    same_shape={0: 0},
    reference=gated_activation_reference,
    description="Gated linear unit: activation(gate) * up (SwiGLU, GeGLU)",
)

#: Pattern name -> the attributes a raw activation of that pattern gives (beta is read from the match).
_RAW: dict[str, dict[str, Any]] = {
    "GatedGeluErf": {"activation": "Gelu", "approximate": False},
    "GatedGeluTanh": {"activation": "Gelu", "approximate": True},
    "GatedSwishCustomGradient": {"activation": "Swish"},
    "GatedSwish": {"activation": "Swish"},
}


def _gated(activated: Any) -> Any:
    """``activated * $up``, either operand first."""
    return op("Mul", activated, "$up", label="gated")


class GatedActivationFusionPass(PatternFusionBasePass):
    """Swish(gate) * up and Gelu(gate) * up (fused or raw activation) -> GatedActivation."""

    name = "GatedActivationFusionPass"
    fusion_type = "UBFusion"
    description = "Swish/Gelu(gate) * up (SwiGLU, GeGLU; the activation fused or as raw ops) -> GatedActivation"

    def define_patterns(self) -> list[OpPattern]:
        return [
            OpPattern("GatedActivation", _gated(op(GATE_ACTIVATIONS, "$x", label="act"))),
            OpPattern("GatedGeluErf", _gated(one_of(*erf_forms()))),
            OpPattern("GatedGeluTanh", _gated(one_of(*tanh_forms()))),
            OpPattern("GatedSwishCustomGradient", _gated(CUSTOM_GRADIENT)),
            OpPattern("GatedSwish", _gated(PRODUCT)),
        ]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        root = match.root
        index = match.view.index
        for member in sorted(match.members - {root}):
            readers = [index.names[c] for c, port, _ in index.consumers[member]
                       if c not in match.members and port >= 0]
            if readers:
                fail(f"the activation's {index.names[member]!r} is also read by {readers[0]!r}; "
                     "fusing would lose it")
        dtype = match.node("gated").attr["T"].type
        if dtype not in FLOAT_DTYPES:
            fail(f"a gated activation of a non-float product (T = {dtype_name(dtype)})")
        problem = _broadcast_problem(match)
        if problem:
            fail(problem)
        if "act" in match.nodes:
            act = match.node("act")
            attrs: dict[str, Any] = {"activation": act.op}
            if act.op == "Swish":
                attrs["beta"] = float(act.attr["beta"].f) if "beta" in act.attr else 1.0
            else:
                attrs["approximate"] = bool(act.attr["approximate"].b) if "approximate" in act.attr else False
        else:
            attrs = dict(_RAW[match.pattern.name])
            if attrs["activation"] == "Swish":
                attrs["beta"] = float(match.consts["beta"].reshape(-1)[0]) if "beta" in match.consts else 1.0
        attrs["T"] = dtype
        form = "" if "act" in match.nodes else " (raw ops)"
        return FusedOp("GatedActivation", inputs=["x", "up"], attrs=attrs,
                       description=f"{attrs['activation']}(gate) * up{form}")


def _broadcast_problem(match: PatternMatch) -> str | None:
    """Why ``act(gate) * up`` is no element-wise product of two tensors of one shape (None when it is).
    Dimensions unknown in both are taken as equal: both are projections of the same input."""
    found = unequal_shapes(match, ("x", "up"), "")
    if isinstance(found, tuple):
        return (f"the product broadcasts (the gate {match.tensor_name('x')!r} has shape {found[0]}, "
                f"{match.tensor_name('up')!r} {found[1]}): it is no gated activation")
    return found

