"""The graph around a ``dynamic_rnn`` loop (control flow v2)::

    inputs  = TensorListFromTensor(x, shape)        x time-major, [steps, batch, input]
    outputs = TensorListReserve(shape, n)
    ... = While(counter0, n, time0, outputs, states..., m, inputs, weights...)
    y       = TensorListStack(Identity(While:outputs), shape)

with ``m`` either ``n`` or ``Minimum(n, Maximum(1, n))`` (dynamic_rnn's bound on its time), so
the loop runs once per element of the output list; with a ``sequence_length`` (:mod:`.copy_through`)
``m`` is ``Minimum(n, Maximum(1, Max(lengths)))``, which may stop the loop early, but only once
every sequence has ended; a Keras layer's loop compares its time with a
constant in its condition and its counter with ``maximum_iterations``: their smaller value must be
``n``'s; a tf_keras layer's loop compares its time alone, with ``n`` itself.  A Keras layer with
``return_sequences=False`` keeps its last output alone: ``n`` is 1, the step writes at 0, and the
bounds must be ``x``'s rows (or, when the graph does not say how many ``x`` has, a constant: the
rows the fused op reads).  These nodes are what the fused op replaces.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ....core.fusion.refusal import fail
from ....core.graph.vocabulary import CONTROL
from .body import Bound, LoopBody

if TYPE_CHECKING:  # pragma: no cover
    from ....core.graph.index import GraphIndex
    from ....core.graph.view import GraphView

Tensor = tuple[int, int]


@dataclass
class LoopPlumbing:
    """The loop's nodes outside its body: its members, its input x and its stacked output."""

    members: set[int]
    x: Tensor
    stack: int
    #: a loop keeping its last output alone over an input whose row count the graph does not say
    #: runs this many steps: the fused op reads ``x[:rows]`` (the loop could not read more rows)
    rows: int | None = None


def data_inputs(index: "GraphIndex", node: int) -> list[Tensor]:
    return [t for t in index.inputs[node] if t[1] != CONTROL]


def readers_of(index: "GraphIndex", node: int, port: int) -> list[int]:
    return [c for c, p, _ in index.consumers[node] if p == port]


def _producer(index: "GraphIndex", tensor: Tensor, op: str, what: str) -> int:
    if index.ops[tensor[0]] != op:
        fail(f"the loop's {what} is not a {op} but {index.names[tensor[0]]!r} ({index.ops[tensor[0]]})")
    return tensor[0]


def _is_time_bound(view: "GraphView", bound: Tensor, n: Tensor, lengths: Tensor | None) -> bool:
    """``n`` itself, or ``Minimum(n, Maximum(_, n))`` in either order; with ``lengths``, also
    ``Minimum(n, Maximum(_, Max(lengths)))``: at least every sequence's length (or ``n``)."""
    index = view.index
    if bound == n:
        return True
    if index.ops[bound[0]] != "Minimum":
        return False
    ins = data_inputs(index, bound[0])
    other = [t for t in ins if t != n]
    if len(ins) != 2 or len(other) != 1 or index.ops[other[0][0]] != "Maximum":
        return False
    below = data_inputs(index, other[0][0])
    return n in below or (lengths is not None and any(is_max_of(view, t, lengths) for t in below))


def value_of(view: "GraphView", tensor: Tensor, depth: int = 0) -> Any:
    """The value of a small constant expression (constants, Range, Max / Min, Maximum / Minimum, an
    element of a vector), or None."""
    index = view.index
    value = view.const_value_of(tensor[0]) if tensor[1] == 0 else None
    op = index.ops[tensor[0]]
    if value is not None or depth > 4 or op not in ("Range", "Max", "Min", "Maximum", "Minimum", "StridedSlice"):
        return value
    values = [value_of(view, t, depth + 1) for t in data_inputs(index, tensor[0])]
    if any(v is None for v in values):
        return None
    if op == "StridedSlice":
        return _element(index.nodes[tensor[0]], values)
    if op == "Range":
        return np.arange(*[int(v) for v in values])
    if op in ("Max", "Min"):
        reduce = np.max if op == "Max" else np.min
        return reduce(values[0], axis=tuple(int(a) for a in np.atleast_1d(values[1])))
    return (np.maximum if op == "Maximum" else np.minimum)(values[0], values[1])


def _element(node: Any, values: list[Any]) -> Any:
    """``vector[k]`` written as a StridedSlice (``shape(x)[0]``), or None for any other slice."""
    vector, begin, end, strides = values
    attrs = node.attr
    masks = [attrs[m].i for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask")]
    if vector.ndim != 1 or any(v.shape != (1,) for v in (begin, end, strides)) or any(masks) \
            or attrs["shrink_axis_mask"].i != 1 or int(strides[0]) != 1 or int(end[0]) != int(begin[0]) + 1:
        return None
    k = int(begin[0])
    return vector[k] if -len(vector) <= k < len(vector) else None


def check_bounds(view: "GraphView", ins: list[Tensor], bounds: tuple[Bound | None, Bound], n: Tensor,
                 lengths: Tensor | None = None) -> None:
    """The loop runs once per element of the output list (``n`` of them), or, with the
    sequences' ``lengths``, until every sequence has ended; refused (:func:`fail`).
    A counter with no bound (None) leaves the time's bound alone to say so."""
    counter, time = (ins[b[1]] if b is not None and b[0] == "arg" else None for b in bounds)
    if (counter == n or bounds[0] is None) and time is not None and _is_time_bound(view, time, n, lengths):
        return
    values = [b[1] if b[0] == "value" else value_of(view, ins[b[1]]) for b in bounds if b is not None]
    elements = value_of(view, n)
    if any(v is None or getattr(v, "size", 1) != 1 for v in values + [elements]) or \
            min(int(v) for v in values) != int(elements):
        if lengths is not None:
            fail("the loop's time bound is neither the length of its output list nor dynamic_rnn's "
                 "Minimum(steps, Maximum(1, Max(sequence_length))): it may stop before a sequence ends")
        fail("the loop does not run once per element of its output list")


def read_plumbing(view: "GraphView", loop: int, body: LoopBody, bounds: tuple[Bound | None, Bound]) -> LoopPlumbing:
    """The nodes around ``loop`` fused with it; refused (:func:`fail`)."""
    index = view.index
    ins = data_inputs(index, loop)
    unstack = _producer(index, ins[body.inputs], "TensorListFromTensor", "input list")
    reserve = _producer(index, ins[body.outputs], "TensorListReserve", "output list")
    x, n = data_inputs(index, unstack)[0], data_inputs(index, reserve)[1]
    rows = None
    if body.last_only:
        if body.copy is not None:
            fail("the loop keeps its last step's output alone and copies its state through past each "
                 "sequence's end: a sequence length with return_sequences=False is not fused")
        rows = check_last_only(view, ins, bounds, x, n)
    else:
        check_bounds(view, ins, bounds, n, None if body.copy is None else ins[body.copy.lengths])
        if body.copy is not None and body.copy.zeros is not None:
            check_lengths(view, ins[body.copy.lengths], ins[body.copy.zeros])
        check_rows(view, x, n)
    stack, identity = None, None
    readers = readers_of(index, loop, body.outputs)
    if len(readers) == 1 and index.ops[readers[0]] == "Identity":
        identity = readers[0]
        readers = readers_of(index, identity, 0)
    if len(readers) != 1 or index.ops[readers[0]] != "TensorListStack":
        fail("the loop's output list is not stacked into one tensor after the loop (and only that)")
    stack = readers[0]
    if data_inputs(index, stack)[0][1] != (0 if identity is not None else body.outputs):
        fail("the loop's output list is read other than by one TensorListStack")
    for node, what in ((unstack, "input list"), (reserve, "output list")):
        if readers_of(index, node, 0) != [loop]:
            fail(f"the loop's {what} {index.names[node]!r} is read by other nodes too")
    members = {loop, unstack, reserve, stack} | ({identity} if identity is not None else set())
    return LoopPlumbing(members, x, stack, rows)


def check_last_only(view: "GraphView", ins: list[Tensor], bounds: tuple[Bound | None, Bound], x: Tensor,
                    n: Tensor) -> int | None:
    """A loop keeping its last step's output alone (written at 0 of a one-element list) must run
    once per row of ``x``: its bound is ``shape(x)[0]``, or a constant (the smaller, when both are
    set) equal to ``x``'s known row count; or, when the graph does not say how many rows ``x`` has,
    a constant: the number of rows the fused op then reads (returned; None: all of them).  Raises
    :class:`Refused`."""
    elements = value_of(view, n)
    if elements is None or getattr(elements, "size", 1) != 1 or int(elements) != 1:
        fail("the loop writes each step's output at index 0 of a list that is not of one element")
    if bounds[0] is None and bounds[1][0] == "arg" and _is_rows_of(view, ins[bounds[1][1]], x):
        return None  # time < shape(x)[0] alone (tf_keras)
    values = [b[1] if b[0] == "value" else value_of(view, ins[b[1]]) for b in bounds if b is not None]
    if any(v is None or getattr(v, "size", 1) != 1 for v in values) or min(int(v) for v in values) < 1:
        fail("the loop keeps its last step's output alone and runs a number of steps the graph does "
             "not fix: it may not run once per row of its input")
    steps = min(int(v) for v in values)
    shape = view.static_shape(x)
    rows = shape[0] if shape else None
    if rows is not None and rows != steps:
        fail(f"the loop runs {steps} steps over an input of {rows}")
    return steps if rows is None else None


def _is_rows_of(view: "GraphView", tensor: Tensor, x: Tensor) -> bool:
    """``tensor`` is ``shape(x)[0]``: a StridedSlice taking element 0 of ``Shape(x)``."""
    index = view.index
    node = tensor[0]
    if tensor[1] != 0 or index.ops[node] != "StridedSlice":
        return False
    shape = data_inputs(index, node)[0]
    if index.ops[shape[0]] != "Shape" or data_inputs(index, shape[0])[0] != x:
        return False
    values = [view.const_value_of(t[0]) if t[1] == 0 else None for t in data_inputs(index, node)[1:]]
    attrs = index.nodes[node].attr
    masks = [attrs[m].i for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask")]
    return all(v is not None and v.shape == (1,) for v in values) and \
        [int(v[0]) for v in values if v is not None] == [0, 1, 1] and \
        not any(masks) and attrs["shrink_axis_mask"].i == 1


def check_rows(view: "GraphView", x: Tensor, n: Tensor) -> None:
    """The loop's ``n`` steps are ``x``'s rows, when both are known; refused (:func:`fail`)."""
    shape, elements = view.static_shape(x), value_of(view, n)
    if shape and shape[0] is not None and elements is not None and getattr(elements, "size", 1) == 1 \
            and int(elements) != shape[0]:
        fail(f"the loop runs {int(elements)} steps over an input of {shape[0]}")


def add_feeders(index: "GraphIndex", members: set[int], keep: set[int]) -> None:
    """Add to ``members`` every node only they read (the loop's bounds, counters and shapes),
    up to the nodes in ``keep`` (those producing the fused op's inputs)."""
    stack = list(members)
    while stack:
        for node, _ in index.inputs[stack.pop()]:
            if node in members or node in keep:
                continue
            if all(c in members for c, _, _ in index.consumers[node]):
                members.add(node)
                stack.append(node)


def is_zeros(view: "GraphView", tensor: Tensor) -> bool:
    """``tensor`` is all zeros: a constant expression, ``Fill(shape, 0)`` or ``ZerosLike``."""
    index = view.index
    value = value_of(view, tensor)
    if value is not None:
        return not np.any(value)
    op = index.ops[tensor[0]]
    if op == "Fill":
        filled = value_of(view, data_inputs(index, tensor[0])[1])
        return filled is not None and filled.size == 1 and not np.any(filled)
    return op == "ZerosLike"


def check_lengths(view: "GraphView", lengths: Tensor, zeros: Tensor) -> None:
    """The lengths are a vector and the output past a sequence's end is zero; refused (:func:`fail`)."""
    shape = view.static_shape(lengths)
    if shape is not None and len(shape) != 1:
        fail(f"the loop's sequence lengths {view.index.names[lengths[0]]!r} are not a vector "
             f"(shape {shape})")
    if not is_zeros(view, zeros):
        fail(f"the step's output past a sequence's end is {view.index.names[zeros[0]]!r}, not zeros "
             "(dynamic_rnn's sequence_length writes zeros)")


def is_max_of(view: "GraphView", tensor: Tensor, lengths: Tensor) -> bool:
    """``tensor`` is ``Max(lengths)`` over its one axis (``reduce_max``)."""
    index = view.index
    attrs = index.nodes[tensor[0]].attr
    if index.ops[tensor[0]] != "Max" or ("keep_dims" in attrs and attrs["keep_dims"].b):
        return False
    of, axes = data_inputs(index, tensor[0])
    axes_value = value_of(view, axes)
    return of == lengths and axes_value is not None and axes_value.size == 1 \
        and int(np.reshape(axes_value, -1)[0]) in (0, -1)
