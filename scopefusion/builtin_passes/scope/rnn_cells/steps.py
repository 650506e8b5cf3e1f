"""Finding the time steps of a recurrent cell in its scope.

``tf.compat.v1.nn.static_rnn`` calls the cell once per time step under one name scope, so the
scope ``rnn/basic_lstm_cell`` holds every step (``MatMul``, ``MatMul_1``, ...).  A
:class:`CellForm` says what one step computes, as an op-pattern expression whose root is the
step's output; :func:`find_steps` matches it at every candidate root in the scope and returns
the steps in time order, or the reason the scope is not a chain of such steps.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Container, Mapping

from ....core.fusion.refusal import Refused, fail
from ....core.graph.matching import MatchFailure, PatternMatcher
from ....core.graph.vocabulary import CONTROL

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

Tensor = tuple[int, int]

#: Nodes that hold or read weights rather than compute a step (left in place, never a reason
#: to refuse).
STORAGE_OPS = frozenset({"Const", "Identity", "ReadVariableOp", "VarHandleOp", "VariableV2", "Snapshot"})


#: Ops that may feed a step from outside it without belonging to one: they route or convert an input
_INPUT_ROUTES = frozenset({"Switch", "Cast"})


@dataclass(frozen=True)
class CellForm:
    """What one step of a cell computes.

    ``defs`` are the op-pattern definitions (``"$out"`` is the step's first output), ``roots``
    the op types a step's output node may have, ``inputs`` and ``outputs`` the bound tensors
    that are the fused op's inputs and outputs in order, ``state`` the input fed by the previous
    step's output 0, and ``explain`` names cell options the fused op cannot express (None when
    it sees none).
    """

    name: str
    defs: Callable[..., dict[str, Any]]  # () -> definitions (an ordered form binds its gate order)
    roots: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    state: str
    explain: Callable[["Scope"], str | None]
    #: whether the scope looks written by this form's library (its reasons are the ones reported)
    wants: Callable[["Scope"], bool] = lambda scope: True
    #: the library whose cell this form is, for descriptions
    library: str = ""
    #: writes the result as an inner graph ``(result, attrs, T)`` when the fused op needs the
    #: step's weights in another layout; None: the step is the fused op itself
    inner_graph: Callable[..., None] | None = None
    #: ops of a loop around the step that share its scope and may feed or read it (a loop body's
    #: read of the step's input and write of its output), never a reason to refuse
    plumbing: frozenset[str] = frozenset()
    #: attributes of the fused op this form gives whatever the step's own (a convention it follows)
    attrs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    #: checks what the pattern cannot (e.g. the columns a slice takes) on a matched step ``(graph,
    #: step)``; refuses (``fail``) with the reason
    check: Callable[["ScopeGraph", "CellStep"], None] | None = None
    #: the gate orders a candidate output node reveals ``(graph, node) -> orders`` (None: the form's
    #: order is fixed), and the form for one of them ``(form, order) -> form``
    gate_orders: Callable[[Any, int], list[Any]] | None = None
    ordered: Callable[["CellForm", Any], "CellForm"] | None = None
    #: the order this form matches (None: its own)
    order: Any = None
    #: the bound tensors the step adds to its gates as biases, which must be vectors
    vectors: tuple[str, ...] = ()
    #: the last of ``inputs`` that are optional inputs of the fused op (listed in its ``optional_inputs``)
    optional: tuple[str, ...] = ()


@dataclass
class CellStep:
    """One matched step: bound tensors, labelled nodes, constants and member nodes."""

    tensors: dict[str, Tensor]
    nodes: dict[str, int]
    consts: dict[str, Any]
    members: frozenset[int]
    time: int = 0
    after: list["CellStep"] = field(default_factory=list, repr=False)
    #: which bound tensor each data input slot ``(node, slot)`` of the step reads, as the form declares
    reads: dict[Tensor, str] = field(default_factory=dict, repr=False)


def find_steps_of_any(scope: "Scope", forms: "tuple[CellForm, ...]") -> tuple[CellForm, list[CellStep]]:
    """The steps of the first of ``forms`` that finds any; refused (:func:`fail`) with the
    reason of the first form that wants the scope (or of the first form), preferring one that
    found steps (and refused them) to one that found none."""
    reasons: list[tuple[CellForm, str]] = []
    for form in (v for f in forms for v in _variants(scope, f)):
        try:
            return form, find_steps(scope, form)
        except Refused as why:
            reasons.append((form, why.reason))
    wanted = [r for f, r in reasons if f.wants(scope)] or [reasons[0][1]]
    # a form that found steps and refused them says more than one that found none
    found = [r for r in wanted if not r.startswith("no ")]
    fail((found or wanted)[0])


def _variants(scope: "Scope", form: CellForm) -> list[CellForm]:
    """``form`` in each gate order its candidate output nodes in ``scope`` reveal (``form`` itself
    when its order is fixed or none is revealed)."""
    if form.gate_orders is None or form.ordered is None:
        return [form]
    sg = scope.graph
    index = sg.index
    orders: dict[Any, None] = {}
    for i in scope.all_node_indices():
        if index.ops[i] in form.roots:
            orders.update(dict.fromkeys(form.gate_orders(sg, i)))
    return [form.ordered(form, order) for order in orders] or [form]


def form_for_root(form: CellForm, sg: "ScopeGraph", root: int) -> list[CellForm]:
    """``form`` in each gate order the node ``root`` reveals (``form`` itself when its order is
    fixed); empty when the node reveals none."""
    if form.gate_orders is None or form.ordered is None:
        return [form]
    return [form.ordered(form, order) for order in form.gate_orders(sg, root)]


def find_steps(scope: "Scope", form: CellForm) -> list[CellStep]:
    """The steps of ``form`` in ``scope``, in time order; refused (:func:`fail`) when there are none."""
    reason = _in_loop(scope) or form.explain(scope)
    if reason:
        fail(reason)
    sg = scope.graph
    inside = frozenset(scope.all_node_indices())
    steps, best = _match_roots(sg, inside, form)
    if not steps:
        fail(f"no {form.name} step in the scope: {best}" if best else f"no {form.name} step in the scope")
    _check_vectors(sg, steps, form)
    _check_disjoint(sg, steps)
    _check_leftovers(sg, inside, steps, form)
    _order(steps, form)
    return sorted(steps, key=lambda s: (s.time, s.nodes["root"]))


def _check_vectors(sg: "ScopeGraph", steps: list[CellStep], form: CellForm) -> None:
    """What a step adds to its gates as a bias (``BiasAdd`` or an add, which the forms take alike)
    must be a vector: an add of anything else (a matrix, another product) is no bias."""
    for step in steps:
        for name in form.vectors:
            shape = sg.static_shape(step.tensors[name])
            if shape is not None and len(shape) != 1:
                fail(f"the {form.name} step's bias {sg.index.names[step.tensors[name][0]]!r} has shape "
                     f"{list(shape)}, not a vector: what the gates add is no bias")


def match_steps(sg: "ScopeGraph", inside: frozenset[int], form: CellForm) -> list[CellStep]:
    """Every step of ``form`` among the nodes ``inside`` (whatever frame they run in), unordered."""
    return _match_roots(sg, inside, form)[0]


def match_step_at(sg: "ScopeGraph", inside: Container[int], form: CellForm, root: int) -> CellStep | None:
    """The step of ``form`` whose output node is ``root``, among the nodes ``inside``, or None."""
    matcher = PatternMatcher(sg, inside=inside, defs=form.defs())
    try:
        matcher.match((root, 0), "$out")
    except MatchFailure:
        return None
    return CellStep(dict(matcher.tensors), {**matcher.nodes, "root": root}, dict(matcher.consts),
                    frozenset(matcher.members), reads=dict(matcher.reads))


def _in_loop(scope: "Scope") -> str | None:
    """A TF1 while loop's body (``dynamic_rnn``) brings the weights in through Enter nodes."""
    enter = scope.nodes_by_op("Enter")
    if enter:
        return (f"the cell runs inside a TF1 while loop (e.g. {enter[0].name!r}): the loop is fused as a "
                f"whole or not at all, never one step inside it")
    return None


def _match_roots(sg: "ScopeGraph", inside: frozenset[int], form: CellForm) -> tuple[list[CellStep], str]:
    matcher = PatternMatcher(sg, inside=inside, defs=form.defs())
    index = sg.index
    steps: list[CellStep] = []
    best: tuple[int, str] = (-1, "")
    for i in sorted(inside):
        if index.ops[i] not in form.roots:
            continue
        matcher.reset()
        try:
            matcher.match((i, 0), "$out")
        except MatchFailure as why:
            if why.progress > best[0]:
                best = (why.progress, f"at {index.names[i]!r}: {why}")
            continue
        nodes = dict(matcher.nodes)
        nodes["root"] = i
        steps.append(CellStep(dict(matcher.tensors), nodes, dict(matcher.consts), frozenset(matcher.members),
                              reads=dict(matcher.reads)))
    return steps, best[1]


def _check_disjoint(sg: "ScopeGraph", steps: list[CellStep]) -> None:
    owner: dict[int, int] = {}
    for k, step in enumerate(steps):
        for i in step.members:
            if sg.const_value_of(i) is not None:
                continue
            if owner.setdefault(i, k) != k:
                fail(f"two steps share the node {sg.index.names[i]!r}")


def _check_leftovers(sg: "ScopeGraph", inside: frozenset[int], steps: list[CellStep], form: CellForm) -> None:
    """Every computing node of the scope that reads a step's result or feeds a step must belong
    to a step: anything else changes what the cell computes (a clip, a projection, a state split).
    A Switch that only routes a step's input into a TF1 cond branch (``static_rnn`` with
    ``sequence_length``), or a Cast that only brings an input into the step's dtype (a mixed
    precision layer's weights, which a loop body receives as float32 arguments), changes nothing
    the step computes: both read no step."""
    index = sg.index
    members = frozenset().union(*(s.members for s in steps))
    touching = []
    for i in sorted(inside - members):
        if index.ops[i] in STORAGE_OPS or index.ops[i] in form.plumbing or sg.const_value_of(i) is not None:
            continue
        reads = any(t[0] in members for t in index.inputs[i] if t[1] != CONTROL)
        feeds = any(c in members for c, _, _ in index.consumers[i])
        if reads or (feeds and index.ops[i] not in _INPUT_ROUTES):
            touching.append(index.names[i])
    if touching:
        shown = ", ".join(repr(n) for n in touching[:3])
        more = f" and {len(touching) - 3} more" if len(touching) > 3 else ""
        fail(f"the scope computes more than {form.name} steps: {shown}{more} "
             f"read or feed a step and are part of none")


def _order(steps: list[CellStep], form: CellForm) -> None:
    """Number the steps by time: a step whose ``state`` input is another step's output 0
    comes after it."""
    by_output = {s.tensors["out"]: s for s in steps}
    for step in steps:
        before = by_output.get(step.tensors[form.state])
        if before is not None:
            before.after.append(step)
    firsts = [s for s in steps if by_output.get(s.tensors[form.state]) is None]
    for first in firsts:
        time, current = 0, [first]
        while current:
            for s in current:
                s.time = time
            current = [n for s in current for n in s.after]
            time += 1
