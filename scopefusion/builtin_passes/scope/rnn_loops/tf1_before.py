"""Steps a loop's layer takes before its TF1 loop (``snt.dynamic_unroll`` takes its first step
outside its ``tf.while_loop``, to learn the output's structure).

Such a loop's time starts at the number of steps taken before it, the output rows they wrote
are in the output list the loop starts from, and the loop starts from the state they left.  When
each of those steps is the loop's own cell (the same form, weights and attributes) reading the
input list's row ``k`` at step ``k``, chained from one initial state, the whole is the fused op
run over every row from that initial state: the steps before the loop become part of it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ....core.fusion.refusal import fail
from ..rnn_cells.steps import match_step_at
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


def absorb_steps_before(sg: "ScopeGraph", frame: Frame, match: Match, state: list[int],
                        rows: list[Tensor], source: int) -> tuple[list[Tensor], set[int]]:
    """The initial state of the steps written as ``rows`` before the loop (by position of the
    state ``state``) and their nodes (with their reads of the input list ``source``); refused
    (:func:`fail`) unless each is the loop's cell at its row."""
    index = sg.index
    form, op, loop_step = match
    weights = [name for name in form.inputs if name != "x" and name not in STATES[op]]
    outer = {name: frame.resolve(frame.outer(loop_step.tensors[name], "cell's weight")) for name in weights}
    current = [frame.resolve(frame.variables[p].init) for p in state]
    members: set[int] = set()
    initial = current
    for k in reversed(range(len(rows))):
        step = match_step_at(sg, _Outside(frame), form, current[0][0]) if current[0][1] == 0 else None
        if step is None or [frame.resolve(step.tensors[o]) for o in OUTS[op]] != current \
                or frame.resolve(step.tensors["out"]) != rows[k]:
            fail(f"the TF1 loop starts after {len(rows)} step(s) written before it, and step {k} is not its "
                 f"{op} cell writing row {k}")
        if any(frame.resolve(step.tensors[name]) != outer[name] for name in weights) \
                or attrs_of(sg, form, op, step) != attrs_of(sg, form, op, loop_step):
            fail(f"the step {k} taken before the TF1 loop has other weights or attributes than the loop's cell")
        if form.check is not None:
            form.check(sg, step)
        read = frame.resolve(step.tensors["x"])[0]
        row = value_of(sg, data_inputs(index, read)[1]) if index.ops[read] == "TensorListGetItem" else None
        if row is None or data_inputs(index, read)[0] != (source, 0) or row.size != 1 or int(row.reshape(-1)[0]) != k:
            fail(f"the step {k} taken before the TF1 loop does not read row {k} of the loop's input list")
        members |= step.members | {read}
        current = [frame.resolve(step.tensors[s]) for s in STATES[op]]
        initial = [step.tensors[s] for s in STATES[op]]
    return initial, members
