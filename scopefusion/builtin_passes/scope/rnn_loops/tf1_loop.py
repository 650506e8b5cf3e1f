"""The TF1 while loop (control flow v1) of ``dynamic_rnn``, read as the functional loop is.

Each loop variable ``k`` is ``Merge(Enter(init), NextIteration(next))``, read in the body as
``Identity(Switch(merge, LoopCond):1)`` and after the loop as ``Exit(Switch)``; the condition is
``LoopCond(LogicalAnd(Less(counter, Enter(n)), Less(time, Enter(m))))``.  The body reads the
step's input with ``TensorArrayReadV3`` from the array ``TensorArrayScatterV3`` filled with the
time-major input, runs the cells (their own ops, matched with the cell passes' forms; weights
brought in by ``Enter``) and writes the top layer's output with ``TensorArrayWriteV3``, gathered
after the loop by ``TensorArrayGatherV3(range(n))``.  With ``sequence_length`` the next values of
the state and the value written go through ``Select(time >= lengths, ...)`` in the frame
(:mod:`.copy_through`).  The result is the same :class:`LoopBody` as for a functional loop: loop
variables first, then the weights (and the lengths and zeros a copy-through brings in), as its
"arguments".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ....core.fusion.refusal import fail
from ....core.graph.vocabulary import ADD_OPS, CONTROL
from ..rnn_cells.gru import GRU_FORM, gru_attrs
from ..rnn_cells.lstm import LSTM_FORM, lstm_attrs
from ..rnn_cells.steps import CellStep, match_steps
from .body import LoopBody, LoopLayer
from .copy_through import COPY_OPS, CopyThrough, one_compare, select_nodes
from .plumbing import (LoopPlumbing, Tensor, check_bounds, check_lengths, check_rows, data_inputs, readers_of,
                       value_of)

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

_MACHINERY = frozenset({"Enter", "Merge", "Switch", "Identity", "NextIteration", "Exit", "LoopCond", "Less",
                        "LogicalAnd", "AddV2", "Add", "Const", "TensorArrayReadV3", "TensorArrayWriteV3"})
_FORMS = ((LSTM_FORM, "BasicLSTMCell", ("h", "c"), ("out", "c_out"), ("w", "b")),
          (GRU_FORM, "GRUCell", ("h",), ("out",), ("wg", "bg", "wc", "bc")))


@dataclass
class _Var:
    merge: int
    init: Tensor
    current: int  # the Identity reading it in the body
    next: Tensor
    exit: int | None


@dataclass
class TF1Loop:
    """What the pass needs of a TF1 loop: its body's roles, plumbing, inputs and final values."""

    body: LoopBody
    plumbing: LoopPlumbing
    ins: list[Tensor]
    #: position -> the Exit node giving the variable's final value
    exits: dict[int, int]


def _through_identities(sg: "ScopeGraph", tensor: Tensor) -> Tensor:
    """The tensor an Identity chain reads (``tensor`` itself when no Identity gives it)."""
    index = sg.index
    while index.ops[tensor[0]] == "Identity":
        tensor = data_inputs(index, tensor[0])[0]
    return tensor


def _body_read(sg: "ScopeGraph", switch: int) -> int | None:
    """The Identity through which the body reads a loop variable's ``Switch``: its one Identity
    reader, or, when a library adds others only for control (a lowered functional loop's
    ``loop_body_control``), the one whose value is read."""
    index = sg.index
    reads = [c for c in readers_of(index, switch, 1) if index.ops[c] == "Identity"]
    if len(reads) > 1:
        reads = [c for c in reads if any(port != CONTROL for _, port, _ in index.consumers[c])]
    return reads[0] if len(reads) == 1 else None


def _variables(sg: "ScopeGraph", frame: set[int]) -> list[_Var]:
    """The loop variables: each ``Merge(Enter(init), NextIteration(next))`` (either order, ``init``
    and ``next`` seen through Identity chains), read in the body through its ``Switch`` and an
    Identity, after the loop through an ``Exit``."""
    index = sg.index
    found = []
    for m in sorted(i for i in frame if index.ops[i] == "Merge"):
        ins = data_inputs(index, m)
        by_op = {index.ops[t[0]]: t[0] for t in (_through_identities(sg, t) for t in ins)}
        enter, nxt = by_op.get("Enter"), by_op.get("NextIteration")
        if len(ins) != 2 or enter is None or nxt is None:
            fail(f"the TF1 loop's {index.names[m]!r} is not Merge(Enter, NextIteration)")
        switch = [c for c in readers_of(index, m, 0) if index.ops[c] == "Switch"]
        current = _body_read(sg, switch[0]) if len(switch) == 1 else None
        exits = [c for c in readers_of(index, switch[0], 0) if index.ops[c] == "Exit"] if switch else []
        if current is None:
            fail(f"the TF1 loop variable {index.names[m]!r} is not read in the body through one Switch "
                              f"and an Identity chain")
        found.append(_Var(m, _through_identities(sg, data_inputs(index, enter)[0]), current,
                          _through_identities(sg, data_inputs(index, nxt)[0]), exits[0] if exits else None))
    return found


def _outer(sg: "ScopeGraph", tensor: Tensor, what: str) -> Tensor:
    """The tensor an ``Enter`` brings into the loop."""
    if sg.index.ops[tensor[0]] != "Enter":
        fail(f"the TF1 loop's {what} is not brought in by an Enter")
    return data_inputs(sg.index, tensor[0])[0]


def _increment(sg: "ScopeGraph", var: _Var) -> bool:
    index = sg.index
    node = var.next[0]
    if index.ops[node] not in ADD_OPS:
        return False
    a, b = data_inputs(index, node)
    one = sg.const_value_of(b[0])
    return a == (var.current, 0) and one is not None and one.size == 1 and one.reshape(-1)[0] == 1


def _range_of(sg: "ScopeGraph", tensor: Tensor) -> Tensor | None:
    """``n`` of a ``Range(0, n, 1)``, else None."""
    index = sg.index
    if index.ops[tensor[0]] != "Range":
        return None
    start, limit, delta = data_inputs(index, tensor[0])
    values = [value_of(sg, t) for t in (start, delta)]
    return limit if all(v is not None and v.size == 1 for v in values) and [int(v) for v in values] == [0, 1] \
        else None


def _attrs(sg: "ScopeGraph", op: str, step: CellStep) -> dict[str, Any]:
    ops = sg.index.ops
    if op == "BasicLSTMCell":
        attrs = lstm_attrs(step.consts, (ops[step.nodes["act_c"]], ops[step.nodes["act_j"]]))
    else:
        attrs = gru_attrs(ops[step.nodes["act"]])
    return {**attrs, "T": sg.index.nodes[step.nodes["root"]].attr["T"].type}


def _copy_through(sg: "ScopeGraph", frame: set[int], time: _Var, weights: list[Tensor]
                  ) -> CopyThrough[Tensor] | None:
    """The frame's sequence_length copy-through (its lengths joining ``weights``), or None."""
    index = sg.index
    ops = {(i, 0): index.ops[i] for i in sorted(frame) if index.ops[i] in COPY_OPS}
    if not ops:
        return None
    compare = one_compare(ops)
    current, lengths = data_inputs(index, compare[0])
    if current != (time.current, 0) or index.ops[lengths[0]] != "Enter":
        fail(f"GreaterEqual {index.names[compare[0]]!r} does not compare the loop's time with a tensor "
             "brought in by an Enter (dynamic_rnn's time >= sequence_length)")
    weights.append(_outer(sg, lengths, "sequence length"))
    selects = select_nodes({t: op for t, op in ops.items() if op != "GreaterEqual"},
                           lambda t: data_inputs(index, t[0]), compare, lambda t: index.names[t[0]])
    return CopyThrough(len(weights) - 1, selects)


def _carried(variables: list[_Var], copy: CopyThrough[Tensor] | None, position: int) -> Tensor | None:
    """What the loop carries into variable ``position``'s next value, seen through the copy-through."""
    var = variables[position]
    return var.next if copy is None else copy.new_of(var.next, (var.current, 0))


def _layers(sg: "ScopeGraph", scope: "Scope", frame: set[int], variables: list[_Var], start: Tensor,
            weights: list[Tensor], copy: CopyThrough[Tensor] | None) -> tuple[list[LoopLayer], Tensor, set[int]]:
    """The cells' steps chained from the step's input ``start``; their weights join ``weights``."""
    found = [(form, op, states, outs, names, step) for form, op, states, outs, names in _FORMS
             for step in match_steps(sg, frozenset(frame), form)]
    if not found:
        fail(LSTM_FORM.explain(scope) or "no BasicLSTMCell or GRUCell step in the TF1 loop")
    current_of = {(v.current, 0): k for k, v in enumerate(variables)}
    layers: list[LoopLayer] = []
    members: set[int] = set()
    current = start
    while len(layers) < len(found):
        match = next((f for f in found if f[5].tensors["x"] == current), None)
        if match is None:
            fail("the cells' steps in the TF1 loop are no chain from the step's input")
        form, op, states, outs, names, step = match
        reason = form.explain(scope)
        if reason:
            fail(reason)
        state = [current_of.get(step.tensors[s]) for s in states]
        if any(p is None or _carried(variables, copy, p) != step.tensors[o]
               for p, o in zip(state, outs, strict=True)):
            fail(f"the TF1 loop does not carry the {op} step's state into its next step"
                 + (" (through its sequence_length's Select)" if copy is not None else ""))
        names_of = []
        for name in names:
            weights.append(_outer(sg, step.tensors[name], "cell's weight"))
            names_of.append(f"weight_{len(weights) - 1}")
        layers.append(LoopLayer(op, _attrs(sg, op, step), names_of, [p for p in state if p is not None]))
        members |= step.members
        current = step.tensors["out"]
    return layers, current, members


def _copy_output(sg: "ScopeGraph", copy: CopyThrough[Tensor], written: Tensor, weights: list[Tensor]) -> Tensor | None:
    """The value the step writes, seen through the copy-through (its zeros joining ``weights``)."""
    kept = copy.selects.get(written, ((-1, 0), (-1, 0)))[0]
    if kept[0] < 0 or sg.index.ops[kept[0]] != "Enter":
        fail("the step's output past a sequence's end is not brought in by an Enter (dynamic_rnn's "
             "zeros)")
    weights.append(_outer(sg, kept, "zero output"))
    copy.zeros = len(weights) - 1
    new = copy.new_of(written, kept)
    copy.check_all_used(lambda t: sg.index.names[t[0]])
    return new


def _one(sg: "ScopeGraph", frame: set[int], op: str) -> int:
    found = [i for i in frame if sg.index.ops[i] == op]
    if len(found) != 1:
        fail(f"the TF1 loop holds {len(found)} {op} nodes, not one")
    return found[0]


def _bounds(sg: "ScopeGraph", frame: set[int], variables: list[_Var], counter: int, time: int) -> list[Tensor]:
    """The tensors ``counter < n and time < m`` compare with: [n, m]."""
    index = sg.index
    cond = data_inputs(index, _one(sg, frame, "LoopCond"))[0]
    bounds: dict[int, Tensor] = {}
    if index.ops[cond[0]] == "LogicalAnd":
        for less in data_inputs(index, cond[0]):
            a, b = data_inputs(index, less[0]) if index.ops[less[0]] == "Less" else (None, None)
            for k in (counter, time):
                if a == (variables[k].merge, 0) and b is not None:
                    bounds[k] = _outer(sg, b, "bound")
    if set(bounds) != {counter, time}:
        fail("the TF1 loop's condition is not counter < n and time < m")
    return [bounds[counter], bounds[time]]


def _check_frame(sg: "ScopeGraph", frame: set[int], members: set[int], increments: set[int]) -> None:
    index = sg.index
    extra = [index.names[i] for i in sorted(frame - members)
             if (index.ops[i] not in _MACHINERY or (index.ops[i] in ADD_OPS and i not in increments))
             and sg.const_value_of(i) is None]
    if extra:
        fail(f"the TF1 loop does more than its cells and plumbing: {', '.join(map(repr, extra[:3]))}")


def _producer(sg: "ScopeGraph", tensor: Tensor, op: str, what: str) -> int:
    if sg.index.ops[tensor[0]] != op:
        fail(f"the TF1 loop's {what} is not a {op}")
    return tensor[0]


def _outside(sg: "ScopeGraph", read: int, write: int, flow: _Var) -> tuple[Tensor, Tensor, set[int], int]:
    """The input x, the step count n, the arrays' nodes outside the loop and the gather (y)."""
    index = sg.index
    source = _producer(sg, _outer(sg, data_inputs(index, read)[0], "input array"), "TensorArrayV3", "input array")
    scatter = _producer(sg, _outer(sg, data_inputs(index, read)[2], "input"), "TensorArrayScatterV3", "input")
    target = _producer(sg, _outer(sg, data_inputs(index, write)[0], "output array"), "TensorArrayV3",
                       "output array")
    handle, indices, x, filled = data_inputs(index, scatter)
    if handle != (source, 0) or filled != (source, 1) or _range_of(sg, indices) is None:
        fail("the TF1 loop's input array is not the whole input, scattered in order")
    n = data_inputs(index, target)[0]
    gathers = [c for c in readers_of(index, flow.exit, 0) if index.ops[c] == "TensorArrayGatherV3"] \
        if flow.exit is not None else []
    if flow.init != (target, 1) or len(gathers) != 1:
        fail("the TF1 loop's output array is not gathered after the loop (and only that)")
    gather = gathers[0]
    g_handle, g_indices, _ = data_inputs(index, gather)
    if g_handle != (target, 0) or _range_of(sg, g_indices) != n:
        fail("the TF1 loop's output array is not gathered whole, in order")
    return x, n, {source, scatter, target, gather, g_indices[0], indices[0]}, gather


def read_tf1_loop(sg: "ScopeGraph", scope: "Scope") -> TF1Loop:
    """The TF1 loop whose frame is ``scope`` (``rnn/while``); refused (:func:`fail`)."""
    index = sg.index
    frame = set(scope.all_node_indices())
    variables = _variables(sg, frame)
    current_of = {(v.current, 0): k for k, v in enumerate(variables)}
    read, write = _one(sg, frame, "TensorArrayReadV3"), _one(sg, frame, "TensorArrayWriteV3")
    time, flow = current_of.get(data_inputs(index, read)[1]), current_of.get(data_inputs(index, write)[3])
    if time is None or flow is None or data_inputs(index, write)[1] != (variables[time].current, 0) \
            or variables[flow].next != (write, 0) or not _increment(sg, variables[time]):
        fail("the TF1 loop does not read and write its arrays at its time, advancing by one")
    counters = [k for k, v in enumerate(variables) if k != time and _increment(sg, v)]
    if len(counters) != 1:
        fail("the TF1 loop has no counter advancing by one per step")
    weights: list[Tensor] = []
    copy = _copy_through(sg, frame, variables[time], weights)
    layers, top, members = _layers(sg, scope, frame, variables, (read, 0), weights, copy)
    written: Tensor | None  # None: the copy-through gives no value for it
    written = data_inputs(index, write)[2]
    if copy is not None:
        written = _copy_output(sg, copy, written, weights)
        members |= {t[0] for t in copy.selects} | {i for i in frame if index.ops[i] == "GreaterEqual"}
    if written != top:
        fail("the TF1 loop does not write the top layer's output at each step")
    carried = {counters[0], time, flow} | {p for layer in layers for p in layer.state}
    if len(carried) != len(variables):
        fail("the TF1 loop carries more than its counter, time, output array and the cells' state")
    _check_frame(sg, frame, members, {variables[k].next[0] for k in (time, counters[0])})
    x, n, arrays, gather = _outside(sg, read, write, variables[flow])
    bounds = _bounds(sg, frame, variables, counters[0], time)
    check_bounds(sg, bounds, (("arg", 0), ("arg", 1)), n, None if copy is None else weights[copy.lengths])
    if copy is not None and copy.zeros is not None:
        check_lengths(sg, weights[copy.lengths], weights[copy.zeros])
    check_rows(sg, x, n)
    names = [f"var_{k}" for k in range(len(variables))] + [f"weight_{j}" for j in range(len(weights))]
    body = LoopBody(counters[0], time, -1, flow, names, layers, copy=copy)
    if copy is not None and copy.zeros is not None:  # positions among the loop's inputs: the variables first
        copy.lengths, copy.zeros = copy.lengths + len(variables), copy.zeros + len(variables)
    exits = {k: v.exit for k, v in enumerate(variables) if v.exit is not None}
    return TF1Loop(body, LoopPlumbing(frame | arrays, x, gather), [v.init for v in variables] + weights, exits)
