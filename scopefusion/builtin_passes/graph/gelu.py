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

Each product is written once: the matcher takes its factors in any grouping and order
(``0.044715 * x * x * x`` and ``x * (x * x) * 0.044715`` alike), ``x^3`` as a ``Pow``,
``x * Square(x)`` or three factors, and constants computed from constants (``Sqrt(2.0)``,
a ``Cast``) by their value.  The tanh forms are written as the TensorFlow functions that
compute them (:func:`~scopefusion.core.graph.function_pattern.pattern_from_function`), traced
into the same patterns the first time the pass needs them.
Every constant is checked (at the precision of its dtype), so look-alikes such as
``x * sigmoid(1.702 * x)`` or a GELU with one constant changed are not fused.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.graph.function_pattern import pattern_from_function
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, const, one_of, op
from ...core.graph.vocabulary import ADD_OPS as ADD, DIV_OPS as DIV, dtype_name, FLOAT_DTYPES, MUL_OPS as MUL
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass

if TYPE_CHECKING:  # the pattern functions' ``tf``, bound when they are traced
    import tensorflow as tf


def gelu_reference(x: Any, *, approximate: bool, T: Any) -> tuple[Any]:
    """GELU of ``x``: ``x * Phi(x)``, or its tanh approximation."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

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


X = "$x"
HALF = const(0.5, description="0.5")
ONE = const(1.0, description="1.0")
# constants computed in the graph (Sqrt(2.0), Sqrt(2 / pi), a Cast) are compared by their value
SQRT2 = const(math.sqrt(2.0), description="sqrt(2)")
INV_SQRT2 = const(1.0 / math.sqrt(2.0), description="1/sqrt(2)")


def erf_forms() -> list[Any]:
    """The erf and erfc forms of ``gelu($x)`` (also the gated-activation pass's raw GELU)."""
    scaled = op(MUL, X, INV_SQRT2)
    erf = op(ADD, ONE, op("Erf", one_of(scaled, op(DIV, X, SQRT2))))
    neg_scaled = one_of(op(MUL, op("Neg", X), INV_SQRT2), op("Neg", scaled), op(DIV, op("Neg", X), SQRT2))
    erfc = op("Erfc", neg_scaled)
    return [op(MUL, HALF, X, erfc), op(MUL, HALF, X, erf)]


@pattern_from_function
def gelu_tanh(x):
    """GELU's tanh approximation (``x ** 3`` stands for ``Pow(x, 3)``, ``x * x * x``, ``x * Square(x)``)."""
    return 0.5 * x * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


@pattern_from_function
def gelu_fast(x):
    """The same with ``sqrt(2/pi)`` taken out of the sum (transformers' ``gelu_fast``)."""
    return 0.5 * x * (1.0 + tf.tanh(x * math.sqrt(2.0 / math.pi) * (1.0 + 0.044715 * x * x)))


def tanh_forms() -> list[Any]:
    """The tanh forms of ``gelu($x)`` (traced from the functions above the first time they are asked for)."""
    return [gelu_tanh.expr, gelu_fast.expr]


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
            fail(f"GELU of a non-float tensor (T = {'none' if dtype is None else dtype_name(dtype)})")
        approximate = match.pattern.name == "GeluTanh"
        return FusedOp("Gelu", inputs=["x"], attrs={"approximate": approximate, "T": dtype},
                       description=f"Gelu ({'tanh' if approximate else 'erf'} form)")

