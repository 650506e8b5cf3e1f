"""Values of tensors that a graph computes from constants alone, evaluated once in numpy.

A library often hands a constant to its consumer through a few ops: a frozen variable read
(``Identity``), ``Squeeze`` or ``Reshape`` of a moving mean, ``ExpandDims``, a ``Cast``, a
``Fill`` or a ``Pack`` of scalars, or simple arithmetic on constants (``Sqrt(2.0)``,
``-eps``).  :class:`ConstantFolder` evaluates such a subgraph with numpy (never
TensorFlow) and keeps, per node, its value and the nodes it was computed from, so that a
pattern's ``const()`` sees the value whatever chain produced it.

Bounds: a folded subgraph holds at most :data:`MAX_FOLDED_NODES` nodes and a computed value
at most :data:`MAX_FOLDED_ELEMENTS` elements; past either, the tensor is no constant here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .vocabulary import CONST_OPS, CONTROL, FORWARDING_OPS, numpy_dtype

if TYPE_CHECKING:  # pragma: no cover
    from .index import GraphIndex

#: A folded constant is computed from at most this many nodes.
MAX_FOLDED_NODES = 32
#: A computed value holds at most this many elements.
MAX_FOLDED_ELEMENTS = 1 << 16


def _float(*values: np.ndarray) -> bool:
    return all(v.dtype.kind == "f" or v.dtype.name == "bfloat16" for v in values)


def _numeric(*values: np.ndarray) -> bool:
    return all(v.dtype.kind in "fiu" or v.dtype.name == "bfloat16" for v in values)


def _binary(fn: Callable[[Any, Any], Any], floats_only: bool = False) -> Callable[..., Any]:
    def apply(node: Any, a: np.ndarray, b: np.ndarray) -> Any:
        if a.dtype != b.dtype or not (_float(a, b) if floats_only else _numeric(a, b)):
            return None
        return np.asarray(fn(a, b)).astype(a.dtype)
    return apply


def _unary(fn: Callable[[Any], Any]) -> Callable[..., Any]:
    def apply(node: Any, a: np.ndarray) -> Any:
        if not _float(a):
            return None
        with np.errstate(all="ignore"):
            return np.asarray(fn(np.asarray(a, dtype=np.float64))).astype(a.dtype)
    return apply


def _cast(node: Any, a: np.ndarray) -> Any:
    dtype = numpy_dtype(node.attr["DstT"].type) if "DstT" in node.attr else None
    return None if dtype is None else a.astype(np.dtype(str(dtype)) if not isinstance(dtype, np.dtype) else dtype)


def _squeeze(node: Any, a: np.ndarray) -> Any:
    dims = list(node.attr["squeeze_dims"].list.i) if "squeeze_dims" in node.attr else []
    try:
        return np.squeeze(a, axis=tuple(dims)) if dims else np.squeeze(a)
    except ValueError:
        return None


def _reshape(node: Any, a: np.ndarray, shape: np.ndarray) -> Any:
    if shape.dtype.kind not in "iu":
        return None
    try:
        return a.reshape([int(d) for d in shape.reshape(-1)])
    except ValueError:
        return None


def _expand_dims(node: Any, a: np.ndarray, axis: np.ndarray) -> Any:
    if axis.size != 1 or axis.dtype.kind not in "iu":
        return None
    k = int(axis.reshape(-1)[0])
    if not -a.ndim - 1 <= k <= a.ndim:
        return None
    return np.expand_dims(a, k)


def _fill(node: Any, dims: np.ndarray, value: np.ndarray) -> Any:
    if dims.dtype.kind not in "iu" or value.size != 1 or dims.ndim != 1:
        return None
    shape = [int(d) for d in dims]
    if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) > MAX_FOLDED_ELEMENTS:
        return None
    return np.full(shape, value.reshape(-1)[0], dtype=value.dtype)


def _pack(node: Any, *values: np.ndarray) -> Any:
    if not values or len({(v.dtype, v.shape) for v in values}) != 1:
        return None
    axis = node.attr["axis"].i if "axis" in node.attr else 0
    try:
        return np.stack(values, axis=axis)
    except (ValueError, np.exceptions.AxisError):
        return None


def _div(a: Any, b: Any) -> Any:
    with np.errstate(all="ignore"):
        return np.true_divide(a, b)


def _pow(node: Any, a: np.ndarray, b: np.ndarray) -> Any:
    if a.dtype != b.dtype or not _float(a, b):
        return None
    with np.errstate(all="ignore"):
        return np.power(np.asarray(a, np.float64), np.asarray(b, np.float64)).astype(a.dtype)


#: Per op type, how its value follows from its data inputs' values (None: not here).
FOLDING_RULES: dict[str, Callable[..., Any]] = {
    "Cast": _cast,
    "Squeeze": _squeeze,
    "Reshape": _reshape,
    "ExpandDims": _expand_dims,
    "Fill": _fill,
    "Pack": _pack,
    "Neg": lambda node, a: -a if _numeric(a) else None,
    "Add": _binary(np.add),
    "AddV2": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "RealDiv": _binary(_div, floats_only=True),
    "Div": _binary(_div, floats_only=True),
    "Maximum": _binary(np.maximum),
    "Minimum": _binary(np.minimum),
    "Pow": _pow,
    "Sqrt": _unary(np.sqrt),
    "Rsqrt": _unary(lambda a: 1.0 / np.sqrt(a)),
    "Reciprocal": _unary(lambda a: 1.0 / a),
    "Square": _unary(np.square),
}

#: Op types of one input whose value :func:`virtual_value` computes (a ``Virtual`` term of a
#: constant, such as the ``Reciprocal(2.0)`` of ``a / 2.0`` read as a product).
VIRTUAL_FOLDS = frozenset({"Neg", "Sqrt", "Rsqrt", "Reciprocal", "Square"})


def virtual_value(op: str, value: np.ndarray) -> "np.ndarray | None":
    """The value of ``op`` (one of :data:`VIRTUAL_FOLDS`) applied to the constant ``value``, for an
    op the graph computes without a node of its own; None when the rule does not apply."""
    if op not in VIRTUAL_FOLDS:
        return None
    result = FOLDING_RULES[op](None, value)
    return None if result is None else np.array(result)


#: Op types a folded constant may pass through.
FOLDABLE_OPS = frozenset(FOLDING_RULES) | FORWARDING_OPS


class ConstantFolder:
    """Folded values of one graph's nodes, each computed once.

    ``decode(i)`` gives the value of a ``Const`` node (the view's decoder, which shares the
    values of small constants).  :meth:`fold` answers ``(value, nodes)`` - the value of node
    ``i``'s output 0 and every node it was computed from, ``i`` first - or None.
    """

    def __init__(self, index: "GraphIndex", decode: Callable[[int], "np.ndarray | None"]) -> None:
        self.index = index
        self.decode = decode
        self._known: dict[int, tuple[np.ndarray, tuple[int, ...]] | None] = {}

    def fold(self, i: int) -> tuple[np.ndarray, tuple[int, ...]] | None:
        """Node ``i``'s output 0 as a folded constant, or None."""
        known = self._known.get(i, False)
        if known is not False:
            return known  # type: ignore[return-value]
        return self._fold(i, 0)

    def _fold(self, i: int, depth: int) -> tuple[np.ndarray, tuple[int, ...]] | None:
        known = self._known.get(i, False)
        if known is not False:
            return known  # type: ignore[return-value]
        op = self.index.ops[i]
        if op in CONST_OPS:
            value = self.decode(i)
            result: tuple[np.ndarray, tuple[int, ...]] | None = None if value is None else (value, (i,))
            self._known[i] = result
            return result
        if op not in FOLDABLE_OPS:
            self._known[i] = None
            return None
        if depth >= MAX_FOLDED_NODES:  # too deep to be folded from here: not remembered, it may be from closer
            return None
        data = [t for t in self.index.inputs[i] if t[1] != CONTROL]
        if not data or any(port != 0 for _, port in data):
            self._known[i] = None
            return None
        values, nodes = [], {i: None}
        for p, _ in data:
            sub = self._fold(p, depth + 1)
            if sub is None:
                if p in self._known:  # a definite no: so is this node
                    self._known[i] = None
                return None
            values.append(sub[0])
            nodes.update(dict.fromkeys(sub[1]))
        if len(nodes) > MAX_FOLDED_NODES:
            return None
        value = self._apply(i, op, values)
        if value is None or value.size > MAX_FOLDED_ELEMENTS:
            self._known[i] = None
            return None
        value.setflags(write=False)
        result = (value, tuple(nodes))  # the node first, then what it is computed from
        self._known[i] = result
        return result

    def _apply(self, i: int, op: str, values: list[np.ndarray]) -> "np.ndarray | None":
        if op in FORWARDING_OPS:
            return values[0]
        rule = FOLDING_RULES[op]
        try:
            value = rule(self.index.nodes[i], *values)
        except (TypeError, ValueError, OverflowError):  # a wrong input count or values numpy rejects
            return None
        return None if value is None else np.array(value)
