"""The cells' steps in a TF1 loop's frame, by the cell passes' own forms.

Every form a cell pass knows (``tf.compat.v1`` rnn_cell, Keras's LSTM and GRU cells, Sonnet's,
each gate order its dataflow reveals) is matched among the frame's nodes.  A form whose step is
the fused cell itself gives the layer its weights as they are; a form that puts its weights in the
fused cell's layout with an inner graph (a Keras kernel and recurrent kernel stacked, its gate
columns reordered) writes that inner graph once more here, against a stand-in for the fusion
result (:class:`_Layout`): its nodes become the layer's weight preparation, run once by the fused
loop, and the fused cell node it writes says which tensors are the cell's weights.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....core.fusion.fused_ops import OPTIONAL_INPUTS_ATTR
from ....core.fusion.refusal import fail
from ..rnn_cells.gru import gru_attrs
from ..rnn_cells.lstm import lstm_attrs
from ..rnn_cells.passes import ScopeBasicLSTMCellPass, ScopeGRUCellPass
from ..rnn_cells.steps import CellForm, CellStep, form_for_root, match_steps
from .body import CELLS, LayoutNode, LoopLayer
from .copy_through import CopyThrough
from .tf1_frame import Frame

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

Tensor = tuple[int, int]
#: the forms of the cell passes, with the fused op each gives
_FORMS = tuple((form, ScopeBasicLSTMCellPass.op_def.name) for form in ScopeBasicLSTMCellPass.forms) \
    + tuple((form, ScopeGRUCellPass.op_def.name) for form in ScopeGRUCellPass.forms)
STATES = {"BasicLSTMCell": ("h", "c"), "GRUCell": ("h",)}
OUTS = {"BasicLSTMCell": ("out", "c_out"), "GRUCell": ("out",)}


class _Arg(str):
    """An input of the loop op (``weight_k``), as the stand-in gives a form's fused inputs."""


class _Layout:
    """Stands in for a fusion result while a form writes one step's inner graph: records the nodes
    (renamed under ``prefix``) and the fused cell node's inputs and attributes."""

    def __init__(self, prefix: str, inputs: list[str]) -> None:
        self.prefix, self.inputs = prefix, inputs
        self.nodes: list[LayoutNode] = []
        self.cell: tuple[list[str], dict[str, Any]] | None = None

    def fused_input(self, k: int) -> _Arg:
        return _Arg(self.inputs[k])

    def _ref(self, ref: Any) -> str:
        return str(ref) if isinstance(ref, _Arg) else f"{self.prefix}{ref}"

    def add_inner_node(self, name: str, op: str, inputs: Any = (), attrs: dict[str, Any] | None = None) -> None:
        if op in CELLS:
            self.cell = ([self._ref(i) for i in inputs], dict(attrs or {}))
            return
        self.nodes.append(LayoutNode(f"{self.prefix}{name}", op, [self._ref(i) for i in inputs], dict(attrs or {})))

    def set_inner_output(self, index: int, tensor: str) -> None:
        """The step's outputs are the loop op's own."""


#: a matched step: its form, the fused cell op and the step
Match = tuple[CellForm, str, CellStep]


def _steps(sg: "ScopeGraph", frame: Frame) -> list[Match]:
    """Every step of a cell form among the frame's nodes, each root once (the first form wins)."""
    inside = frozenset(frame.nodes)
    index = sg.index
    variants: dict[CellForm, str] = {}
    for form, op in _FORMS:
        roots = [i for i in inside if index.ops[i] in form.roots]
        for root in roots:
            for variant in form_for_root(form, sg, root):
                variants.setdefault(variant, op)
        if form.gate_orders is None or form.ordered is None:
            variants.setdefault(form, op)
    found: dict[int, Match] = {}
    for form, op in variants.items():
        for step in match_steps(sg, inside, form):
            found.setdefault(step.nodes["root"], (form, op, step))
    return list(found.values())


def attrs_of(sg: "ScopeGraph", form: CellForm, op: str, step: CellStep) -> dict[str, Any]:
    ops = sg.index.ops
    if op == "BasicLSTMCell":
        attrs = lstm_attrs(step.consts, (ops[step.nodes["act_c"]], ops[step.nodes["act_j"]]))
    else:
        attrs = gru_attrs(ops[step.nodes["act"]])
    return {**attrs, **form.attrs}


def _layer(sg: "ScopeGraph", frame: Frame, n: int, form: CellForm, op: str, step: CellStep,
           weights: list[Tensor], state: list[int]) -> LoopLayer:
    """The layer of ``step``: its weights join ``weights`` (the loop op's inputs ``weight_k``)."""
    if form.check is not None:
        form.check(sg, step)
    attrs = attrs_of(sg, form, op, step)
    T = sg.index.nodes[step.nodes["root"]].attr["T"].type
    names = []
    for name in form.inputs:
        if name == "x" or name in STATES[op]:
            names.append("")
            continue
        weights.append(frame.outer(step.tensors[name], "cell's weight"))
        names.append(f"weight_{len(weights) - 1}")
    if form.inner_graph is None:
        by_input = dict(zip(form.inputs, names, strict=True))
        plain = [by_input[name] for name in form.inputs if by_input[name] and name not in form.optional]
        return LoopLayer(op, {**attrs, "T": T}, plain, state, {name: by_input[name] for name in form.optional})
    layout = _Layout(f"layer_{n}_", names)
    form.inner_graph(layout, attrs, T)
    if layout.cell is None:
        fail(f"the {form.library} form writes no {op} node")
    inputs, cell_attrs = layout.cell
    required = 1 + len(STATES[op]) + len(CELLS[op][1])
    listed = list(cell_attrs.pop(OPTIONAL_INPUTS_ATTR, []))
    return LoopLayer(op, {**cell_attrs, "T": T}, inputs[1 + len(STATES[op]):required], state,
                     dict(zip(listed, inputs[required:], strict=True)), layout.nodes)


def read_layers(sg: "ScopeGraph", scope: "Scope", frame: Frame, start: Tensor, weights: list[Tensor],
                copy: CopyThrough[Tensor] | None) -> tuple[list[LoopLayer], Tensor, set[int], list[Match]]:
    """The cells' steps chained from the step's input ``start``; their weights join ``weights``;
    also the top layer's output, the steps' nodes and each layer's match."""
    found = _steps(sg, frame)
    if not found:
        reason = next((r for r in (form.explain(scope) for form, _ in _FORMS) if r), None)
        fail(reason or "no BasicLSTMCell or GRUCell step in the TF1 loop")
    layers: list[LoopLayer] = []
    matches: list[Match] = []
    members: set[int] = set()
    current = frame.resolve(start)
    while True:
        match = _next_layer(frame, copy, [f for f in found if frame.resolve(f[2].tensors["x"]) == current])
        if match is None:
            break
        form, op, step = match
        reason = form.explain(scope)
        if reason:
            fail(reason)
        state = [frame.var(step.tensors[s]) for s in STATES[op]]
        if any(p is None or _carried(frame, copy, p) != frame.resolve(step.tensors[o])
               for p, o in zip(state, OUTS[op], strict=True)):
            fail(f"the TF1 loop does not carry the {op} step's state into its next step"
                 + (" (through its sequence_length's Select)" if copy is not None else ""))
        layers.append(_layer(sg, frame, len(layers), form, op, step, weights, [p for p in state if p is not None]))
        members |= step.members
        matches.append(match)
        current = frame.resolve(step.tensors["out"])
    if not layers or any(f[2].members.isdisjoint(members) for f in found):
        fail("the cells' steps in the TF1 loop are no chain from the step's input")
    return layers, current, members, matches


def _next_layer(frame: Frame, copy: CopyThrough[Tensor] | None, candidates: list[Match]) -> Match | None:
    """Of the steps reading the layer below, the one whose state the loop carries (the larger when
    several are: an LSTM's output before its projection is a step too, and a step whose
    "projection" is the next layer's input product carries no state of its own); else the first."""
    def carried(match: Match) -> bool:
        _, op, step = match
        for s, o in zip(STATES[op], OUTS[op], strict=True):
            p = frame.var(step.tensors[s])
            if p is None:
                return False
            var = frame.variables[p]
            pair = copy.selects.get(var.next) if copy is not None else (var.current, var.next)
            if pair is None or pair[0] != var.current or pair[1] != frame.resolve(step.tensors[o]):
                return False
        return True

    good = [m for m in candidates if carried(m)]
    if good:
        return max(good, key=lambda m: len(m[2].members))
    return candidates[0] if candidates else None


def _carried(frame: Frame, copy: CopyThrough[Tensor] | None, position: int) -> Tensor | None:
    """What the loop carries into variable ``position``'s next value, seen through the copy-through."""
    var = frame.variables[position]
    return var.next if copy is None else copy.new_of(var.next, var.current)
