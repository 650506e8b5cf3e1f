"""The value of a small tensor computed from constants only (a causal mask built in the
graph), evaluated with numpy, and the nodes that compute it.

Attention code builds its masks from index arithmetic on constants: ``range`` compared with
``range`` (GPT-2, transformers' Mistral), ``cumsum`` of ones compared with itself (Keras 3's
``use_causal_mask``), a band part of ones (tf_keras).  Whether such a mask is exactly causal
is a question about its value, not about how it is spelled, so the pass evaluates it: every
op on the way must be one of :data:`RULES` and read only constants (never a graph input),
and the result must stay small.  Nothing here imports TensorFlow.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ....core.graph.view import GraphView
from ....core.graph.vocabulary import CONTROL, FORWARDING_OPS, numpy_dtype
from . import dims

#: Largest intermediate value evaluated (elements).
MAX_ELEMENTS = 1 << 20
#: Most nodes a mask computation may have.
MAX_NODES = 200


class NotConstant(Exception):
    """The tensor is not computed from constants by the ops this module evaluates."""


def _strided_slice(x: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray,
                   attrs: dict[str, int]) -> np.ndarray:
    """``tf.strided_slice`` with its five masks, in numpy indexing."""
    index: list[Any] = []
    for k in range(len(begin)):
        bit = 1 << k
        if attrs["ellipsis_mask"] & bit:
            index.append(Ellipsis)
        elif attrs["new_axis_mask"] & bit:
            index.append(None)
        elif attrs["shrink_axis_mask"] & bit:
            index.append(int(begin[k]))
        else:
            start = None if attrs["begin_mask"] & bit else int(begin[k])
            stop = None if attrs["end_mask"] & bit else int(end[k])
            index.append(slice(start, stop, int(strides[k])))
    return np.asarray(x[tuple(index)])


def _band_part(x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    rows, cols = x.shape[-2], x.shape[-1]
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    keep = ((int(lower) < 0) | (i - j <= int(lower))) & ((int(upper) < 0) | (j - i <= int(upper)))
    return np.where(keep, x, np.zeros_like(x))


def _set_diag(x: np.ndarray, diag: np.ndarray, k: np.ndarray) -> np.ndarray:
    if np.ndim(k) != 0 or int(k) != 0:
        raise NotConstant("MatrixSetDiag off the main diagonal")
    out = np.array(x)
    n = min(out.shape[-2], out.shape[-1])
    out[..., np.arange(n), np.arange(n)] = diag
    return out


#: op type -> (inputs, attrs) -> value
RULES: dict[str, Callable[[list[np.ndarray], dict[str, Any]], np.ndarray]] = {
    "Range": lambda a, _: np.arange(a[0].item(), a[1].item(), a[2].item()),
    "StridedSlice": lambda a, attrs: _strided_slice(a[0], a[1], a[2], a[3], attrs),
    "ExpandDims": lambda a, _: np.expand_dims(a[0], int(a[1])),
    "Reshape": lambda a, _: np.reshape(a[0], [int(d) for d in np.reshape(a[1], -1)]),
    "Squeeze": lambda a, attrs: np.squeeze(a[0], axis=tuple(attrs["squeeze_dims"]) or None),
    "BroadcastTo": lambda a, _: np.broadcast_to(a[0], [int(d) for d in a[1]]),
    "Tile": lambda a, _: np.tile(a[0], [int(d) for d in a[1]]),
    "Fill": lambda a, _: np.full([int(d) for d in a[0]], a[1]),
    "ZerosLike": lambda a, _: np.zeros_like(a[0]),
    "OnesLike": lambda a, _: np.ones_like(a[0]),
    "Pack": lambda a, attrs: np.stack(a, axis=attrs["axis"]),
    "ConcatV2": lambda a, _: np.concatenate(a[:-1], axis=int(a[-1])),
    "Cumsum": lambda a, attrs: _cumsum(a[0], int(a[1]), attrs),
    "Add": lambda a, _: a[0] + a[1],
    "AddV2": lambda a, _: a[0] + a[1],
    "Sub": lambda a, _: a[0] - a[1],
    "Mul": lambda a, _: a[0] * a[1],
    "Neg": lambda a, _: -a[0],
    "GreaterEqual": lambda a, _: a[0] >= a[1],
    "Greater": lambda a, _: a[0] > a[1],
    "LessEqual": lambda a, _: a[0] <= a[1],
    "Less": lambda a, _: a[0] < a[1],
    "Equal": lambda a, _: a[0] == a[1],
    "LogicalAnd": lambda a, _: np.logical_and(a[0], a[1]),
    "LogicalOr": lambda a, _: np.logical_or(a[0], a[1]),
    "LogicalNot": lambda a, _: np.logical_not(a[0]),
    "Select": lambda a, _: np.where(a[0], a[1], a[2]),
    "SelectV2": lambda a, _: np.where(a[0], a[1], a[2]),
    "MatrixBandPart": lambda a, _: _band_part(a[0], a[1], a[2]),
    "MatrixSetDiagV3": lambda a, _: _set_diag(a[0], a[1], a[2]),
}


def _cumsum(x: np.ndarray, axis: int, attrs: dict[str, Any]) -> np.ndarray:
    if attrs.get("exclusive") or attrs.get("reverse"):
        raise NotConstant("an exclusive or reversed Cumsum")
    return np.cumsum(x, axis=axis, dtype=x.dtype)


class ConstantSubgraph:
    """Evaluates tensors of a graph from constants, remembering the nodes used."""

    def __init__(self, view: GraphView, given: dict[tuple[int, int], np.ndarray] | None = None) -> None:
        self.view = view
        #: values to take for some tensors instead of computing them (a probe)
        self.given = dict(given or {})
        self.nodes: set[int] = set()
        #: a Shape of a graph tensor was read: the nodes cannot leave with the fused op (they
        #: read that tensor), they stay in the graph
        self.reads_shapes = False
        self._values: dict[tuple[int, int], np.ndarray] = {}

    def value(self, tensor: tuple[int, int]) -> np.ndarray:
        """The value of ``tensor``; raises :class:`NotConstant` saying why it has none."""
        known = self._values.get(tensor, self.given.get(tensor))
        if known is not None:
            return known
        node, port = tensor
        index = self.view.index
        op = index.ops[node]
        if port != 0:
            raise NotConstant(f"{index.names[node]!r} output {port}")
        value = self.view.const_value_of(node)
        if value is None:
            if op in FORWARDING_OPS or op == "Cast":
                value = self._cast(self.value(self._data(node)[0]), node)
            elif op == "Shape":
                value = self._shape(node)
            else:
                rule = RULES.get(op)
                if rule is None:
                    raise NotConstant(f"{index.names[node]!r} is a {op}, which is not evaluated here")
                attrs = {k: _python(v) for k, v in index.nodes[node].attr.items()}
                value = np.asarray(rule([self.value(t) for t in self._data(node)], attrs))
        if value.size > MAX_ELEMENTS:
            raise NotConstant(f"{index.names[node]!r} has {value.size} elements")
        self.nodes.update(self.view.constant_chain(node) or [node])
        if len(self.nodes) > MAX_NODES:
            raise NotConstant(f"more than {MAX_NODES} nodes compute it")
        self._values[tensor] = value
        return value

    def _shape(self, node: int) -> np.ndarray:
        """A Shape's value: the static shape of what it reads, when every dimension is known."""
        shape = dims.shape(self.view, self._data(node)[0])
        if shape is None or None in shape:
            raise NotConstant(f"the shape {self.view.index.names[node]!r} reads is not static")
        self.reads_shapes = True
        out_type = numpy_dtype(self.view.index.nodes[node].attr["out_type"].type) or np.int32
        return np.array([int(d) for d in shape if d is not None]).astype(np.dtype(out_type))

    def _data(self, node: int) -> list[tuple[int, int]]:
        return [t for t in self.view.index.inputs[node] if t[1] != CONTROL]

    def _cast(self, value: np.ndarray, node: int) -> np.ndarray:
        attrs = self.view.index.nodes[node].attr
        if self.view.index.ops[node] != "Cast":
            return value
        dtype = numpy_dtype(attrs["DstT"].type)
        if dtype is None:
            raise NotConstant(f"a Cast to a dtype numpy lacks at {self.view.index.names[node]!r}")
        return value.astype(np.dtype(dtype))


def _python(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "list":
        return list(value.list.i)
    return getattr(value, kind) if kind else None
