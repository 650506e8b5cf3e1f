"""Partial values of small integer tensors (shape vectors and their elements) for
:mod:`.shape_inference`: a ``Shape``, a ``Pack`` of its elements, a ``StridedSlice`` of it,
simple arithmetic on them, each item None where unknown."""
from __future__ import annotations

import math
from typing import Callable

from .shape_context import OpContext, Value, bits, length_of
from .shape_rules import strided_dims

ValueRule = Callable[[OpContext, int], Value]

#: Op types whose values nothing can tell before the graph runs (fed, read from state, from
#: loops and lists, or data-dependent), which TensorFlow's shape inference does not know
#: either: a value asked of one is not missing a rule.
_VALUELESS = frozenset("""
Placeholder PlaceholderV2 PlaceholderWithDefault _Arg ReadVariableOp VarHandleOp VariableV2
Enter RefEnter Merge RefMerge Switch RefSwitch Exit RefExit NextIteration RefNextIteration LoopCond
TensorListLength TensorListGetItem TensorListPopBack TensorArraySizeV3 TensorArrayReadV3
Where Unique UniqueV2 ArgMax ArgMin NonMaxSuppressionV3 NonMaxSuppressionV4 NonMaxSuppressionV5
RandomUniform RandomUniformInt RandomStandardNormal TruncatedNormal Multinomial
StatelessRandomUniformInt StatelessRandomUniformIntV2
""".split())  # noqa: SIM905 - an op table reads best as a block of names


def valueless(op: str) -> bool:
    """Whether no value of an ``op`` node can be known before running (see :data:`_VALUELESS`)."""
    return op in _VALUELESS


def _shape_value(ctx: OpContext, port: int) -> Value:
    source = ctx.shape(port if ctx.op == "ShapeN" else 0)
    return None if source is None else (False, tuple(source))


def _size_value(ctx: OpContext, port: int) -> Value:
    source = ctx.shape(0)
    if source is None:
        return None
    if ctx.op == "Rank":
        return (True, (len(source),))
    return (True, (None if None in source else math.prod(source),))  # type: ignore[arg-type]


def _pack_value(ctx: OpContext, port: int) -> Value:
    if int(ctx.attr("axis", 0)) != 0:
        return None
    items: list[int | None] = []
    for k in range(len(ctx.data)):
        value = ctx.value(k)
        if value is not None and not value[0]:
            return None
        items.append(None if value is None else value[1][0])
    return (False, tuple(items))


def _concat_value(ctx: OpContext, port: int) -> Value:
    axis = ctx.ints(len(ctx.data) - 1)
    if axis is None or axis[0] not in (0, -1):
        return None
    items: list[int | None] = []
    for k in range(len(ctx.data) - 1):
        value = ctx.value(k)
        if value is None:
            length = length_of(ctx, k)
            if length is None:
                return None
            items.extend([None] * length)
        elif value[0]:
            return None
        else:
            items.extend(value[1])
    return (False, tuple(items))


def _strided_value(ctx: OpContext, port: int) -> Value:
    value = ctx.value(0)
    if value is None or value[0]:
        return None
    items = value[1]
    found = strided_dims(ctx, [len(items)])
    if found is None or -1 in found[1]:
        return None
    shrink = not found[0]
    begin, end, strides = ctx.ints(1), ctx.ints(2), ctx.ints(3)
    assert begin is not None and end is not None and strides is not None
    start = None if bits(ctx, "begin_mask") & 1 else begin[0]
    stop = None if bits(ctx, "end_mask") & 1 else end[0]
    if shrink:
        k = begin[0] + len(items) if begin[0] < 0 else begin[0]
        return (True, (items[k],)) if 0 <= k < len(items) else None
    return (False, tuple(items[slice(start, stop, strides[0])]))


def _gather_value(ctx: OpContext, port: int) -> Value:
    params, indices = ctx.value(0), ctx.value(1)
    if params is None or params[0] or indices is None or None in indices[1]:
        return None
    if ctx.op == "GatherV2" and ctx.ints(2) not in ([0], [-1]):
        return None
    n = len(params[1])
    picked = [k + n if k < 0 else k for k in indices[1] if k is not None]
    if len(picked) != len(indices[1]) or any(not 0 <= k < n for k in picked):
        return None
    return (indices[0], tuple(params[1][k] for k in picked))


def _forward_value(ctx: OpContext, port: int) -> Value:
    return ctx.value(0)


_ARITHMETIC: dict[str, Callable[[int, int], int | None]] = {
    "Add": lambda a, b: a + b, "AddV2": lambda a, b: a + b, "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b, "FloorDiv": lambda a, b: a // b if b else None,
    "Maximum": max, "Minimum": min,
}


def _arithmetic_value(ctx: OpContext, port: int) -> Value:
    a, b = ctx.value(0), ctx.value(1)
    if a is None or b is None:
        return None
    fn = _ARITHMETIC[ctx.op]
    xs, ys = a[1], b[1]
    if len(xs) != len(ys):
        if len(xs) == 1 and a[0]:
            xs = xs * len(ys)
        elif len(ys) == 1 and b[0]:
            ys = ys * len(xs)
        else:
            return None
    items = tuple(None if x is None or y is None else fn(x, y) for x, y in zip(xs, ys, strict=True))
    return (a[0] and b[0], items)


def _prod_value(ctx: OpContext, port: int) -> Value:
    value = ctx.value(0)
    if value is None or value[0] or bool(ctx.attr("keep_dims", False)) or ctx.ints(1) not in ([0], [-1]):
        return None
    return (True, (None if None in value[1] else math.prod(value[1]),))  # type: ignore[arg-type]


def _reshape_value(ctx: OpContext, port: int) -> Value:
    value, target = ctx.value(0), ctx.ints(1)
    if value is None or target is None:
        return None
    if target == [] and len(value[1]) == 1:
        return (True, value[1])
    if len(target) == 1 and target[0] in (-1, len(value[1])):
        return (False, value[1])
    return None


def _expand_value(ctx: OpContext, port: int) -> Value:
    value = ctx.value(0)
    return (False, value[1]) if value is not None and value[0] and ctx.ints(1) in ([0], [-1]) else None


def _squeeze_value(ctx: OpContext, port: int) -> Value:
    value = ctx.value(0)
    return (True, value[1]) if value is not None and not value[0] and len(value[1]) == 1 else None


def _range_value(ctx: OpContext, port: int) -> Value:
    start, limit, delta = ctx.ints(0), ctx.ints(1), ctx.ints(2)
    if start is None or limit is None or delta is None or delta[0] == 0:
        return None
    items = range(start[0], limit[0], delta[0])
    return None if len(items) > 64 else (False, tuple(items))


VALUE_RULES: dict[str, ValueRule] = {
    "Range": _range_value,
    "Shape": _shape_value, "ShapeN": _shape_value, "Size": _size_value, "Rank": _size_value,
    "Pack": _pack_value, "ConcatV2": _concat_value, "StridedSlice": _strided_value,
    "Gather": _gather_value, "GatherV2": _gather_value,
    **{op: _forward_value for op in ("Identity", "Cast", "StopGradient", "Snapshot")},
    **{op: _arithmetic_value for op in _ARITHMETIC},
    "Prod": _prod_value, "Reshape": _reshape_value, "ExpandDims": _expand_value, "Squeeze": _squeeze_value,
}
