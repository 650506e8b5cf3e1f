"""A TF1 while loop (control flow v1) running recurrent cells, read by structure.

``tf.compat.v1.nn.dynamic_rnn`` under control flow v1, a tf_keras ``LSTM`` / ``GRU`` built in a
TF1 graph (``backend.rnn``) and a functional ``While`` lowered to a TF1 frame (``snt.dynamic_unroll``
once frozen) all write the same loop, each in its own spelling::

    x_t   = read(inputs, time)             TensorArrayReadV3, or TensorListGetItem of a list
    h, c  = the cells' steps               any form of the cell passes, one per layer
    out   = write(outputs, time, h)        TensorArrayWriteV3, or TensorListSetItem
    time + 1, counter + 1                  the counter optional (tf_keras has none)
    while time < m [and counter < n]

The loop variables are read through :mod:`.tf1_frame` (Identity chains looked through, unchanged
variables seen as the tensors they hold), the cells' steps through :mod:`.tf1_cells` (every form
the cell passes know).  The loop may start after steps taken before it (``snt.dynamic_unroll``
takes its first step outside): its time then starts at the number of rows written to the output
before the loop, and when those steps are the loop's own cell (:mod:`.tf1_before`) they become
part of the fused op, which runs every row from their initial state.  The loop runs once per
remaining row.  A variable the loop only overwrites with the top layer's output (Sonnet's last
output) is that layer's final output.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ....core.fusion.refusal import fail
from ....core.graph.vocabulary import ADD_OPS
from .body import LoopBody, LoopLayer
from .copy_through import COPY_OPS, CopyThrough, one_compare, select_nodes
from .plumbing import (LoopPlumbing, Tensor, check_bounds, check_lengths, check_rows, data_inputs, readers_of,
                       value_of)
from .tf1_cells import read_layers
from .tf1_before import absorb_steps_before
from .tf1_frame import Frame

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

_MACHINERY = frozenset({"Enter", "Merge", "Switch", "Identity", "NextIteration", "Exit", "LoopCond", "Less",
                        "LogicalAnd", "AddV2", "Add", "Const", "NoOp", "TensorArrayReadV3", "TensorArrayWriteV3",
                        "TensorListGetItem", "TensorListSetItem"})
_READS = ("TensorArrayReadV3", "TensorListGetItem")
_WRITES = ("TensorArrayWriteV3", "TensorListSetItem")


@dataclass
class TF1Loop:
    """What the pass needs of a TF1 loop: its body's roles, plumbing, inputs and final values."""

    body: LoopBody
    plumbing: LoopPlumbing
    ins: list[Tensor]
    #: position -> the Exit node giving the variable's final value
    exits: dict[int, int]
    #: position of a variable the loop only overwrites -> the variable whose final value it has
    same_as: dict[int, int]


def _range_of(sg: "ScopeGraph", tensor: Tensor) -> Tensor | None:
    """``n`` of a ``Range(0, n, 1)``, else None."""
    index = sg.index
    if index.ops[tensor[0]] != "Range":
        return None
    start, limit, delta = data_inputs(index, tensor[0])
    values = [value_of(sg, t) for t in (start, delta)]
    return limit if all(v is not None and v.size == 1 for v in values) and [int(v) for v in values] == [0, 1] \
        else None


def _copy_through(frame: Frame, time: int, weights: list[Tensor]) -> CopyThrough[Tensor] | None:
    """The frame's sequence_length copy-through (its lengths joining ``weights``), or None."""
    index = frame.index
    ops = {(i, 0): index.ops[i] for i in sorted(frame.nodes) if index.ops[i] in COPY_OPS}
    if not ops:
        return None
    compare = one_compare(ops)
    current, lengths = data_inputs(index, compare[0])
    if frame.var(current) != time:
        fail(f"GreaterEqual {index.names[compare[0]]!r} does not compare the loop's time with a tensor "
             "brought in by an Enter (dynamic_rnn's time >= sequence_length)")
    weights.append(frame.outer(lengths, "sequence length"))
    selects = select_nodes({t: op for t, op in ops.items() if op != "GreaterEqual"},
                           lambda t: [frame.resolve(i) for i in data_inputs(index, t[0])], compare,
                           lambda t: index.names[t[0]])
    return CopyThrough(len(weights) - 1, selects)


def _copy_output(frame: Frame, copy: CopyThrough[Tensor], written: Tensor, weights: list[Tensor]) -> Tensor | None:
    """The value the step writes, seen through the copy-through (its zeros joining ``weights``)."""
    kept = copy.selects.get(written, ((-1, 0), (-1, 0)))[0]
    if kept[0] < 0:
        fail("the step's output past a sequence's end is not brought in by an Enter (dynamic_rnn's zeros)")
    carried = frame.var(kept)
    if carried is not None and not frame.variables[carried].invariant:
        fail(f"past a sequence's end the step's output is the loop's previous output "
             f"({frame.index.names[frame.variables[carried].merge]!r}, a value the loop carries: the sequence's "
             f"last output repeated, as snt.dynamic_unroll writes it), where the fused op's seq_length writes zeros")
    weights.append(frame.outer(kept, "zero output"))
    copy.zeros = len(weights) - 1
    new = copy.new_of(written, kept)
    copy.check_all_used(lambda t: frame.index.names[t[0]])
    return new


def _bounds(frame: Frame, counter: int | None, time: int) -> dict[int, Tensor]:
    """The tensors ``time < m [and counter < n]`` compare with, by variable."""
    index = frame.index
    cond = frame.resolve(data_inputs(index, frame.one(("LoopCond",)))[0])
    lesses = [frame.resolve(t) for t in data_inputs(index, cond[0])] if index.ops[cond[0]] == "LogicalAnd" \
        else [cond]
    bounds: dict[int, Tensor] = {}
    for less in lesses:
        ins = data_inputs(index, less[0]) if index.ops[less[0]] == "Less" else []
        k = frame.merged(ins[0]) if len(ins) == 2 else None
        if k is None or k not in (counter, time) or k in bounds:
            fail("the TF1 loop's condition is not time < m, nor counter < n and time < m")
        bound = frame.resolve(ins[1])
        bounds[k] = bound if index.ops[bound[0]] == "Const" else frame.outer(ins[1], "bound")
    if time not in bounds:
        fail("the TF1 loop's condition does not bound its time")
    return bounds


def _check_frame(frame: Frame, members: set[int], increments: set[int]) -> None:
    index = frame.index
    extra = [index.names[i] for i in sorted(frame.nodes - members)
             if (index.ops[i] not in _MACHINERY or (index.ops[i] in ADD_OPS and i not in increments))
             and frame.sg.const_value_of(i) is None]
    if extra:
        fail(f"the TF1 loop does more than its cells and plumbing: {', '.join(map(repr, extra[:3]))}")


def _written_before(frame: Frame, init: Tensor) -> tuple[Tensor, list[Tensor], set[int]]:
    """The output array or list the loop starts from, and the rows written to it before the loop
    (at 0, 1, ... in order): (the empty array or list, the rows' values, the writes' nodes)."""
    index, rows, nodes = frame.index, [], set()
    while index.ops[init[0]] in _WRITES:
        ins = data_inputs(index, init[0])
        at = value_of(frame.sg, ins[1])
        if at is None or at.size != 1:
            fail(f"the TF1 loop's output is written at a position the graph does not fix before the loop "
                 f"({index.names[init[0]]!r})")
        rows.append((int(at.reshape(-1)[0]), ins[2]))
        nodes.add(init[0])
        init = ins[3] if index.ops[init[0]] == "TensorArrayWriteV3" else ins[0]
    rows.reverse()
    if [at for at, _ in rows] != list(range(len(rows))):
        fail("the rows written to the TF1 loop's output before it are not its first rows in order")
    return init, [t for _, t in rows], nodes


def _outside(frame: Frame, read: int, write: int, flow: int) -> tuple[Tensor, Tensor, set[int], int, list[Tensor]]:
    """The input x, the row count n, the arrays' nodes outside the loop, the stack after it (y)
    and the rows written before it."""
    index, sg = frame.index, frame.sg
    var = frame.variables[flow]
    target, written, writes = _written_before(frame, frame.resolve(var.init))
    exits = readers_of(index, var.exit, 0) if var.exit is not None else []
    if index.ops[read] == "TensorListGetItem":
        source = frame.outer(data_inputs(index, read)[0], "input list")
        if index.ops[source[0]] != "TensorListFromTensor" or index.ops[target[0]] != "TensorListReserve":
            fail("the TF1 loop's lists are not its input, made by TensorListFromTensor, and a reserved output")
        x, n = data_inputs(index, source[0])[0], data_inputs(index, target[0])[1]
        stacks = [c for c in exits if index.ops[c] == "TensorListStack"]
        if len(exits) != 1 or len(stacks) != 1:
            fail("the TF1 loop's output list is not stacked after the loop (and only that)")
        return x, n, {source[0], target[0], stacks[0]} | writes, stacks[0], written
    array = frame.outer(data_inputs(index, read)[0], "input array")[0]
    scatter = frame.outer(data_inputs(index, read)[2], "input")[0]
    if index.ops[array] != "TensorArrayV3" or index.ops[scatter] != "TensorArrayScatterV3" \
            or index.ops[target[0]] != "TensorArrayV3" or target[1] != 1:
        fail("the TF1 loop's arrays are not its input, scattered into a TensorArrayV3, and an output TensorArrayV3")
    handle, indices, x, filled = data_inputs(index, scatter)
    if handle != (array, 0) or filled != (array, 1) or _range_of(sg, indices) is None:
        fail("the TF1 loop's input array is not the whole input, scattered in order")
    n = data_inputs(index, target[0])[0]
    gathers = [c for c in exits if index.ops[c] == "TensorArrayGatherV3"]
    if len(gathers) != 1 or written:
        fail("the TF1 loop's output array is not gathered after the loop (and only that)")
    g_handle, g_indices, _ = data_inputs(index, gathers[0])
    if g_handle != (target[0], 0) or _range_of(sg, g_indices) != n:
        fail("the TF1 loop's output array is not gathered whole, in order")
    return x, n, {array, scatter, target[0], gathers[0], g_indices[0], indices[0]}, gathers[0], written


def _check_steps(frame: Frame, bounds: dict[int, Tensor], counter: int | None, time: int, n: Tensor,
                 lengths: Tensor | None, skipped: int) -> None:
    """The loop runs once per row of the output it has not written before (or, with the
    sequences' lengths, until every sequence has ended); refused (:func:`fail`)."""
    variables = frame.variables
    starts = [frame.value(variables[k].init) for k in (time, counter) if k is not None]
    if any(v is None or v.size != 1 for v in starts) or int(starts[0]) != skipped or \
            (len(starts) > 1 and int(starts[1]) != 0):
        fail(f"the TF1 loop's time does not start at the {skipped} row(s) written before it, or its counter "
             "not at 0")
    if skipped == 0:
        if counter is not None and counter in bounds:
            check_bounds(frame.sg, [bounds[counter], bounds[time]], (("arg", 0), ("arg", 1)), n, lengths)
        else:  # a counter with no bound (or none): the time's bound alone says how often the loop runs
            check_bounds(frame.sg, [bounds[time]], (None, ("arg", 0)), n, lengths)
        return
    values = [value_of(frame.sg, bounds[k]) for k in bounds]
    steps = value_of(frame.sg, n)
    if any(v is None or v.size != 1 for v in values + [steps]) or int(steps) <= skipped:
        fail(f"the TF1 loop runs a number of steps the graph does not fix after the {skipped} taken before it")
    runs = min(int(v) - (skipped if k == time else 0) for k, v in zip(bounds, values, strict=True))
    if runs != int(steps) - skipped:
        fail(f"the TF1 loop does not run once per row of its output after the {skipped} written before it")


def _overwritten(frame: Frame, layers: list[LoopLayer], top: Tensor, carried: set[int]) -> dict[int, int]:
    """The variables the loop only overwrites with the top layer's output, each starting from that
    layer's initial output: position -> the layer's output variable."""
    found = {}
    h = layers[-1].state[0]
    for k, var in enumerate(frame.variables):
        if k in carried or var.read or var.invariant:
            continue
        if var.next != top or frame.resolve(var.init) != frame.resolve(frame.variables[h].init):
            fail(f"the TF1 loop carries {frame.index.names[var.merge]!r}, which is no counter, time, output, "
                 "cells' state nor unchanged value")
        found[k] = h
    return found


def read_tf1_loop(sg: "ScopeGraph", scope: "Scope") -> TF1Loop:
    """The TF1 loop whose frame is ``scope`` (``rnn/while``); refused (:func:`fail`)."""
    index = sg.index
    frame = Frame(sg, scope)
    variables = frame.variables
    read, write = frame.one(_READS), frame.one(_WRITES)
    w_ins = data_inputs(index, write)
    time = frame.var(data_inputs(index, read)[1])
    flow = frame.var(w_ins[3] if index.ops[write] == "TensorArrayWriteV3" else w_ins[0])
    if time is None or flow is None or frame.var(w_ins[1]) != time or variables[flow].next != (write, 0) \
            or not frame.increments(time):
        fail("the TF1 loop does not read and write its arrays at its time, advancing by one")
    counters = [k for k, v in enumerate(variables) if k != time and not v.invariant and frame.increments(k)]
    if len(counters) > 1:
        fail("the TF1 loop has more than one counter advancing by one per step besides its time")
    counter = counters[0] if counters else None
    weights: list[Tensor] = []
    copy = _copy_through(frame, time, weights)
    layers, top, members, matches = read_layers(sg, scope, frame, (read, 0), weights, copy)
    written: Tensor | None  # None: the copy-through gives no value for it
    written = frame.resolve(w_ins[2])
    if copy is not None:
        written = _copy_output(frame, copy, written, weights)
        members |= {t[0] for t in copy.selects} | {i for i in frame.nodes if index.ops[i] == "GreaterEqual"}
    if written != top:
        fail("the TF1 loop does not write the top layer's output at each step")
    carried = {time, flow} | {p for layer in layers for p in layer.state} | set(counters)
    same_as = _overwritten(frame, layers, top, carried)
    increments = {variables[k].next[0] for k in (time, *counters)}
    _check_frame(frame, members, increments)
    x, n, arrays, stack, before = _outside(frame, read, write, flow)
    lengths = None if copy is None else weights[copy.lengths]
    _check_steps(frame, _bounds(frame, counter, time), counter, time, n, lengths, len(before))
    ins = [v.init for v in variables] + weights
    if before:
        if copy is not None:
            fail("the TF1 loop starts after steps taken before it and has a sequence_length: not fused")
        initial, taken = absorb_steps_before(sg, frame, matches, [layer.state for layer in layers], before,
                                             frame.outer(data_inputs(index, read)[0], "input list")[0])
        arrays |= taken
        for layer, tensors in zip(layers, initial, strict=True):
            for p, tensor in zip(layer.state, tensors, strict=True):
                ins[p] = tensor
    if copy is not None and copy.zeros is not None:
        check_lengths(sg, weights[copy.lengths], weights[copy.zeros])
    check_rows(sg, x, n)
    names = [f"var_{k}" for k in range(len(variables))] + [f"weight_{j}" for j in range(len(weights))]
    body = LoopBody(-1 if counter is None else counter, time, -1, flow, names, layers, copy=copy)
    if copy is not None and copy.zeros is not None:  # positions among the loop's inputs: the variables first
        copy.lengths, copy.zeros = copy.lengths + len(variables), copy.zeros + len(variables)
    exits = {k: v.exit for k, v in enumerate(variables) if v.exit is not None}
    members = frame.nodes | arrays
    read_outside = [index.names[c] for a in arrays if a != stack for c, _, _ in index.consumers[a] if c not in members]
    if read_outside:
        fail(f"the TF1 loop's input or output, or a step taken before it, is read outside the loop too "
             f"({read_outside[0]!r})")
    return TF1Loop(body, LoopPlumbing(members, x, stack), ins, exits, same_as)
