"""Steps a loop's layer takes before its TF1 loop (``snt.dynamic_unroll`` takes its first step
outside its ``tf.while_loop``, to learn the output's structure).

Such a loop's time starts at the number of steps taken before it, the output rows they wrote
are in the output list the loop starts from, and the loop starts from the state they left.  When
each of those steps is the loop's own cell of its layer (the same form, weights and attributes),
the bottom layer's step ``k`` reading the input list's row ``k``, each upper layer's the output of
the layer below, the top layer's writing row ``k``, chained from one initial state per layer, the
whole is the fused ops run over every row from those initial states: the steps before the loop
become part of them (``snt.dynamic_unroll`` of an ``snt.DeepRNN`` too).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ....core.fusion.refusal import fail
from ..rnn_cells.steps import CellStep, match_step_at
from .plumbing import Tensor, data_inputs, value_of
from .tf1_cells import OUTS, STATES, Match, attrs_of
from .tf1_frame import Frame

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import ScopeGraph


class _Outside:
    """The nodes outside the frame."""

    def __init__(self, frame: Frame) -> None:
        self.frame = frame.nodes

    def __contains__(self, node: object) -> bool:
        return node not in self.frame


def absorb_steps_before(sg: "ScopeGraph", frame: Frame, matches: list[Match], states: list[list[int]],
                        rows: list[Tensor], source: int) -> tuple[list[list[Tensor]], set[int]]:
    """Each layer's initial state before the steps written as ``rows`` before the loop (``states``:
    the positions of each layer's state) and their nodes (with their reads of the input list
    ``source``); refused (:func:`fail`) unless step ``k`` of each layer is the loop's cell of that
    layer, reading row ``k`` (the bottom layer) or the layer below's output, the top one writing row ``k``."""
    index = sg.index
    current = [[frame.resolve(frame.variables[p].init) for p in state] for state in states]
    initial: list[list[Tensor]] = [list(c) for c in current]
    members: set[int] = set()
    for k in reversed(range(len(rows))):
        steps = [_step_before(sg, frame, match, current[n], k) for n, match in enumerate(matches)]
        if frame.resolve(steps[-1].tensors["out"]) != rows[k]:
            fail(f"the step {k} taken before the TF1 loop does not write row {k} of its output")
        for n, (step, (_, op, _)) in enumerate(zip(steps, matches, strict=True)):
            x = frame.resolve(step.tensors["x"])
            if n:
                if x != frame.resolve(steps[n - 1].tensors["out"]):
                    fail(f"layer {n}'s step {k} taken before the TF1 loop does not read the output of the layer below")
            else:
                row = value_of(sg, data_inputs(index, x[0])[1]) if index.ops[x[0]] == "TensorListGetItem" else None
                if row is None or data_inputs(index, x[0])[0] != (source, 0) or row.size != 1 \
                        or int(row.reshape(-1)[0]) != k:
                    fail(f"the step {k} taken before the TF1 loop does not read row {k} of the loop's input list")
                members.add(x[0])
            members |= step.members
            current[n] = [frame.resolve(step.tensors[s]) for s in STATES[op]]
            initial[n] = [step.tensors[s] for s in STATES[op]]
    return initial, members


def _step_before(sg: "ScopeGraph", frame: Frame, match: Match, state: list[Tensor], k: int) -> CellStep:
    """The step ``k`` taken before the loop that leaves a layer in ``state``: the loop's own cell
    (form, weights, attributes) of that layer; refused (:func:`fail`)."""
    form, op, loop_step = match
    step = match_step_at(sg, _Outside(frame), form, state[0][0]) if state[0][1] == 0 else None
    if step is None or [frame.resolve(step.tensors[o]) for o in OUTS[op]] != state:
        fail(f"the TF1 loop starts after step(s) taken before it, and step {k} is not its {op} cell")
    weights = [name for name in form.inputs if name != "x" and name not in STATES[op]]
    if any(frame.resolve(step.tensors[name]) != frame.resolve(frame.outer(loop_step.tensors[name], "cell's weight"))
           for name in weights) or attrs_of(sg, form, op, step) != attrs_of(sg, form, op, loop_step):
        fail(f"the step {k} taken before the TF1 loop has other weights or attributes than the loop's cell")
    if form.check is not None:
        form.check(sg, step)
    return step
