"""What a rotary embedding's slices select: the elements of the last axis a ``StridedSlice`` or a
``Split`` takes, and whether two such selections are the halves or the pairs RoPE rotates."""
from __future__ import annotations

from typing import Any

from ...core.fusion.refusal import fail


def _const(view: Any, node: int, slot: int, what: str) -> Any:
    value = view.const_value_of(view.forwarded(view.index.data_input(node, slot)[0]))
    if value is None:
        fail(f"the {what} of {view.index.names[node]!r} is no constant")
    return value


def slice_indices(view: Any, node: int, rank: int, width: int) -> list[int]:
    """The indices of the last axis (of length ``width``) the StridedSlice ``node`` takes from a
    rank-``rank`` tensor; refused (:func:`fail`) otherwise unless it takes every element of the other axes."""
    name = view.index.names[node]
    attrs = view.index.nodes[node].attr
    if attrs["new_axis_mask"].i or attrs["shrink_axis_mask"].i:
        fail(f"the slice {name!r} adds or removes axes")
    begin, end, strides = (list(_const(view, node, k, w).reshape(-1)) for k, w in
                           ((1, "begin"), (2, "end"), (3, "strides")))
    begin_mask, end_mask, ellipsis = attrs["begin_mask"].i, attrs["end_mask"].i, attrs["ellipsis_mask"].i
    entries = len(begin)
    dims: list[int | None] = []  # the axis each entry of the slice spec addresses (None: the ellipsis)
    for k in range(entries):
        if ellipsis >> k & 1:
            dims.append(None)
            dims.extend(range(rank - (entries - k - 1), rank))  # the entries after it end at the last axis
            break
        dims.append(k)
    last = None
    for k, dim in enumerate(dims):
        if dim is None:
            continue
        b = None if begin_mask >> k & 1 else int(begin[k])
        e = None if end_mask >> k & 1 else int(end[k])
        step = int(strides[k])
        if dim == rank - 1:
            last = (b, e, step)
        elif not (step == 1 and b in (None, 0) and e is None):
            fail(f"the slice {name!r} does not take every element of axis {dim}")
    if last is None:
        return list(range(width))
    if last[2] == 0:
        fail(f"the slice {name!r} has a step of 0")
    return list(range(width))[slice(*last)]


def split_indices(view: Any, node: int, rank: int, width: int, port: int) -> list[int]:
    """The indices of the last axis output ``port`` of the Split ``node`` holds; refused
    (:func:`fail`) unless it splits the last axis in two."""
    name = view.index.names[node]
    if view.index.nodes[node].attr["num_split"].i != 2:
        fail(f"the split {name!r} does not split in two")
    axis = int(_const(view, node, 0, "axis"))
    if axis not in (-1, rank - 1):
        fail(f"the split {name!r} splits axis {axis}, not the last")
    half = width // 2
    return list(range(port * half, (port + 1) * half))


def halves_of(negated: list[int], kept: list[int], width: int) -> str:
    """``"half"`` when ``negated`` is the second half and ``kept`` the first, ``"pairs"`` when they
    are the odd and the even elements; refused (:func:`fail`) otherwise for anything else."""
    if width % 2:
        fail(f"the last axis has an odd length ({width}): it cannot be rotated in pairs")
    half = width // 2
    if negated == list(range(half, width)) and kept == list(range(half)):
        return "half"
    if negated == list(range(1, width, 2)) and kept == list(range(0, width, 2)):
        return "pairs"
    fail(f"the rotation negates {_describe(negated, width)} and keeps {_describe(kept, width)} "
         "of the last axis: "
         "neither the halves (second negated) nor the pairs (odd negated) RoPE rotates")


def _describe(indices: list[int], width: int) -> str:
    if len(indices) > 6:
        return f"elements {indices[:3]}...{indices[-1]} ({len(indices)} of {width})"
    return f"elements {indices} (of {width})"
