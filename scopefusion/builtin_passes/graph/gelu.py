"""GeluFusionPass: every GELU real code writes -> ``Gelu(x)``, wherever it sits.

GELU has no scope of its own in most models (google-research BERT applies its
``gelu()`` to a dense layer's output, GPT-2 inside ``mlp``), so it is found by its
ops.  The forms, as TensorFlow records them (``x`` is the same tensor throughout):

* exact, ``tf.nn.gelu`` / Keras ``gelu`` / transformers ``gelu``:
  ``0.5 * x * erfc(-x * 0.70710677)``;
* exact, BERT's original and transformers' fallback: ``x * 0.5 * (1 + erf(x / sqrt(2)))``,
  with ``sqrt(2)`` a constant or a ``Sqrt`` of 2 (also ``x * 0.70710677``);
* tanh, ``tf.nn.gelu(approximate=True)``, GPT-2, BERT's later version, transformers
  ``gelu_new``: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` with ``x^3`` a
  ``Pow`` or a product, ``sqrt(2/pi)`` a constant or ``Sqrt(2 / pi)``;
* tanh without ``Pow``, transformers ``gelu_fast``:
  ``0.5 * x * (1 + tanh(x * sqrt(2/pi) * (1 + 0.044715 * x * x)))``.

The three factors of each product may be multiplied in any grouping and order.
Every constant is checked (at the precision of its dtype), so look-alikes such as
``x * sigmoid(1.702 * x)`` or a GELU with one constant changed are not fused.
"""
from __future__ import annotations

import math
from typing import Any

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, const, one_of, op
from ...core.graph.vocabulary import FLOAT_DTYPES, dtype_name
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass


def gelu_reference(x: Any, *, approximate: bool, T: Any) -> tuple[Any]:
    """GELU of ``x``: ``x * Phi(x)``, or its tanh approximation."""
    import tensorflow as tf

    return (tf.nn.gelu(x, approximate=approximate),)


GELU = FusedOpDef(
    name="Gelu",
    inputs=(TensorArg("x", type_attr="T"),),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(
        AttrDef("approximate", "bool", default=False,
                description="False: x * Phi(x) with the error function; True: the tanh approximation"),
        AttrDef("T", "type"),
    ),
    same_shape={0: 0},
    reference=gelu_reference,
    description="Gaussian error linear unit",
)

MUL = ("Mul",)
ADD = ("Add", "AddV2")
DIV = ("RealDiv", "Div")

X = "$x"
HALF = const(0.5, description="0.5")
ONE = const(1.0, description="1.0")
SQRT2 = one_of(const(math.sqrt(2.0), description="sqrt(2)"), op("Sqrt", const(2.0)))
INV_SQRT2 = const(1.0 / math.sqrt(2.0), description="1/sqrt(2)")
SQRT_2_OVER_PI = one_of(const(math.sqrt(2.0 / math.pi), description="sqrt(2/pi)"),
                        op("Sqrt", op(DIV, const(2.0), const(math.pi, description="pi"))))
COEFF = const(0.044715, description="0.044715")


def product(a: Any, b: Any, c: Any) -> Any:
    """``a * b * c`` as two Muls, in any grouping (each Mul commutes)."""
    return one_of(op(MUL, op(MUL, a, b), c), op(MUL, op(MUL, a, c), b), op(MUL, op(MUL, b, c), a))


def erf_forms() -> list[Any]:
    """The erf and erfc forms of ``gelu($x)`` (also the gated-activation pass's raw GELU)."""
    scaled = one_of(op(DIV, X, SQRT2), op(MUL, X, INV_SQRT2))
    erf = op(ADD, ONE, op("Erf", scaled))
    neg_scaled = one_of(op(MUL, op("Neg", X), INV_SQRT2), op("Neg", op(MUL, X, INV_SQRT2)),
                        op(DIV, op("Neg", X), SQRT2))
    erfc = op("Erfc", neg_scaled)
    return [product(HALF, X, erfc), product(HALF, X, erf)]


def tanh_forms() -> list[Any]:
    """The tanh forms of ``gelu($x)``."""
    cube = one_of(op("Pow", X, const(3.0, description="3")), product(X, X, X), op(MUL, X, op("Square", X)))
    inner = op(MUL, SQRT_2_OVER_PI, op(ADD, X, op(MUL, COEFF, cube)))
    fast = product(X, SQRT_2_OVER_PI, op(ADD, ONE, product(COEFF, X, X)))
    return [product(HALF, X, op(ADD, ONE, op("Tanh", one_of(inner, fast))))]


class GeluFusionPass(PatternFusionBasePass):
    """GELU in every form real code writes (erf or tanh) -> Gelu(x)."""

    name = "GeluFusionPass"
    fusion_type = "GraphFusion"
    description = "GELU written as ops (erf, erfc or tanh form, any grouping) -> Gelu(x, approximate)"

    def define_patterns(self) -> list[OpPattern]:
        return [OpPattern("GeluErf", one_of(*erf_forms())), OpPattern("GeluTanh", one_of(*tanh_forms()))]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        root = match.view.lend(match.root)
        dtype = root.attr["T"].type if "T" in root.attr else None
        if dtype not in FLOAT_DTYPES:
            return self.refuse(f"GELU of a non-float tensor (T = {'none' if dtype is None else dtype_name(dtype)})")
        approximate = match.pattern.name == "GeluTanh"
        return FusedOp("Gelu", inputs=["x"], attrs={"approximate": approximate, "T": dtype},
                       description=f"Gelu ({'tanh' if approximate else 'erf'} form)")

