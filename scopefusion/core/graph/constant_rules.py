"""The numpy rules of the index arithmetic :class:`~.constant_eval.TensorEvaluator` computes
beyond constant folding: ``Range``, ``StridedSlice``, ``BroadcastTo``, ``Tile``, ``ConcatV2``,
``Cumsum``, integer division, comparisons, logical ops, ``Select``, a band part, a diagonal set,
``Size``, ``TensorScatterUpdate`` and reductions.  Each takes the node, then its data inputs'
values, and gives the value or None (no value here); none allocates past
:data:`MAX_EVALUATED_ELEMENTS`.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .vocabulary import numpy_dtype

#: An evaluated tensor holds at most this many elements (a mask over a few thousand positions).
MAX_EVALUATED_ELEMENTS = 1 << 20


def _sizes(shape: np.ndarray) -> list[int]:
    """A shape operand's dimensions, refused past :data:`MAX_EVALUATED_ELEMENTS`."""
    if shape.dtype.kind not in "iu" or shape.ndim > 1:
        raise ValueError("not a shape")
    dims = [int(d) for d in shape.reshape(-1)]
    if any(d < 0 for d in dims) or int(np.prod(dims, dtype=np.int64)) > MAX_EVALUATED_ELEMENTS:
        raise ValueError("a negative or too large shape")
    return dims


def _strided_slice(node: Any, x: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray) -> Any:
    """``tf.strided_slice`` with its five masks, in numpy indexing."""
    masks = {k: node.attr[k].i if k in node.attr else 0
             for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    index: list[Any] = []
    for k in range(len(begin)):
        bit = 1 << k
        if masks["ellipsis_mask"] & bit:
            index.append(Ellipsis)
        elif masks["new_axis_mask"] & bit:
            index.append(None)
        elif masks["shrink_axis_mask"] & bit:
            index.append(int(begin[k]))
        else:
            start = None if masks["begin_mask"] & bit else int(begin[k])
            stop = None if masks["end_mask"] & bit else int(end[k])
            index.append(slice(start, stop, int(strides[k])))
    return np.asarray(x[tuple(index)])


def _band_part(node: Any, x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> Any:
    rows, cols = x.shape[-2], x.shape[-1]
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    keep = ((int(lower) < 0) | (i - j <= int(lower))) & ((int(upper) < 0) | (j - i <= int(upper)))
    return np.where(keep, x, np.zeros_like(x))


def _set_diag(node: Any, x: np.ndarray, diag: np.ndarray, k: np.ndarray) -> Any:
    if np.ndim(k) != 0 or int(k) != 0:
        return None  # off the main diagonal: not evaluated here
    out = np.array(x)
    n = min(out.shape[-2], out.shape[-1])
    out[..., np.arange(n), np.arange(n)] = diag
    return out


def _cumsum(node: Any, x: np.ndarray, axis: np.ndarray) -> Any:
    if any(node.attr[k].b for k in ("exclusive", "reverse") if k in node.attr):
        return None  # an exclusive or reversed sum: not evaluated here
    return np.cumsum(x, axis=int(axis), dtype=x.dtype)


def _range(node: Any, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> Any:
    count = np.ceil((limit.item() - start.item()) / delta.item()) if delta.item() else -1
    if not 0 <= count <= MAX_EVALUATED_ELEMENTS:
        return None
    return np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype)


def out_type(node: Any) -> np.dtype:
    dtype = numpy_dtype(node.attr["out_type"].type) if "out_type" in node.attr else None
    return np.dtype(str(dtype or "int32"))


def _scatter_update(node: Any, x: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> Any:
    """``tf.tensor_scatter_nd_update``: the slices ``indices`` names replaced by ``updates``."""
    if indices.dtype.kind not in "iu" or indices.ndim < 1 or indices.shape[-1] > x.ndim:
        return None
    out = np.array(x)
    flat = indices.reshape(-1, indices.shape[-1])
    values = updates.reshape((flat.shape[0],) + x.shape[indices.shape[-1]:])
    for where, value in zip(flat, values, strict=True):
        out[tuple(int(i) for i in where)] = value
    return out


def _reduction(fn: Callable[..., Any]) -> Callable[..., Any]:
    def apply(node: Any, a: np.ndarray, axes: np.ndarray) -> Any:
        keep = bool(node.attr["keep_dims"].b) if "keep_dims" in node.attr else False
        axis = tuple(int(k) for k in axes.reshape(-1))
        return np.asarray(fn(a, axis=axis, keepdims=keep)).astype(a.dtype)
    return apply


def _integer(fn: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def apply(node: Any, a: np.ndarray, b: np.ndarray) -> Any:
        if a.dtype != b.dtype or a.dtype.kind not in "iu" or not b.all():
            return None  # integer division by zero: no value
        return np.asarray(fn(a, b)).astype(a.dtype)
    return apply


def _compare(fn: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    return lambda node, a, b: np.asarray(fn(a, b)) if a.dtype == b.dtype else None


#: The index arithmetic :class:`TensorEvaluator` computes beyond :data:`FOLDING_RULES` (same
#: signature: the node, then its data inputs' values; None: no value here).
INDEX_RULES: dict[str, Callable[..., Any]] = {
    "Range": _range,
    "StridedSlice": _strided_slice,
    "BroadcastTo": lambda node, a, shape: np.broadcast_to(a, _sizes(shape)),
    "Tile": lambda node, a, reps: np.tile(a, _sizes(reps)) if a.size * np.prod(_sizes(reps)) <= MAX_EVALUATED_ELEMENTS
    else None,
    "Fill": lambda node, dims, value: np.full(_sizes(dims), value.reshape(-1)[0], value.dtype) if value.size == 1
    else None,
    "Transpose": lambda node, a, perm: np.transpose(a, [int(p) for p in perm.reshape(-1)]),
    "ZerosLike": lambda node, a: np.zeros_like(a),
    "OnesLike": lambda node, a: np.ones_like(a),
    "ConcatV2": lambda node, *a: np.concatenate(a[:-1], axis=int(a[-1])),
    "Cumsum": _cumsum,
    "FloorDiv": _integer(np.floor_divide),
    "FloorMod": _integer(np.mod),
    "GreaterEqual": _compare(np.greater_equal),
    "Greater": _compare(np.greater),
    "LessEqual": _compare(np.less_equal),
    "Less": _compare(np.less),
    "Equal": _compare(np.equal),
    "NotEqual": _compare(np.not_equal),
    "LogicalAnd": lambda node, a, b: np.logical_and(a, b),
    "LogicalOr": lambda node, a, b: np.logical_or(a, b),
    "LogicalNot": lambda node, a: np.logical_not(a),
    "Select": lambda node, c, a, b: np.where(c, a, b),
    "SelectV2": lambda node, c, a, b: np.where(c, a, b),
    "Size": lambda node, a: np.array(a.size, dtype=out_type(node)),
    "Rank": lambda node, a: np.array(a.ndim, dtype=np.int32),
    "TensorScatterUpdate": _scatter_update,
    "Prod": _reduction(np.prod),
    "Sum": _reduction(np.sum),
    "Min": _reduction(np.min),
    "Max": _reduction(np.max),
    "MatrixBandPart": _band_part,
    "MatrixSetDiagV3": _set_diag,
}
