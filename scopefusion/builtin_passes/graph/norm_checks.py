"""Checks the normalization graph passes make on a match before fusing it.

Each check reads the graph through the match's :class:`GraphView` and returns a value,
or refuses the match (:func:`fail`) with a reason in the user's terms (axes as the graph
gives them, dtype names, shapes with ``?`` for unknown dimensions).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Collection, Sequence

import numpy as np

from ...core.fusion.plan import is_const_like
from ...core.fusion.refusal import fail
from ...core.graph.matching import PatternMatch
from ...core.graph.vocabulary import CONTROL, FLOAT_DTYPES, dtype_name, tensor_name

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef

Shape = list  # of int | None

#: How many nodes a dependence search looks at before giving up (and saying it depends).
MAX_SEARCH = 10_000


def show(shape: Sequence[int | None] | None) -> str:
    """``[2, ?, 8]``; ``unknown`` for an unknown rank."""
    if shape is None:
        return "unknown"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def name_of(match: PatternMatch, ref: str) -> str:
    """The tensor a variable or label of the match names, as ``node`` or ``node:port``."""
    return match.tensor_name(ref)


def shape_of(match: PatternMatch, ref: str) -> Shape | None:
    """The static shape of a variable's or label's tensor (None: not even the rank is known)."""
    return match.view.static_shape(match.tensor(ref))


def input_rank(match: PatternMatch, ref: str, shape: Shape | None) -> int | None:
    """The rank of a tensor: from its static shape, else from ``GraphView.rank``'s local rules."""
    return len(shape) if shape is not None else match.view.rank(name_of(match, ref))


def trailing_dims(shape: Shape | None, rank: int | None, count: int) -> list[int | None]:
    """The last ``count`` dimensions of a tensor (unknown ones as None); refused when the
    tensor has fewer axes."""
    if rank is not None and count > rank:
        fail(f"the parameters span {count} axes, more than the input's {rank}")
    if shape is None:
        return [None] * count
    return list(shape[len(shape) - count:])


def known_shape(match: PatternMatch, ref: str, what: str) -> Shape:
    shape = shape_of(match, ref)
    if shape is None:
        fail(f"cannot tell the shape of {what} {name_of(match, ref)!r}")
    return shape


def axes_of(match: PatternMatch, label: str) -> list[int]:
    """The reduction axes a constant of the match holds, as the graph gives them."""
    value = match.consts[label]
    if value.dtype.kind not in "iu":
        fail(f"the reduction axes {_short(value)} are not integers")
    return [int(a) for a in np.asarray(value).reshape(-1)]


def same_axes(match: PatternMatch, labels: Sequence[str]) -> list[int]:
    """The axes of the first label; every other reduction must reduce the same ones."""
    present = [label for label in labels if label in match.consts]
    first = axes_of(match, present[0])
    for label in present[1:]:
        other = axes_of(match, label)
        if sorted(other) != sorted(first):
            fail(f"the statistics reduce different axes ({first} and {other})")
    return first


def positive_axes(axes: Sequence[int], rank: int) -> list[int]:
    """``axes`` counted from 0, sorted; out-of-range or repeated axes are refused."""
    out = sorted(a + rank if a < 0 else a for a in axes)
    if any(not 0 <= a < rank for a in out) or len(set(out)) != len(out):
        fail(f"reduction axes {list(axes)} do not fit an input of rank {rank}")
    return out


def trailing_start(axes: Sequence[int], rank: int | None, what: str) -> int:
    """The first of ``axes`` when they are the trailing axes of a rank-``rank`` input, as the
    graph counts it (negative when the graph gives negative axes); refused otherwise."""
    if not axes:
        fail("the statistics reduce no axis")
    if all(a < 0 for a in axes):
        ordered = sorted(axes)
        if ordered != list(range(-len(axes), 0)):
            fail(f"reduction axes {list(axes)} are not the trailing axes of {what}")
        if rank is not None and len(axes) > rank:
            fail(f"reduction axes {list(axes)} do not fit {what} of rank {rank}")
        return ordered[0]
    if rank is None:
        fail(f"cannot tell the rank of {what}, to check that axes {list(axes)} are its trailing axes")
    positive = positive_axes(axes, rank)
    if positive != list(range(rank - len(positive), rank)):
        fail(f"reduction axes {list(axes)} are not the trailing axes of {what} (rank {rank}), "
             "as the op needs: a normalization over other axes (an instance, group or batch norm?)")
    return positive[0] if all(a >= 0 for a in axes) else positive[0] - rank


def epsilon_of(match: PatternMatch, label: str) -> float:
    """The epsilon added to the statistic (0 when none is)."""
    if label not in match.consts:
        return 0.0
    return float(np.asarray(match.consts[label], dtype=np.float64).reshape(-1)[0])


def float_dtype(node: "NodeDef", what: str) -> int:
    """The ``T`` of a node, which must be a floating-point type."""
    dtype = node.attr["T"].type if "T" in node.attr else None
    if dtype not in FLOAT_DTYPES:
        shown = dtype_name(dtype) if dtype is not None else "no dtype"
        fail(f"{what} of a {shown} tensor: the op takes float16, bfloat16, float32 or float64")
    return dtype


def params_shape(match: PatternMatch, ref: str, expected: Sequence[int | None], what: str) -> Shape:
    """The shape of a parameter, which must be ``expected`` (an unknown dimension of the
    input fits any size but 1, which would broadcast)."""
    shape = known_shape(match, ref, what)
    if None in shape:
        fail(f"cannot tell the shape of {what} {name_of(match, ref)!r}: it is {show(shape)}")
    fits = len(shape) == len(expected) and all(
        (e is None and s != 1) or s == e for s, e in zip(shape, expected, strict=True))
    if not fits:
        fail(f"{what} {name_of(match, ref)!r} has shape {show(shape)}, the op needs {show(expected)}")
    return shape


def reaches(match: PatternMatch, start: int, target: int) -> bool | None:
    """Is node ``target`` among the data producers of node ``start``, however far up (None: the
    search gave up past :data:`MAX_SEARCH` nodes)?"""
    index = match.view.index
    seen, stack = {start}, [start]
    while stack and len(seen) < MAX_SEARCH:
        node = stack.pop()
        if node == target:
            return True
        for producer, port in index.inputs[node]:
            if port != CONTROL and producer not in seen:
                seen.add(producer)
                stack.append(producer)
    return None if stack else False


def independent_of(match: PatternMatch, ref: str, x: str, what: str, *, after: int | None = None) -> None:
    """``ref`` must not be computed from ``x`` (a parameter, not a function of the input).
    ``after``: the node the parameter is added to; when ``ref`` is computed from that node's
    result, the norm ends there with no offset and what follows is a residual connection."""
    target = match.view.forwarded(match.tensor(x)[0])
    start = match.tensor(ref)[0]
    found = reaches(match, start, target)
    if found is None:
        fail(f"cannot tell whether {what} {name_of(match, ref)!r} is computed from the input")
    if not found:
        return
    if after is not None and reaches(match, start, after):
        scaled = match.view.index.names[after]
        fail(f"no {what}: the normalization ends at {scaled!r}, and {name_of(match, ref)!r}, which is "
             f"added to it, is computed from that result (a residual connection), not an offset; "
             f"LayerNorm needs an offset input")
    fail(f"{what} {name_of(match, ref)!r} is computed from the input {name_of(match, x)!r}")


def inner_readers(match: PatternMatch, allowed: Collection[int]) -> None:
    """No inner tensor but those of the ``allowed`` nodes (the fused op's outputs) may be
    read outside the match (constants may: they stay); else fusing would lose it."""
    index = match.view.index
    for node in sorted(match.members):
        if node in allowed or is_const_like(index, node):
            continue
        for consumer, port, _ in index.consumers[node]:
            if consumer not in match.members and port != CONTROL:
                fail(f"the inner tensor {tensor_name(index.names[node], port)!r} is also read by "
                     f"{index.names[consumer]!r}; fusing would lose it", index.names[node], index.names[consumer])


def _short(value: np.ndarray) -> str:
    flat = np.asarray(value).reshape(-1)
    return str(flat.tolist()) if flat.size > 1 else repr(flat[0].item())
