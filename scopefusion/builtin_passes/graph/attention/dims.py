"""Sizes of single axes, told without TensorFlow: the graph's recorded shapes, constants, and
a few rules that carry one axis through the ops around attention (a head split's Reshape by a
constant shape, a Transpose, elementwise ops, products).  The fusion path never imports
TensorFlow; an axis no rule tells is unknown (None), never guessed."""
from __future__ import annotations

import numpy as np

from ....core.graph.constant_eval import NotConstant, TensorEvaluator
from ....core.graph.view import GraphView
from ....core.graph.vocabulary import CONTROL, FORWARDING_OPS
from ..fused_shapes import PerView

Tensor = tuple[int, int]

#: ops whose output has the shape of the broadcast of their inputs
ELEMENTWISE = frozenset({"Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "BiasAdd", "Neg", "Cast", "Maximum",
                         "Minimum", "SelectV2", "Relu", "Tanh", "Sigmoid", "Exp", "Softmax", "Erf", "Sqrt",
                         "Rsqrt", "Square"})
MAX_DEPTH = 24


def rank(view: GraphView, tensor: Tensor) -> int | None:
    """The rank by the local rules (``GraphView.rank_inference``), the recorded shape, or the
    length of a Transpose's permutation or a Reshape's constant shape."""
    local = view.rank_inference().rank_at(*tensor)
    if local is not None and local >= 0:
        return local
    recorded = view.static_shape(tensor, infer=False)
    if recorded is not None:
        return len(recorded)
    index = view.index
    node = view.forwarded(tensor[0])
    if index.ops[node] in ("Transpose", "Reshape"):
        data = [t for t in index.inputs[node] if t[1] != CONTROL]
        value = view.const_value_of(data[1][0]) if len(data) == 2 else None
        return None if value is None else int(value.size)
    return None


def shape(view: GraphView, tensor: Tensor) -> list[int | None] | None:
    """Every axis by :func:`dim` (None: the rank is unknown)."""
    r = rank(view, tensor)
    return None if r is None else [dim(view, tensor, axis - r) for axis in range(r)]


#: per graph view, the sizes told so far: (tensor, negative axis) -> size
_KNOWN = PerView()
_UNTOLD = object()


def dim(view: GraphView, tensor: Tensor, axis: int, depth: int = MAX_DEPTH) -> int | None:
    """The size of ``axis`` of ``tensor``, or None.  A negative axis counts from the end and
    needs no rank: elementwise ops broadcast from the end.  Each is told once per view."""
    known: dict[tuple[Tensor, int], int | None] = _KNOWN.of(view)
    if axis < 0 and depth > 0:  # told before (its rank, which decides below, is the same now)
        told = known.get((tensor, axis), _UNTOLD)
        if told is not _UNTOLD:
            return told  # type: ignore[return-value]
    r = rank(view, tensor)
    if axis >= 0:
        if r is None:
            return None
        axis -= r
    if depth == 0 or (r is not None and -axis > r):
        return None
    key = (tensor, axis)
    if key not in known:
        known[key] = _dim(view, tensor, axis, depth)
    return known[key]


def _dim(view: GraphView, tensor: Tensor, axis: int, depth: int) -> int | None:
    known = view.static_shape(tensor, infer=False)
    recorded = known[axis] if known is not None and -axis <= len(known) else None
    if recorded is not None:
        return int(recorded)
    index = view.index
    node = tensor[0]
    op = index.ops[node]
    data = [t for t in index.inputs[node] if t[1] != CONTROL]
    if op in FORWARDING_OPS and data:
        return dim(view, data[0], axis, depth - 1)
    source = view.same_shape.get(op, {}).get(tensor[1])  # a fused op shaped like one of its inputs
    if source is not None and source < len(data):
        return dim(view, data[source], axis, depth - 1)
    if op == "Transpose":
        perm = view.const_value_of(data[1][0])
        if perm is None or -axis > perm.size:
            return None
        return dim(view, data[0], int(perm.reshape(-1)[axis]) - perm.size, depth - 1)
    if op == "Reshape":
        target = _evaluated(view, data[1])
        if target is None:  # a Pack of sizes some of which are unknown: the one asked for may be known
            return _packed(view, data[1], axis)
        if -axis > target.size:
            return None
        size = int(target.reshape(-1)[axis])
        return size if size >= 0 else None
    if op in ("Pad", "PadV2", "MirrorPad"):
        paddings = _evaluated(view, data[1])
        inner = dim(view, data[0], axis, depth - 1)
        if paddings is None or inner is None or paddings.ndim != 2 or -axis > paddings.shape[0]:
            return None
        return inner + int(paddings[axis].sum())
    if op in ELEMENTWISE:
        sizes = []
        for t in data:
            tr = rank(view, t)
            if tr is None or -axis <= tr:
                sizes.append(dim(view, t, axis, depth - 1))
        known_sizes = {s for s in sizes if s is not None}
        if len(known_sizes - {1}) == 1:
            return (known_sizes - {1}).pop()
        return 1 if known_sizes == {1} and None not in sizes else None
    if op in ("BatchMatMulV2", "BatchMatMul", "BatchMatMulV3", "MatMul"):
        attrs = index.nodes[node].attr
        adj_x = any(attrs[k].b for k in ("adj_x", "transpose_a") if k in attrs)
        adj_y = any(attrs[k].b for k in ("adj_y", "transpose_b") if k in attrs)
        if axis == -2:
            return dim(view, data[0], -1 if adj_x else -2, depth - 1)
        if axis == -1:
            return dim(view, data[1], -2 if adj_y else -1, depth - 1)
        for t in data:  # batch axes (broadcast)
            batch = dim(view, t, axis, depth - 1)
            if batch not in (None, 1):
                return batch
        return None
    if op == "Einsum":
        equation = index.nodes[node].attr["equation"].s.decode().replace(" ", "")
        inputs, _, output = equation.partition("->")
        if "." in equation or -axis > len(output):
            return None
        for labels, t in zip(inputs.split(","), data, strict=False):  # a malformed equation: no answer below
            if output[axis] in labels:
                found = dim(view, t, labels.index(output[axis]) - len(labels), depth - 1)
                if found not in (None, 1):
                    return found
        return None
    return None


def _packed(view: GraphView, target: Tensor, axis: int) -> int | None:
    """Size ``axis`` (negative) of a Reshape to ``target`` when that is a ``Pack`` of scalars and
    the one at ``axis`` is computed from constants (or known shapes)."""
    index = view.index
    if target[1] != 0 or index.ops[target[0]] != "Pack":
        return None
    sizes = [t for t in index.inputs[target[0]] if t[1] != CONTROL]
    if -axis > len(sizes):
        return None
    value = _evaluated(view, sizes[axis])
    if value is None or value.size != 1 or int(value.reshape(-1)[0]) < 0:
        return None
    return int(value.reshape(-1)[0])


def evaluator(view: GraphView, given: dict[Tensor, np.ndarray] | None = None) -> TensorEvaluator:
    """Values computed from constants, a ``Shape`` told by :func:`shape` (``given``: a probe)."""
    return TensorEvaluator(view, shape_of=lambda tensor: shape(view, tensor), given=given)


def _evaluated(view: GraphView, tensor: Tensor) -> np.ndarray | None:
    """A small integer tensor computed from constants (a Reshape's shape), or None."""
    value = view.const_value_of(tensor[0]) if tensor[1] == 0 else None
    if value is not None:
        return value
    try:
        return evaluator(view).value(tensor)
    except NotConstant:
        return None
