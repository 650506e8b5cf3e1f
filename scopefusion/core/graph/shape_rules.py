"""The op table of :mod:`.shape_inference`: per op type, the shapes of its outputs from its
inputs' shapes, attributes and (partial) values, as TensorFlow's shape functions define them.

A rule receives an :class:`OpContext` and answers one shape per output port (a list of
dimensions, None where unknown; None for an output of unknown rank).  Partial values of small
integer tensors (shape vectors and their elements) have rules of their own (``VALUE_RULES``).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from . import shape_rules_nn as nn
from .shape_context import (
    Dims, OpContext, bits, broadcast, broadcast_all, length_of, merge_dims, merged, normalized_axis, scalar,
    shape_from_value, unknown_dims,
)

# -- rules ---------------------------------------------------------------------------
Rule = Callable[[OpContext], list[Dims]]


def _same(ctx: OpContext) -> list[Dims]:
    return [ctx.shape(0)]


def _same_twice(ctx: OpContext) -> list[Dims]:
    return [ctx.shape(0), ctx.shape(0)]


def _identity_n(ctx: OpContext) -> list[Dims]:
    return [ctx.shape(k) for k in range(len(ctx.data))]


def _elementwise(ctx: OpContext) -> list[Dims]:
    return [broadcast_all([ctx.shape(k) for k in range(len(ctx.data))])]


def _add_n(ctx: OpContext) -> list[Dims]:
    return [merged([ctx.shape(k) for k in range(len(ctx.data))])]




def const_shape(node: Any) -> list[Dims]:
    """A constant's shape, from its ``value`` attribute (unknown without one)."""
    attrs = node.attr
    return [[d.size for d in attrs["value"].tensor.tensor_shape.dim]] if "value" in attrs else [None]


def _source(ctx: OpContext) -> list[Dims]:
    attrs = ctx.node.attr
    if ctx.op in ("Const", "HostConst"):
        return const_shape(ctx.node)
    if "shape" not in attrs or attrs["shape"].shape.unknown_rank:
        return [None]
    return [[d.size if d.size >= 0 else None for d in attrs["shape"].shape.dim]]


def _read_variable(ctx: OpContext) -> list[Dims]:
    if ctx.data:
        p, _ = ctx.data[0]
        index = ctx.inference.index
        if index.ops[p] in ("VarHandleOp", "VariableV2"):
            return _source(OpContext(ctx.inference, p, index.ops[p], index.nodes[p], []))
    return [None]
def _ensure_shape(ctx: OpContext) -> list[Dims]:
    declared = _source(ctx)[0]
    source = ctx.shape(0)
    if declared is None or source is None or len(source) != len(declared):
        return [declared if declared is not None else source]
    return [merge_dims(declared, source)]


_TRANSPOSES = {"MatMul": ("transpose_a", "transpose_b"), "MatMulBiasAdd": ("transpose_a", "transpose_b"),
               "MatMulBiasAddActivation": ("transpose_a", "transpose_b"),
               "BatchMatMul": ("adj_x", "adj_y"), "BatchMatMulV2": ("adj_x", "adj_y"),
               "BatchMatMulV3": ("adj_x", "adj_y")}


def _product(ctx: OpContext) -> list[Dims]:
    ta, tb = (bool(ctx.attr(k, False)) for k in _TRANSPOSES[ctx.op])
    a, b = ctx.shape(0), ctx.shape(1)
    if ctx.op in ("MatMul", "MatMulBiasAdd", "MatMulBiasAddActivation"):
        a = a if a is not None and len(a) == 2 else [None, None]
        b = b if b is not None and len(b) == 2 else [None, None]
        return [[a[1] if ta else a[0], b[0] if tb else b[1]]]
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return [None]
    rows, columns = a[-1] if ta else a[-2], b[-2] if tb else b[-1]
    same_rank = ctx.op == "BatchMatMul" and len(a) == len(b)  # BatchMatMul (v1) does not broadcast
    batch = merge_dims(a[:-2], b[:-2]) if same_rank else broadcast(a[:-2], b[:-2])
    return [[*batch, rows, columns]]


def _einsum(ctx: OpContext) -> list[Dims]:
    equation = str(ctx.attr("equation", "")).replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ctx.data):
        return [None]
    letters: dict[str, int | None] = {}
    ellipses: list[Dims] = []
    for k, term in enumerate(terms):
        shape = ctx.shape(k)
        named = term.replace("...", "")
        if shape is None:
            if "..." in term:
                ellipses.append(None)
            for c in named:
                letters.setdefault(c, None)
            continue
        head, dots, tail = term.partition("...")
        if len(shape) < len(named) or (not dots and len(shape) != len(named)):
            return [None]
        for c, d in zip(head, shape[:len(head)], strict=True):
            letters[c] = d if letters.get(c) in (None, 1) else letters[c]
        for c, d in zip(tail, shape[len(shape) - len(tail):], strict=True):
            letters[c] = d if letters.get(c) in (None, 1) else letters[c]
        if dots:
            ellipses.append(shape[len(head):len(shape) - len(tail)])
    if not arrow:
        counts = {c: lhs.count(c) for c in letters}
        out = ("..." if ellipses else "") + "".join(sorted(c for c, n in counts.items() if n == 1))
    head, dots, tail = out.partition("...")
    middle: list[int | None] = []
    if dots:
        if any(e is None for e in ellipses):
            return [None]
        for e in ellipses:
            middle = broadcast(middle, e)  # type: ignore[arg-type]
    if any(c not in letters for c in head + tail):
        return [None]
    return [[letters[c] for c in head] + middle + [letters[c] for c in tail]]


def _reshape(ctx: OpContext) -> list[Dims]:
    target = shape_from_value(ctx, 1)
    value = ctx.value(1)
    if target is None or value is None:
        return [target]
    unknown = [k for k, d in enumerate(target) if d is None]
    if len(unknown) != 1:
        return [target]  # the input's shape tells nothing more
    source = ctx.shape(0)
    if source is not None and None not in source:
        known = math.prod(d for d in target if d is not None)
        if known > 0:
            target[unknown[0]] = math.prod(source) // known  # type: ignore[arg-type]
    return [target]


def _transpose(ctx: OpContext) -> list[Dims]:
    source, perm = ctx.shape(0), ctx.ints(1)
    if perm is None:
        return [unknown_dims(len(source) if source is not None else length_of(ctx, 1))]
    if source is None:
        return [[None] * len(perm)]
    if len(perm) != len(source):
        return [None]
    return [[source[p] for p in perm]]


def _reduction(ctx: OpContext) -> list[Dims]:
    source, axes = ctx.shape(0), ctx.ints(1)
    keep = bool(ctx.attr("keep_dims", False))
    if source is None or axes is None:
        return [unknown_dims(len(source)) if keep and source is not None else None]
    rank = len(source)
    picked = {normalized_axis(a, rank) for a in axes}
    if None in picked:
        return [None]
    if keep:
        return [[1 if k in picked else d for k, d in enumerate(source)]]
    return [[d for k, d in enumerate(source) if k not in picked]]


def _concat(ctx: OpContext) -> list[Dims]:
    if ctx.op == "Concat":
        axis_at, parts = 0, range(1, len(ctx.data))
    else:
        axis_at, parts = len(ctx.data) - 1, range(len(ctx.data) - 1)
    shapes = [ctx.shape(k) for k in parts]
    known = [s for s in shapes if s is not None]
    if not known:
        return [None]
    rank = len(known[0])
    axis = ctx.ints(axis_at)
    if axis is None or len(axis) != 1 or normalized_axis(axis[0], rank) is None:
        return [[None] * rank]
    a = normalized_axis(axis[0], rank)
    out = merged(known)
    assert out is not None and a is not None
    sizes = [s[a] if s is not None else None for s in shapes]
    out[a] = None if None in sizes else sum(sizes)  # type: ignore[arg-type]
    return [out]


def _pack(ctx: OpContext) -> list[Dims]:
    element = merged([ctx.shape(k) for k in range(len(ctx.data))])
    if element is None:
        return [None]
    axis = normalized_axis(int(ctx.attr("axis", 0)), len(element) + 1)
    if axis is None:
        return [None]
    return [element[:axis] + [len(ctx.data)] + element[axis:]]


def _unpack(ctx: OpContext) -> list[Dims]:
    source, count = ctx.shape(0), int(ctx.attr("num", 0))
    if source is None:
        return [None] * count
    axis = normalized_axis(int(ctx.attr("axis", 0)), len(source))
    if axis is None:
        return [None] * count
    return [source[:axis] + source[axis + 1:] for _ in range(count)]


def _split(ctx: OpContext) -> list[Dims]:
    count = int(ctx.attr("num_split", 1))
    source, axis = ctx.shape(1), ctx.ints(0)
    if source is None:
        return [None] * count
    a = normalized_axis(axis[0], len(source)) if axis is not None and len(axis) == 1 else None
    if a is None:
        return [[None] * len(source) for _ in range(count)]
    size = source[a]
    part = size // count if size is not None else None
    return [source[:a] + [part] + source[a + 1:] for _ in range(count)]


def _split_v(ctx: OpContext) -> list[Dims]:
    count = int(ctx.attr("num_split", 1))
    source, sizes, axis = ctx.shape(0), ctx.ints(1), ctx.ints(2)
    if source is None:
        return [None] * count
    a = normalized_axis(axis[0], len(source)) if axis is not None and len(axis) == 1 else None
    if a is None or sizes is None or len(sizes) != count:
        return [[None] * len(source) for _ in range(count)]
    parts: list[int | None] = [s if s >= 0 else None for s in sizes]
    if -1 in sizes and source[a] is not None:
        parts[sizes.index(-1)] = source[a] - sum(s for s in sizes if s >= 0)  # type: ignore[operator]
    return [source[:a] + [p] + source[a + 1:] for p in parts]


def _slice(ctx: OpContext) -> list[Dims]:
    source, begin, size = ctx.shape(0), ctx.value(1), ctx.value(2)
    if size is None:
        return [unknown_dims(len(source) if source is not None else length_of(ctx, 2))]
    items = size[1]
    starts = begin[1] if begin is not None and len(begin[1]) == len(items) else (None,) * len(items)
    if source is not None and len(source) != len(items):
        return [None]
    out: list[int | None] = []
    for k, s in enumerate(items):
        if s is None or s >= 0:
            out.append(s)
            continue
        d, b = (source[k] if source is not None else None), starts[k]
        out.append(d - b if d is not None and b is not None else None)
    return [out]




def strided_dims(ctx: OpContext, source: Sequence[int | None]) -> tuple[list[int | None], list[int]] | None:
    """The dimensions a StridedSlice of a tensor of shape ``source`` gives, with, per output
    dimension, the input dimension it slices (-1 for a new axis); None when begin, end and
    strides are not all known."""
    begin, end, strides = ctx.ints(1), ctx.ints(2), ctx.ints(3)
    if begin is None or end is None or strides is None or not len(begin) == len(end) == len(strides):
        return None
    masks = {k: bits(ctx, k) for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                        "shrink_axis_mask")}
    n, rank = len(begin), len(source)
    ellipsis = next((k for k in range(n) if masks["ellipsis_mask"] >> k & 1), None)
    new_after = sum(1 for k in range(n) if ellipsis is not None and k > ellipsis and masks["new_axis_mask"] >> k & 1)
    out: list[int | None] = []
    where: list[int] = []
    dim = 0
    for k in range(n):
        if k == ellipsis:
            covered = rank - dim - (n - k - 1 - new_after)
            for _ in range(max(covered, 0)):
                out.append(source[dim])
                where.append(dim)
                dim += 1
            continue
        if masks["new_axis_mask"] >> k & 1:
            out.append(1)
            where.append(-1)
            continue
        if dim >= rank or strides[k] == 0:
            return None
        d = source[dim]
        dim += 1
        if masks["shrink_axis_mask"] >> k & 1:
            continue
        if d is None:
            out.append(None)
        else:
            start = None if masks["begin_mask"] >> k & 1 else begin[k]
            stop = None if masks["end_mask"] >> k & 1 else end[k]
            out.append(len(range(*slice(start, stop, strides[k]).indices(d))))
        where.append(dim - 1)
    while dim < rank:
        out.append(source[dim])
        where.append(dim)
        dim += 1
    return out, where


def _strided_slice(ctx: OpContext) -> list[Dims]:
    source = ctx.shape(0)
    if source is None:
        return [None]
    found = strided_dims(ctx, source)
    return [None if found is None else found[0]]


_SAME = """
Identity Snapshot StopGradient PreventGradient CheckNumerics Cast Neg Abs Sign Exp Expm1 Log Log1p
Sqrt Rsqrt Square Reciprocal Inv Erf Erfc Tanh Sigmoid Relu Relu6 Elu Selu Softplus Softsign
LeakyRelu Gelu Softmax LogSoftmax Floor Ceil Round Rint Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh
Atanh IsNan IsFinite IsInf LogicalNot ZerosLike OnesLike Reverse ReverseV2 Roll ClipByValue Cumsum Cumprod
LRN Enter RefEnter Exit RefExit NextIteration RefNextIteration Print MatrixBandPart MatrixSetDiag
MatrixSetDiagV2 MatrixSetDiagV3
FakeQuantWithMinMaxVars FakeQuantWithMinMaxArgs QuantizeAndDequantizeV2 QuantizeAndDequantizeV3
QuantizeAndDequantizeV4 Relu6Grad Digamma Lgamma BesselI0e BesselI1e Invert DebugIdentity
TensorScatterUpdate TensorScatterAdd RandomShuffle
""".split()  # noqa: SIM905 - an op table reads best as a block of names

_ELEMENTWISE = """
Add AddV2 Sub Mul Div RealDiv FloorDiv FloorMod TruncateDiv TruncateMod Maximum Minimum Pow
SquaredDifference Less LessEqual Greater GreaterEqual Equal NotEqual LogicalAnd LogicalOr DivNoNan
MulNoNan Atan2 SelectV2 BitwiseAnd BitwiseOr BitwiseXor LeftShift RightShift Xdivy Xlogy Xlog1py
ApproximateEqual Mod
""".split()  # noqa: SIM905

#: Op types whose rule can tell a fully known shape without reading every input's shape (a shape
#: given by an input's value, a scalar): the demand-driven walk of :mod:`.shape_inference` runs
#: their rule before inferring the producers it does not read.
SETTLED_BY_VALUES = frozenset({"Reshape", "Fill", "BroadcastTo", "Range", "Size", "Rank", "L2Loss",
                               "EnsureShape"})

RULES: dict[str, Rule] = {
    **nn.NN_RULES,
    **{op: _same for op in _SAME},
    **{op: _elementwise for op in _ELEMENTWISE},
    "Switch": _same_twice, "RefSwitch": _same_twice, "IdentityN": _identity_n, "AddN": _add_n,
    "Const": _source, "HostConst": _source, "Placeholder": _source, "PlaceholderV2": _source,
    "PlaceholderWithDefault": _source, "VariableV2": _source, "VarHandleOp": scalar,
    "ReadVariableOp": _read_variable,
    **{op: _product for op in _TRANSPOSES}, "Einsum": _einsum,
    "Reshape": _reshape, "Transpose": _transpose,
    **{op: _reduction for op in ("Mean", "Sum", "Max", "Min", "Prod", "All", "Any", "EuclideanNorm")},
    "ConcatV2": _concat, "Concat": _concat, "Pack": _pack, "Unpack": _unpack,
    "Split": _split, "SplitV": _split_v, "Slice": _slice, "StridedSlice": _strided_slice,
    "Size": scalar, "Rank": scalar, "LoopCond": scalar, "L2Loss": scalar, "EnsureShape": _ensure_shape,
    "NoOp": lambda c: [], "Assert": lambda c: [],
}
