"""Static shapes through the fused ops of earlier stages, for passes of the ``UBFusion`` stage.

TensorFlow's shape inference imports a fused op it does not know as a tensor of unknown
shape (or, with ``same_shape``, as its input), so a shape downstream of a graph-stage
``MatMulBiasAdd`` is lost, and with it every shape computed from it.  :func:`static_shape`
asks TensorFlow first and, when it cannot tell, works the shape out from the producer's
inputs, for the few ops through which the shapes of a transformer block flow:

* ``MatMulBiasAdd`` / ``MatMulBiasAddActivation``: ``[..., M, N]`` from ``a`` and ``b`` and
  the transposes (batch dimensions broadcast);
* a fused op whose output is declared shaped like an input (``same_shape``: ``LayerNorm``,
  ``Gelu``, ``Swish`` ...) and ``Identity``: that input's shape;
* element-wise ``Add``/``AddV2``/``Sub``/``Mul``: the broadcast of the operands' shapes.

Anything else stays unknown (None), and the asking pass says so.
"""
from __future__ import annotations

from typing import Any

Shape = list[int | None]
PRODUCT_OPS = ("MatMulBiasAdd", "MatMulBiasAddActivation")
ELEMENTWISE = ("Add", "AddV2", "Sub", "Mul")
#: How far back through such ops a shape is followed.
MAX_DEPTH = 32


def static_shape(view: Any, tensor: tuple[int, int], depth: int = MAX_DEPTH) -> Shape | None:
    """The static shape of ``tensor`` (unknown dimensions as None), or None when not even its rank
    can be told."""
    shape = view.static_shape(tensor)
    if shape is not None or depth <= 0:
        return shape
    node, port = tensor
    index = view.index
    op = index.ops[node]
    try:
        if op in PRODUCT_OPS and port == 0:
            return _product(view, node, depth - 1)
        source = view.same_shape.get(op, {}).get(port)
        if source is None and op == "Identity":
            source = 0
        if source is not None:
            return static_shape(view, index.data_input(node, source), depth - 1)
        if op in ELEMENTWISE and port == 0:
            a, b = (static_shape(view, index.data_input(node, k), depth - 1) for k in (0, 1))
            return None if a is None or b is None else broadcast(a, b)
    except IndexError:  # an input the op should have is missing: no shape
        return None
    return None


def _product(view: Any, node: int, depth: int) -> Shape | None:
    index = view.index
    a_shape, b_shape = (static_shape(view, index.data_input(node, k), depth) for k in (0, 1))
    if a_shape is None or b_shape is None or len(a_shape) < 2 or len(b_shape) < 2:
        return None
    attrs = index.nodes[node].attr
    rows = a_shape[-1] if attrs["transpose_a"].b else a_shape[-2]
    columns = b_shape[-2] if attrs["transpose_b"].b else b_shape[-1]
    return [*broadcast(a_shape[:-2], b_shape[:-2]), rows, columns]


def broadcast(a: Shape, b: Shape) -> Shape:
    """The broadcast of two shapes: a dimension of 1 takes the other's, an unknown one the other's
    when that is known and not 1 (a valid broadcast gives that either way)."""
    a, b = [1] * (len(b) - len(a)) + list(a), [1] * (len(a) - len(b)) + list(b)
    return [_dimension(x, y) for x, y in zip(a, b)]


def _dimension(x: int | None, y: int | None) -> int | None:
    if x == 1 or x is None:
        return x if y == 1 else y
    return x if y in (1, None, x) else None
