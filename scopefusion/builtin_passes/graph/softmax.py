"""SoftmaxFusionPass: a softmax written as ops -> TensorFlow's own ``Softmax`` op.

The forms, as TensorFlow records them (``x`` the same tensor throughout, both
reductions with ``keepdims=True``):

* with the maximum subtracted first, as openai/gpt-2's ``softmax()`` and tf_keras'
  ``backend.softmax`` over a tuple of axes write it:
  ``e = Exp(Sub(x, Max(x, axis)))``, then ``RealDiv(e, Sum(e, axis))``;
* without it, as TensorFlow's documentation of ``tf.nn.softmax`` writes it:
  ``RealDiv(Exp(x), Sum(Exp(x), axis))`` (one ``Exp`` or two of the same tensor).

Both become ``Softmax(x)``.  Softmax is unchanged by subtracting a constant along the
axis, so the two forms are the same function; the stock op subtracts the maximum
itself, so where the form without it overflows (``exp`` of more than about 88 in
float32 is infinite, and the original then yields NaN) ``Softmax`` still gives the
right answer, and elsewhere the two agree to rounding.

The stock op normalizes over the last axis only.  A softmax over another axis, over
several axes, with the maximum taken over a different axis than the sum, or over a
tensor whose rank cannot be told (when the axis is not written as ``-1``) is refused
with the reason: turning it into Transpose + Softmax + Transpose would move every
element twice, a layout choice the back end, which knows the data format, should make
(``SoftmaxTransposeFusionPass``, off by default, makes it when a switch file turns it on).
"""
from __future__ import annotations

from ...core.fusion.refusal import fail
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, const, one_of, op
from ...core.graph.vocabulary import DIV_OPS as DIV, dtype_name, FLOAT_DTYPES
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass

#: The reduction axes: a constant scalar or vector of integers.
MAX_AXES = const(where=lambda v: v.dtype.kind == "i" and v.ndim <= 1, label="max_axes",
                 description="constant reduction axes")
SUM_AXES = const(where=lambda v: v.dtype.kind == "i" and v.ndim <= 1, label="sum_axes",
                 description="constant reduction axes")
#: What the exponential is taken of: x minus its maximum along the axis, or x itself.
SHIFTED = one_of(op("Sub", "$x", op("Max", "$x", MAX_AXES, keep_dims=True, label="max"), label="shifted"), "$x")
EXP = op("Exp", "$s", label="exp")
#: The denominator sums that exponential, or a second Exp of the same tensor.
DENOMINATOR = op("Sum", one_of(EXP, op("Exp", "$s", label="exp_again")), SUM_AXES, keep_dims=True, label="sum")
SOFTMAX = OpPattern("Softmax", op(DIV, EXP, DENOMINATOR, label="div"), defs={"s": SHIFTED})


class SoftmaxFusionPass(PatternFusionBasePass):
    """exp(x - max(x)) / sum(exp(x - max(x))) (or without the max) over the last axis -> Softmax."""

    name = "SoftmaxFusionPass"
    fusion_type = "GraphFusion"
    description = "exp(x [- max x]) / sum(exp(...)) over the last axis, keepdims -> the stock Softmax"

    def define_patterns(self) -> list[OpPattern]:
        return [SOFTMAX]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        dtype = check_softmax_parts(match)
        problem = _axis_problem(match)
        if problem:
            fail(problem)
        form = "max subtracted" if "max" in match.nodes else "no max subtracted"
        return FusedOp("Softmax", inputs=["x"], attrs={"T": dtype}, description=f"Softmax ({form})")


def check_softmax_parts(match: PatternMatch) -> int:
    """The softmax's dtype; refuses a softmax of complex numbers, or one whose parts are read elsewhere."""
    dtype = match.node("div").attr["T"].type
    if dtype not in FLOAT_DTYPES:  # exp(x) / sum(exp(x)) of complex numbers: no Softmax kernel
        fail(f"a softmax of a {dtype_name(dtype)} tensor: Softmax takes floating-point input")
    for label in ("max", "shifted", "exp", "exp_again", "sum"):
        readers = PatternFusionBasePass.outside_readers(match, label) if label in match.nodes else []
        if readers:
            fail(f"{match.name(label)!r} is also read by {readers[0]!r}; fusing would lose it",
                 match.name(label), readers[0])
    return dtype


def softmax_axes(match: PatternMatch) -> tuple[list[int], list[int], int | None]:
    """The axes the sum and the maximum reduce (as written), and the rank of x (None: unknown)."""
    sum_raw = _raw_axes(match, "sum_axes")
    max_raw = _raw_axes(match, "max_axes") if "max_axes" in match.consts else sum_raw
    return sum_raw, max_raw, match.view.rank(match.tensor_name("x"))


def _raw_axes(match: PatternMatch, label: str) -> list[int]:
    return sorted({int(v) for v in match.consts[label].reshape(-1)})


def _axis_problem(match: PatternMatch) -> str | None:
    """Why the reductions are not both over the last axis (None when they are)."""
    sum_raw, max_raw, rank = softmax_axes(match)
    if sum_raw == max_raw == [-1]:
        return None  # the last axis, whatever the rank
    if rank is None:
        return f"cannot tell the rank of {match.tensor_name('x')!r}, to tell whether axes {sum_raw} are the last"
    sum_axes = sorted({a % rank for a in sum_raw}) if rank else sum_raw
    max_axes = sorted({a % rank for a in max_raw}) if rank else max_raw
    if sum_axes != max_axes:
        return f"the maximum is taken over axes {max_axes} but the sum over axes {sum_axes}: not a softmax"
    if len(sum_axes) != 1:
        return (f"a softmax over axes {sum_axes} of a rank-{rank} tensor: the stock Softmax normalizes over "
                "one axis, the last")
    if sum_axes[0] != rank - 1:
        return (f"a softmax over axis {sum_axes[0]} of a rank-{rank} tensor: the stock Softmax normalizes over "
                f"the last axis ({rank - 1}) only")
    return None
