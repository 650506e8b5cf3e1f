"""Values of tensors that a graph computes from constants alone, evaluated once in numpy.

A library often hands a constant to its consumer through a few ops: a frozen variable read
(``Identity``), ``Squeeze`` or ``Reshape`` of a moving mean, ``ExpandDims``, a ``Cast``, a
``Fill`` or a ``Pack`` of scalars, or simple arithmetic on constants (``Sqrt(2.0)``,
``-eps``).  :class:`ConstantFolder` evaluates such a subgraph with numpy (never
TensorFlow) and keeps, per node, its value and the nodes it was computed from, so that a
pattern's ``const()`` sees the value whatever chain produced it.

Bounds: a folded subgraph holds at most :data:`MAX_FOLDED_NODES` nodes and a computed value
at most :data:`MAX_FOLDED_ELEMENTS` elements; past either, the tensor is no constant here.

A pass that asks a question about a value (is this mask exactly causal, does this chain of
copies repeat its input per head) evaluates more: :class:`TensorEvaluator` computes any
output of a node from constants, the index arithmetic masks are built from as well
(``constant_rules.INDEX_RULES``: ``Range``, ``StridedSlice``, comparisons, ``Select``, ``Cumsum``, a
band part ...), a ``Shape`` from the static shape its caller tells, and values given for
some tensors (a probe), saying why when a tensor is not computed from constants.

Sizes are constants too where the graph's shapes know them: ``tf.shape(x)[-1]`` of an ``x``
whose last dimension is static, ``tf.shape(x)[1] // heads``, the ``Shape`` of a fully known
tensor.  The folder asks the project's own shape propagation (:mod:`.shape_values`: partial
values of shape vectors) for such a node (an op it does not fold itself, ``Shape``,
``StridedSlice``, ``FloorDiv`` ...) when every item of its value is known; its nodes then
reach up to the ``Shape`` (``Size``, ``Rank``) that reads the tensor, and no further: the
value depends on that tensor's static shape, not on its data.  So is ``tf.ones_like(x)``
(``zeros_like``) of an ``x`` of static shape.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .constant_rules import INDEX_RULES, MAX_EVALUATED_ELEMENTS, out_type
from .vocabulary import CONST_OPS, CONTROL, FORWARDING_OPS, numpy_dtype

if TYPE_CHECKING:  # pragma: no cover
    from .index import GraphIndex
    from .view import GraphView

Tensor = tuple[int, int]

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
#: Op types that read a tensor for its shape only (a size told by the graph's shapes stops there).
SHAPE_READING_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
#: Op types whose value is one number over the static shape of what they read (``tf.ones_like(x)``).
FILLED_LIKE = {"OnesLike": 1, "ZerosLike": 0}
#: The attributes that give the dtype of an integer op's output 0, in the order asked.
_INT_DTYPE_ATTRS = ("out_type", "T", "Tparams", "Tidx", "DstT")


def _integer_dtype(node: Any) -> "np.dtype | None":
    for name in _INT_DTYPE_ATTRS:
        if name in node.attr:
            dtype = numpy_dtype(node.attr[name].type)
            return dtype if dtype is not None and dtype.kind in "iu" else None
    return np.dtype(np.int32) if node.op in SHAPE_READING_OPS else None  # out_type's default


class ConstantFolder:
    """Folded values of one graph's nodes, each computed once.

    ``decode(i)`` gives the value of a ``Const`` node (the view's decoder, which shares the
    values of small constants); ``sizes(i)``, when given, the items of node ``i``'s output 0 as
    the graph's shapes tell them (None when one is unknown: see the module's docstring).
    :meth:`fold` answers ``(value, nodes)`` - the value of node ``i``'s output 0 and every node
    it was computed from, ``i`` first - or None.
    """

    def __init__(self, index: "GraphIndex", decode: Callable[[int], "np.ndarray | None"],
                 sizes: Callable[[int], "tuple[bool, tuple[int, ...]] | None"] | None = None,
                 shape_of: Callable[[Tensor], "list[int | None] | None"] | None = None) -> None:
        self.index = index
        self.decode = decode
        self.sizes = sizes
        self.shape_of = shape_of
        self._known: dict[int, tuple[np.ndarray, tuple[int, ...]] | None] = {}
        self._asking: set[int] = set()  # nodes whose sizes are being asked (the propagation asks back)

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
        if op in FILLED_LIKE:
            result = self._filled_like(i)
            self._known[i] = result
            return result
        if op not in FOLDABLE_OPS:
            if self.sizes is not None and i in self._asking:
                return None  # the propagation asking back while it computes this very value
            result = self._from_shapes(i) if self.sizes is not None else None
            self._known[i] = result
            return result
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

    def _from_shapes(self, i: int) -> tuple[np.ndarray, tuple[int, ...]] | None:
        """Node ``i``'s value as the graph's shapes tell it (every item known), with the nodes up to
        the constants and the shape reads it is computed from; else None."""
        assert self.sizes is not None
        dtype = _integer_dtype(self.index.nodes[i])
        if dtype is None:
            return None
        self._asking.add(i)
        try:
            told = self.sizes(i)
        finally:
            self._asking.discard(i)
        nodes = None if told is None else self._shape_nodes(i)
        if told is None or nodes is None:
            return None
        scalar, items = told
        value = np.array(items[0] if scalar else list(items), dtype=dtype)
        value.setflags(write=False)
        return value, nodes

    def _filled_like(self, i: int) -> tuple[np.ndarray, tuple[int, ...]] | None:
        """``tf.ones_like(x)`` / ``tf.zeros_like(x)`` of an ``x`` whose shape is static: its one
        number over that shape (the node reads ``x`` for its shape only, as a ``Shape`` does)."""
        node = self.index.nodes[i]
        data = [t for t in self.index.inputs[i] if t[1] != CONTROL]
        dtype = numpy_dtype(node.attr["T"].type) if "T" in node.attr else None
        shape = self.shape_of(data[0]) if self.shape_of is not None and len(data) == 1 else None
        if dtype is None or shape is None or None in shape:
            return None
        sizes = [int(d) for d in shape if d is not None]
        if int(np.prod(sizes, dtype=np.int64)) > MAX_FOLDED_ELEMENTS:
            return None
        value = np.full(sizes, FILLED_LIKE[node.op], dtype=dtype)
        value.setflags(write=False)
        return value, (i,)

    def _shape_nodes(self, i: int) -> tuple[int, ...] | None:
        """``i`` and its producers up to constants and shape reads (``Shape`` of ``x``: ``x`` is not
        among them), ``i`` first; None past :data:`MAX_FOLDED_NODES`."""
        index = self.index
        seen, stack = {i: None}, [i]
        while stack:
            node = stack.pop()
            if index.ops[node] in CONST_OPS or index.ops[node] in SHAPE_READING_OPS:
                continue
            for p, port in index.inputs[node]:
                if port != CONTROL and p not in seen:
                    seen[p] = None
                    stack.append(p)
            if len(seen) > MAX_FOLDED_NODES:
                return None
        return tuple(seen)

    def _apply(self, i: int, op: str, values: list[np.ndarray]) -> "np.ndarray | None":
        if op in FORWARDING_OPS:
            return values[0]
        rule = FOLDING_RULES[op]
        try:
            value = rule(self.index.nodes[i], *values)
        except (TypeError, ValueError, OverflowError):  # a wrong input count or values numpy rejects
            return None
        return None if value is None else np.array(value)


# ---------------------------------------------------------------- tensor evaluation

#: At most this many nodes compute an evaluated tensor.
MAX_EVALUATED_NODES = 200


class NotConstant(Exception):
    """The tensor is not computed from constants by the ops :class:`TensorEvaluator` evaluates."""


class DeadBranch(NotConstant):
    """The tensor lies on the branch of a ``tf.cond`` (``Switch``/``Merge``) its predicate does not take."""


#: Every op :class:`TensorEvaluator` computes (besides forwarding ops and ``Shape``).
EVALUATION_RULES: dict[str, Callable[..., Any]] = {**FOLDING_RULES, **INDEX_RULES}


class TensorEvaluator:
    """Values of a graph's tensors computed from constants, each computed once, and the nodes
    used (:attr:`nodes`).

    ``shape_of(tensor)`` tells a tensor's static shape (a list of sizes, None for an unknown
    one) for the ``Shape`` ops on the way; reading one sets :attr:`reads_shapes` (those nodes
    read a graph tensor: they cannot go with a fused op).  ``given`` are values to take for
    some tensors instead of computing them (a probe).
    """

    def __init__(self, view: "GraphView", shape_of: Callable[[Tensor], "list[int | None] | None"] | None = None,
                 given: dict[Tensor, np.ndarray] | None = None) -> None:
        self.view = view
        self.shape_of = shape_of
        self.given = dict(given or {})
        self.nodes: set[int] = set()
        self.reads_shapes = False
        self._values: dict[Tensor, np.ndarray] = {}

    def value(self, tensor: Tensor) -> np.ndarray:
        """The value of ``tensor``; raises :class:`NotConstant` saying why it has none."""
        known = self._values.get(tensor, self.given.get(tensor))
        if known is not None:
            return known
        node, port = tensor
        index = self.view.index
        name, op = index.names[node], index.ops[node]
        if op in ("Switch", "Merge", "RefSwitch", "RefMerge"):
            return self._control_flow(node, port)
        if port != 0:
            raise NotConstant(f"{name!r} output {port}")
        value = self.view.const_value_of(node)
        if value is None:
            if op in FORWARDING_OPS:
                value = self.value(self._data(node)[0])
            elif op == "Shape":
                value = self._shape(node)
            elif op == "StridedSlice" and self.view.index.ops[self._data(node)[0][0]] == "Shape":
                value = self._shape_slice(node)
            elif op in EVALUATION_RULES:
                value = self._apply(node, [self.value(t) for t in self._data(node)])
            else:
                raise NotConstant(f"{name!r} is a {op}, which is not evaluated here")
        if value.size > MAX_EVALUATED_ELEMENTS:
            raise NotConstant(f"{name!r} has {value.size} elements")
        self.nodes.update(self.view.constant_chain(node) or [node])
        if len(self.nodes) > MAX_EVALUATED_NODES:
            raise NotConstant(f"more than {MAX_EVALUATED_NODES} nodes compute it")
        self._values[tensor] = value
        return value

    def _control_flow(self, node: int, port: int) -> np.ndarray:
        """A ``tf.cond`` of TensorFlow 1 control flow: ``Switch`` passes its data to output 1 when
        the predicate holds, else to output 0 (the other output is dead: so is every op reading
        it); ``Merge`` gives the input that is not dead (output 1: its index)."""
        index = self.view.index
        data = self._data(node)
        if index.ops[node].endswith("Switch"):
            predicate = self.value(data[1])
            if predicate.size != 1 or port not in (0, 1):
                raise NotConstant(f"{index.names[node]!r} has no scalar predicate")
            if bool(predicate.reshape(-1)[0]) != bool(port):
                raise DeadBranch(f"{index.names[node]!r} output {port} is not taken")
            value = self.value(data[0])
        else:
            for k, tensor in enumerate(data):
                try:
                    value = self.value(tensor)
                except DeadBranch:
                    continue
                if port == 1:
                    value = np.array(k, dtype=np.int32)
                break
            else:
                raise DeadBranch(f"every input of {index.names[node]!r} is dead")
        self.nodes.add(node)
        self._values[(node, port)] = value
        return value

    def _apply(self, node: int, values: list[np.ndarray]) -> np.ndarray:
        index = self.view.index
        try:
            value = EVALUATION_RULES[index.ops[node]](index.nodes[node], *values)
        except (TypeError, ValueError, IndexError, OverflowError, np.exceptions.AxisError):
            value = None  # a wrong input count, or values numpy rejects
        if value is None:
            raise NotConstant(f"{index.names[node]!r} ({index.ops[node]}) has no value from these inputs")
        return np.asarray(value)

    def _shape(self, node: int) -> np.ndarray:
        """A Shape's value: the shape of what it reads when that is computed from constants too,
        else its static shape when every dimension is known."""
        read = self._data(node)[0]
        try:
            return np.array(self.value(read).shape, dtype=out_type(self.view.index.nodes[node]))
        except DeadBranch:
            raise
        except NotConstant:
            pass
        shape = self.shape_of(read) if self.shape_of is not None else None
        if shape is None or None in shape:
            raise NotConstant(f"the shape {self.view.index.names[node]!r} reads is not static")
        self.reads_shapes = True
        return np.array([int(d) for d in shape if d is not None], dtype=out_type(self.view.index.nodes[node]))

    def _shape_slice(self, node: int) -> np.ndarray:
        """A slice of a ``Shape`` (``tf.shape(x)[1]``): the sizes it takes need be known, not all."""
        shape_node, *rest = self._data(node)
        try:
            whole = self.value(shape_node)
        except DeadBranch:
            raise
        except NotConstant:
            read = self._data(shape_node[0])[0]
            partial = self.shape_of(read) if self.shape_of is not None else None
            if partial is None:
                raise
            sliced = self._apply(node, [np.array(partial, dtype=object), *(self.value(t) for t in rest)])
            if any(d is None for d in sliced.reshape(-1)):
                raise NotConstant(f"the sizes {self.view.index.names[node]!r} takes are not static") from None
            self.reads_shapes = True
            self.nodes.add(shape_node[0])
            return sliced.astype(out_type(self.view.index.nodes[shape_node[0]]))
        return self._apply(node, [whole, *(self.value(t) for t in rest)])

    def _data(self, node: int) -> list[Tensor]:
        return [t for t in self.view.index.inputs[node] if t[1] != CONTROL]
