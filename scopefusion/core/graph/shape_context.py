"""What a shape rule (:mod:`.shape_rules`) reads about one node, and the dimension arithmetic
the rules share: merging, broadcasting, axes, shapes given by an input's partial value."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .shape_inference import ShapeInference

Dims = Optional[list[Optional[int]]]
#: A partial integer value: ``(scalar, items)``, an item None where unknown.
Value = Optional[tuple[bool, tuple[Optional[int], ...]]]


class OpContext:
    """What a rule reads about one node: its inputs' shapes and values, its attributes."""

    __slots__ = ("inference", "i", "op", "node", "data", "depth")

    def __init__(self, inference: "ShapeInference", i: int, op: str, node: Any, data: list[tuple[int, int]],
                 depth: int = 48) -> None:
        self.inference, self.i, self.op, self.node, self.data, self.depth = inference, i, op, node, data, depth

    def shape(self, k: int) -> Dims:
        if k >= len(self.data):
            return None
        p, port = self.data[k]
        shapes = self.inference._shapes.get(p)
        if shapes is None:  # a constant, read for the first time, or a loop's back edge: not inferred yet
            shapes = self.inference.constant_shapes(p)
            if shapes is None:
                return None
        found = shapes[port] if port < len(shapes) else None
        return None if found is None else list(found)

    def value(self, k: int) -> Value:
        return self.inference.input_value(self.data, k, self.depth)

    def ints(self, k: int) -> list[int] | None:
        """Input ``k``'s value when every item is known (a scalar as one item)."""
        value = self.value(k)
        if value is None or None in value[1]:
            return None
        return list(value[1])  # type: ignore[arg-type]

    def constant(self, k: int) -> "np.ndarray | None":
        constant = self.inference._constant
        if k >= len(self.data) or constant is None or self.data[k][1] != 0:
            return None
        return constant(self.data[k][0])

    def attr(self, name: str, default: Any = None) -> Any:
        attrs = self.node.attr
        if name not in attrs:
            return default
        value = attrs[name]
        kind = value.WhichOneof("value")
        if kind == "list":
            return list(value.list.i) or [s.decode() for s in value.list.s]
        if kind == "s":
            return value.s.decode()
        return getattr(value, kind) if kind is not None else default


# -- dimension arithmetic -----------------------------------------------------------


def merge_dims(a: Sequence[int | None], b: Sequence[int | None]) -> list[int | None]:
    """Two shapes of one rank, each dimension known in either taken from it."""
    return [x if x is not None else y for x, y in zip(a, b, strict=True)]


def merged(shapes: Sequence[Dims]) -> Dims:
    known = [s for s in shapes if s is not None]
    if not known:
        return None
    out = known[0]
    for s in known[1:]:
        if len(s) == len(out):
            out = merge_dims(out, s)
    return out


def _dimension(x: int | None, y: int | None) -> int | None:
    if x == 1 or x is None:
        return x if y == 1 else y
    return x if y in (1, None, x) else None


def broadcast(a: Sequence[int | None], b: Sequence[int | None]) -> list[int | None]:
    """The broadcast of two shapes (a dimension of 1 takes the other's, an unknown one the
    other's when that is known and not 1)."""
    n = max(len(a), len(b))
    pa = [1] * (n - len(a)) + list(a)
    pb = [1] * (n - len(b)) + list(b)
    return [_dimension(x, y) for x, y in zip(pa, pb, strict=True)]


def broadcast_all(shapes: Sequence[Dims]) -> Dims:
    if not shapes or any(s is None for s in shapes):
        return None
    out: list[int | None] = list(shapes[0])  # type: ignore[arg-type]
    for s in shapes[1:]:
        out = broadcast(out, s)  # type: ignore[arg-type]
    return out


def normalized_axis(k: int, rank: int) -> int | None:
    k = k + rank if k < 0 else k
    return k if 0 <= k < rank else None


def unknown_dims(rank: int | None) -> Dims:
    return None if rank is None else [None] * rank


def length_of(ctx: OpContext, k: int) -> int | None:
    """The length of 1-D input ``k`` as its shape tells."""
    shape = ctx.shape(k)
    return shape[0] if shape is not None and len(shape) == 1 else None


def shape_from_value(ctx: OpContext, k: int) -> Dims:
    """A shape given by input ``k``'s value (-1 or an unknown item: an unknown dimension)."""
    value = ctx.value(k)
    if value is not None and not value[0]:
        return [None if d is None or d < 0 else d for d in value[1]]
    return unknown_dims(length_of(ctx, k))


def scalar(ctx: OpContext) -> list[Dims]:
    return [[]]


def bits(ctx: OpContext, name: str) -> int:
    return int(ctx.attr(name, 0))
