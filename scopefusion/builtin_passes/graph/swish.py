"""SwishFusionPass: ``x * sigmoid(beta * x)`` -> ``Swish(x)`` with ``beta`` as an attribute.

SiLU and swish are one function (swish with ``beta = 1``).  The forms, as TensorFlow
records them once frozen (``x`` is the same tensor throughout):

* ``tf.nn.silu`` / ``tf.nn.swish`` and everything built on it (Keras 3 and tf_keras
  ``silu``/``swish``, keras-hub's Llama feed-forward, transformers ``silu``/``swish``): the
  function has a custom gradient, so the product is wrapped in
  ``IdentityN(Mul(x, Sigmoid(Mul(beta, x))), x, beta)``, ``beta`` a constant (a Cast of
  it in half precision).  The whole IdentityN goes: its other two outputs only serve the
  gradient;
* the same product without the IdentityN, with a constant scale: transformers
  ``quick_gelu`` (``x * sigmoid(1.702 * x)``) becomes ``Swish(beta=1.702)``;
* ``x * sigmoid(x)`` written by hand: ``Swish(beta=1)``.

``beta`` must be one number.  GELU's patterns contain no Sigmoid and these contain no
Erf, Erfc or Tanh, so this pass and GeluFusionPass never claim the same nodes.
"""
from __future__ import annotations

from typing import Any

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, const, one_of, op
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass


def swish_reference(x: Any, *, beta: float, T: Any) -> tuple[Any]:
    """``x * sigmoid(beta * x)``."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    return (x * tf.sigmoid(tf.cast(beta, x.dtype) * x),)


SWISH = FusedOpDef(
    name="Swish",
    inputs=(TensorArg("x", type_attr="T"),),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(
        AttrDef("beta", "float", default=1.0, description="the scale inside the sigmoid (1: SiLU, 1.702: quick GELU)"),
        AttrDef("T", "type"),
    ),
    same_shape={0: 0},
    reference=swish_reference,
    description="x * sigmoid(beta * x) (SiLU when beta is 1)",
)


def _single_number(value: Any) -> bool:
    """One floating-point number (bfloat16 too, which numpy does not count as a float)."""
    return bool(value.size == 1 and (value.dtype.kind == "f" or value.dtype.name == "bfloat16"))


#: The scale inside the sigmoid: a constant holding one floating-point number.
BETA = const(where=_single_number, label="beta", description="a single floating-point number (beta)")


def _product(scaled: Any) -> Any:
    """``x * sigmoid(scaled)``, either operand first."""
    return op("Mul", "$x", op("Sigmoid", scaled, label="sigmoid"), label="product")


#: ``x * sigmoid(beta * x)`` and ``x * sigmoid(x)``.
PRODUCT = _product(one_of(op("Mul", BETA, "$x", label="scaled"), "$x"))
#: tf.nn.silu's custom-gradient wrapper: IdentityN(product, x, beta).
CUSTOM_GRADIENT = op("IdentityN", _product(op("Mul", BETA, "$x", label="scaled")), "$x", BETA,
                     label="identity_n")


class SwishFusionPass(PatternFusionBasePass):
    """SiLU / swish / quick GELU (x * sigmoid(beta * x), beta a constant) -> Swish(x, beta)."""

    name = "SwishFusionPass"
    fusion_type = "GraphFusion"
    description = "x * sigmoid(beta * x) (tf.nn.silu's IdentityN form, quick GELU, by hand) -> Swish(x, beta)"

    def define_patterns(self) -> list[OpPattern]:
        return [OpPattern("SwishCustomGradient", CUSTOM_GRADIENT), OpPattern("Swish", PRODUCT)]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        inner = ("sigmoid", "scaled", "product") if "identity_n" in match.nodes else ("sigmoid", "scaled")
        for label in inner:
            readers = self.outside_readers(match, label) if label in match.nodes else []
            if readers:
                fail(f"{match.name(label)!r} is also read by {readers[0]!r}; fusing would lose it",
                     match.name(label), readers[0])
        beta = float(match.consts["beta"].reshape(-1)[0]) if "beta" in match.consts else 1.0
        form = "tf.nn.silu" if "identity_n" in match.nodes else "x * sigmoid(beta * x)"
        # whatever dtype TensorFlow's Sigmoid took (floats, complex), Swish computes the same
        dtype = match.node("product").attr["T"].type
        return FusedOp("Swish", inputs=["x"], attrs={"beta": beta, "T": dtype}, description=f"Swish ({form})")
