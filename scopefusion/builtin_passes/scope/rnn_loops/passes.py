"""``ScopeDynamicRNNPass``: a recurrent layer's whole loop -> ``DynamicRNN`` / ``DynamicGRUV2``.

``tf.compat.v1.nn.dynamic_rnn`` under control flow v2 writes its time loop as a functional
``While`` / ``StatelessWhile`` named ``<scope>/while`` (its outputs read through
``<scope>/while/Identity_k``, the scope the pattern matches).  Fusion inside the library runs
before the graph's passes, so the loop's body already holds one fused ``BasicLSTMCell`` or
``GRUCell`` per layer when this pass reads it (:mod:`.body`); a Keras 3 or tf_keras ``LSTM`` /
``GRU`` layer that is not unrolled has the same loop, its body also putting the weights in the
cell's layout (run once in the fused result, :mod:`.inner`); tf_keras's condition is ``time < n``
alone.  The loop, its input and output lists and the stack after it (:mod:`.plumbing`) become one
op per layer: ``DynamicRNN`` for an LSTM layer, ``DynamicGRUV2`` for a GRU layer, the upper layer
reading the lower one's ``y`` (a Keras layer with ``return_sequences=False`` gives ``y[-1:]``).  A
``MultiRNNCell`` of two layers is one loop and becomes two ops.  ``x`` and ``y`` stay time-major,
as the loop reads and writes them (``dynamic_rnn``'s transposes stay outside).  Under control flow
v1 the loop is a TF1 frame in the ``while`` scope (:mod:`.tf1_loop`), its cells their own ops: so are
tf_keras's layers built in a TF1 graph and a functional loop lowered when frozen (Sonnet's
``dynamic_unroll``, whose step before the loop becomes part of the op).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet, Any, Sequence

from ....core.fusion.refusal import Refused, fail
from ....core.scope.base_pass import ScopeBasePass
from ....core.scope.instances import ScopePart
from ....core.scope.patterns import PatternSet, ScopePattern
from ....core.scope.port_maps import input_slots
from ....core.scope.results import FusionScopesResult, ScopesResult
from .body import LoopBody, read_body, read_bounds
from .inner import LOOP_OPS, fused_inputs, write_inner_graph
from .ops import DYNAMIC_RNN
from .plumbing import LoopPlumbing, Tensor, add_feeders, read_plumbing
from .tf1_loop import read_tf1_loop

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

_LOOPS = ("While", "StatelessWhile")


@dataclass
class _Loop:
    """A loop to fuse: its name, body, plumbing, inputs by position and final values by position."""

    name: str
    body: LoopBody
    plumbing: LoopPlumbing
    ins: list[Tensor]
    #: position -> the (node, port) giving that loop variable's value after the loop
    finals: dict[int, Tensor]
    #: position of a variable the loop only overwrites -> the variable whose final value it has
    same_as: dict[int, int] = field(default_factory=dict)

    @property
    def tensors(self) -> list[Tensor]:
        return fused_inputs(self.body, self.ins, self.plumbing.x)


def _tf1(scope_graph: "ScopeGraph", scope: "Scope") -> _Loop:
    loop = read_tf1_loop(scope_graph, scope)
    return _Loop(scope.name, loop.body, loop.plumbing, loop.ins, {p: (e, 0) for p, e in loop.exits.items()},
                 loop.same_as)


def _common(scopes: list["Scope"]) -> "Scope | None":
    common = scopes[0] if scopes else None
    for scope in scopes[1:]:
        while common is not None and not (common is scope or common.is_ancestor_of(scope)):
            common = common.parent
    return common


def loop_scopes(scope_graph: "ScopeGraph") -> list["Scope"]:
    """The loops of the graph by their structure, whatever their scopes are named: the scope
    named like a ``While`` / ``StatelessWhile`` node (holding the reads of its outputs), and for a
    TF1 loop the innermost scope holding its ``LoopCond``, the ``Switch`` nodes it steers and the
    ``Merge`` nodes they switch (its frame)."""
    index = scope_graph.index
    found = []
    for op_type in _LOOPS:
        for i in index.nodes_of_type(op_type):
            scope = scope_graph.scope(index.names[i])
            if scope is not None:
                found.append(scope)
    node_scope = scope_graph.tree.node_scope
    for cond in index.nodes_of_type("LoopCond"):
        switches = [c for c, _, _ in index.consumers[cond] if index.ops[c] == "Switch"]
        merges = [t[0] for c in switches for t in index.inputs[c][:1] if index.ops[t[0]] == "Merge"]
        scope = _common([node_scope[i] for i in [cond, *switches, *merges]])
        if scope is not None and scope.parent is not None:
            found.append(scope)
    return found


def _no_loop(scope: "Scope") -> str:
    return (f"no While / StatelessWhile node is named {scope.name!r} and no TF1 loop runs in it: the scope is a "
            "loop's body or condition seen as a graph of its own (the loop is fused, or refused, in the graph "
            "running it) or no loop")


class ScopeDynamicRNNPass(ScopeBasePass):
    """dynamic_rnn loops (control flow v2 and v1) and Keras 3 / tf_keras LSTM / GRU loops of
    BasicLSTMCell / GRUCell steps -> DynamicRNN / DynamicGRUV2, one per layer."""

    name = "ScopeDynamicRNNPass"
    general = False
    description = ("tf.compat.v1 dynamic_rnn loops (functional While whose body is fused BasicLSTMCell / GRUCell "
                   "steps, or a TF1 while loop of those cells), Keras 3 / tf_keras LSTM / GRU loops (tf_keras in a "
                   "TF1 graph too) and Sonnet's dynamic_unroll (its step before the loop included) -> DynamicRNN / "
                   "DynamicGRUV2 per layer, time-major")

    def __init__(self) -> None:
        self._loops: dict[int, _Loop] = {}  # by id of the result's part
        self._refused: dict[str, str] = {}

    def define_patterns(self) -> list[PatternSet]:
        # the scope of a functional loop's outputs (``rnn/while/Identity_3``) and of its counter's start
        # (``rnn/while/loop_counter``), the loop node named like it; a TF1 loop's frame
        return [[[ScopePattern(DYNAMIC_RNN.name).add_scope_feature(suffix="while")]]]

    def may_fuse(self, op_types: AbstractSet[str]) -> bool:
        """A loop to fuse is a functional ``While`` or a TF1 frame (``Enter`` ... ``Exit``)."""
        return not op_types.isdisjoint(_LOOPS) or {"Enter", "Exit"} <= op_types

    def last_match_scopes_and_ops(self, scope_graph: "ScopeGraph") -> list[ScopesResult]:
        index = scope_graph.index
        functions = {f.signature.name: f for f in index.graph_def.library.function}
        groups = []
        matched = self.matched_scopes(scope_graph)
        names = {s.name for s in matched}
        for scope in matched + [s for s in loop_scopes(scope_graph) if s.name not in names]:
            outer = scope.parent if scope.parent is not None else scope
            loop = index.index.get(scope.name)
            functional = loop is not None and index.ops[loop] in _LOOPS
            if not functional and not (scope.count("Enter") and scope.count("Exit")):
                self._refused[scope.name] = _no_loop(scope)
                groups.append(ScopesResult([scope]))
                continue
            try:
                found = self._read(scope_graph, loop, functions) if functional and loop is not None \
                    else _tf1(scope_graph, scope)
            except Refused as why:
                self._refused[outer.name] = why.reason
                groups.append(ScopesResult([outer]))
                continue
            add_feeders(index, found.plumbing.members, {t[0] for t in found.tensors})
            part = ScopePart(outer, found.plumbing.members)
            self._loops[id(part)] = found
            groups.append(ScopesResult([outer], part=part))
        return groups

    @staticmethod
    def _read(scope_graph: "ScopeGraph", loop: int, functions: dict[str, Any]) -> "_Loop":
        attrs = scope_graph.index.nodes[loop].attr
        body_fn, cond_fn = (functions.get(attrs[a].func.name) for a in ("body", "cond"))
        if body_fn is None or cond_fn is None:
            fail("the loop's body or condition is not in this graph's library (a loop inside a "
                 "function: only the loops of the graph itself are fused whole)")
        body = read_body(body_fn)
        plumbing = read_plumbing(scope_graph, loop, body, read_bounds(cond_fn, body))
        ins = [t for t in scope_graph.index.inputs[loop] if t[1] >= 0]
        return _Loop(scope_graph.index.names[loop], body, plumbing, ins, {p: (loop, p) for p in range(len(ins))})

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        if result.part is None:
            fail(self._refused[scopes[0].name])
        found = self._loops[id(result.part)]
        body, plumbing, tensors = found.body, found.plumbing, found.tensors
        sg = scopes[0].graph
        names = sg.index.names
        for reader, slots in input_slots(sg, plumbing.members, tensors).items():
            result.insert_inputs(reader, slots)
        result.set_name(found.name)
        result.set_type(LOOP_OPS[body.layers[-1].op])
        kinds = ", ".join(LOOP_OPS[layer.op] for layer in body.layers)
        last = ", the last step's output alone" if body.last_only else ""
        result.set_description(f"recurrent loop of {len(body.layers)} layer(s) -> {kinds} (time-major{last})")
        result.insert_outputs(names[plumbing.stack], [0])
        ports: list[int | None] = [None] * len(found.ins)
        write_inner_graph(result, body, found.ins, tensors, ports, plumbing.rows)
        for p, same in found.same_as.items():
            ports[p] = ports[same]
        by_node: dict[int, list[int | None]] = {}
        for p, k in enumerate(ports):
            if k is not None and p in found.finals:
                node, port = found.finals[p]
                slots = by_node.setdefault(node, [])
                slots.extend([None] * (port + 1 - len(slots)))
                slots[port] = k
        for node, slots in by_node.items():
            result.insert_outputs(names[node], slots)
