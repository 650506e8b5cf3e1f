"""Static shapes for passes of the ``UBFusion`` stage, through the fused ops of earlier stages.

:func:`static_shape` first reads what the graph records (constants, placeholders,
``_output_shapes``) and works shapes out from the producer's inputs for the ops through which a
transformer block's shapes flow, each tensor once per view:

* ``MatMulBiasAdd`` / ``MatMulBiasAddActivation``, ``MatMul``, ``BatchMatMulV2``: ``[..., M, N]``
  from the operands and the transposes (batch dimensions broadcast);
* a fused op whose output is declared shaped like an input (``same_shape``: ``LayerNorm``,
  ``Gelu``, ``Swish`` ...) and the element-wise unary ops: that input's shape;
* element-wise binary ops: the broadcast of the operands' shapes;
* ``Reshape`` to a constant shape (one ``-1`` resolved from the input's size).

When that leaves a dimension unknown, the graph view's own shape propagation over the whole graph
(:meth:`GraphView.static_shape`) is asked, and when neither can tell, the asking pass says so.
"""
from __future__ import annotations

import weakref

from typing import Any

import numpy as np

Shape = list[int | None]
PRODUCT_OPS = ("MatMulBiasAdd", "MatMulBiasAddActivation")
#: Products whose transposes are ``transpose_a`` / ``transpose_b``, and those with ``adj_x`` / ``adj_y``.
_TRANSPOSES = {"MatMulBiasAdd": ("transpose_a", "transpose_b"),
               "MatMulBiasAddActivation": ("transpose_a", "transpose_b"),
               "MatMul": ("transpose_a", "transpose_b"), "BatchMatMulV2": ("adj_x", "adj_y"),
               "BatchMatMulV3": ("adj_x", "adj_y"), "BatchMatMul": ("adj_x", "adj_y")}
ELEMENTWISE = frozenset({"Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum",
                         "SquaredDifference", "Pow"})
UNARY = frozenset({"Identity", "StopGradient", "Cast", "Neg", "Relu", "Relu6", "Elu", "LeakyRelu", "Tanh",
                   "Sigmoid", "Erf", "Erfc", "Exp", "Log", "Sqrt", "Rsqrt", "Square", "Reciprocal", "Softmax",
                   "BiasAdd"})
#: How far back through such ops a shape is followed.
MAX_DEPTH = 32


def static_shape(view: Any, tensor: tuple[int, int]) -> Shape | None:
    """The static shape of ``tensor`` (unknown dimensions as None), or None when not even its rank
    can be told: from the graph and the rules above first, from the view's shape propagation when
    they leave it or one of its dimensions unknown (a recorded ``_output_shapes`` may say less than
    inference does)."""
    shape = _local(view, tensor, MAX_DEPTH)
    if shape is not None and None not in shape:
        return shape
    inferred = view.static_shape(tensor)
    if inferred is None or (shape is not None and inferred.count(None) >= shape.count(None)):
        return shape
    return inferred


class PerView:
    """What a pass has worked out about one graph view, a dict per view kept as long as the view
    (a ``WeakKeyDictionary``).  A pass asks about one view many times in a row, and a lookup in
    that dictionary makes a new weak reference each time: the last view's dict is kept at hand."""

    def __init__(self) -> None:
        self._views: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()
        self._last: tuple[weakref.ref[Any], dict[Any, Any]] | None = None

    def of(self, view: Any) -> dict[Any, Any]:
        last = self._last
        if last is not None and last[0]() is view:
            return last[1]
        found = self._views.setdefault(view, {})
        self._last = (weakref.ref(view), found)
        return found


#: per graph view, the shapes the local rules told: tensor -> (shape, the depth it was told at)
_TOLD = PerView()


Told = dict[tuple[int, int], tuple[Shape | None, int]]


def _local(view: Any, tensor: tuple[int, int], depth: int) -> Shape | None:
    """:func:`_local_rules`, each tensor told once per view (a residual stream reaches the same tensors
    along many paths: without this, the walk grows exponentially with the depth)."""
    return _told(view, _TOLD.of(view), tensor, depth)


def _told(view: Any, told: Told, tensor: tuple[int, int], depth: int) -> Shape | None:
    """:func:`_local` with the view's memo at hand (``told``)."""
    known = told.get(tensor)
    if known is not None and (known[0] is not None or known[1] >= depth):
        return known[0]
    shape = _local_rules(view, told, tensor, depth)
    told[tensor] = (shape, depth)
    return shape


def _local_rules(view: Any, told: Told, tensor: tuple[int, int], depth: int) -> Shape | None:
    shape = view.static_shape(tensor, infer=False)
    if shape is not None or depth <= 0:
        return shape
    node, port = tensor
    index = view.index
    op = index.ops[node]
    try:
        if op in _TRANSPOSES and port == 0:
            return _product(view, told, node, depth - 1)
        rules = view.same_shape.get(op)
        source = None if rules is None else rules.get(port)
        if source is None and op in UNARY and port == 0:
            source = 0
        if source is not None:
            return _told(view, told, index.data_input(node, source), depth - 1)
        if op in ELEMENTWISE and port == 0:
            a = _told(view, told, index.data_input(node, 0), depth - 1)
            b = _told(view, told, index.data_input(node, 1), depth - 1)
            return None if a is None or b is None else broadcast(a, b)
        if op == "Reshape" and port == 0:
            return _reshaped(view, told, node, depth - 1)
    except IndexError:  # an input the op should have is missing: no shape
        return None
    return None


def _reshaped(view: Any, told: Told, node: int, depth: int) -> Shape | None:
    target = view.const_value_of(view.forwarded(view.index.data_input(node, 1)[0]))
    if target is None:
        return None
    dims: Shape = [int(d) for d in np.asarray(target).reshape(-1)]
    if dims.count(-1) > 1:
        return None
    if -1 in dims:
        source = _told(view, told, view.index.data_input(node, 0), depth)
        known = [d for d in dims if d is not None and d != -1]
        sizes = [d for d in source or () if d is not None]
        if source is None or len(sizes) != len(source) or 0 in known:
            dims = [None if d == -1 else d for d in dims]
        else:
            dims[dims.index(-1)] = int(np.prod(sizes)) // int(np.prod(known))
    return dims


def _product(view: Any, told: Told, node: int, depth: int) -> Shape | None:
    index = view.index
    a_shape = _told(view, told, index.data_input(node, 0), depth)
    b_shape = _told(view, told, index.data_input(node, 1), depth)
    if a_shape is None or b_shape is None or len(a_shape) < 2 or len(b_shape) < 2:
        return None
    attrs = index.nodes[node].attr
    ta, tb = _TRANSPOSES[index.ops[node]]
    rows = a_shape[-1] if attrs[ta].b else a_shape[-2]
    columns = b_shape[-2] if attrs[tb].b else b_shape[-1]
    return [*broadcast(a_shape[:-2], b_shape[:-2]), rows, columns]


def broadcast(a: Shape, b: Shape) -> Shape:
    """The broadcast of two shapes: a dimension of 1 takes the other's, an unknown one the other's
    when that is known and not 1 (a valid broadcast gives that either way)."""
    if a == b:  # each dimension its own broadcast (the residual stream's shapes mostly are)
        return list(a)
    ones: list[int | None] = [1] * abs(len(a) - len(b))
    padded_a = (ones if len(b) > len(a) else []) + list(a)
    padded_b = (ones if len(a) > len(b) else []) + list(b)
    return [_dimension(x, y) for x, y in zip(padded_a, padded_b, strict=True)]


def _dimension(x: int | None, y: int | None) -> int | None:
    if x == 1 or x is None:
        return x if y == 1 else y
    return x if y in (1, None, x) else None


def unequal_shapes(match: Any, names: tuple[str, str], unknown: str) -> str | tuple[Shape, Shape] | None:
    """Whether the tensors ``names`` of ``match`` have one shape (an element-wise op of them does not
    broadcast): None when they do (a dimension unknown in both counts as equal), their two shapes when
    they do not, and ``unknown`` followed by the tensor's name when a shape cannot be told."""
    view = match.view
    told = _TOLD.of(view)
    local = [_told(view, told, match.tensor(name), MAX_DEPTH) for name in names]
    if local[0] is not None and local[1] is not None and len(local[0]) == len(local[1]):
        # the graph's own shapes decide when each axis is known alike or unknown in both (as below),
        # so the whole graph's shape propagation is asked only when they do not
        if all(a == b for a, b in zip(local[0], local[1], strict=True)):
            return None
        if all(a is not None and b is not None for a, b in zip(local[0], local[1], strict=True)):
            return local[0], local[1]
    shapes = [static_shape(match.view, match.tensor(name)) for name in names]
    for name, shape in zip(names, shapes, strict=True):
        if shape is None:
            return f"cannot tell the shape of {unknown}{match.tensor_name(name)!r}, to rule out a broadcast"
    first, second = shapes
    assert first is not None and second is not None
    if len(first) != len(second) or any(a != b for a, b in zip(first, second, strict=True)):
        return first, second
    return None
