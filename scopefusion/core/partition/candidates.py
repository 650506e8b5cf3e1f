"""Candidates: the nodes a back end could run, judged one by one.

A node is a candidate when the supported-ops table (:mod:`.supported`) accepts its op
type, it is not marked ``_without_npu_compile``, and every function it calls (a
function-valued attribute such as a ``While`` body or a ``PartitionedCall``'s ``f``, or
an op that names a library function) holds only supported nodes (constants allowed,
nesting followed ten functions deep, as the reference does).  On the default path two
more rules of the reference apply in mixed mode: a node reading a resource not produced
by a ``VarHandleOp``, or producing a resource without being one, is no candidate; and a
graph holding ``OutfeedDequeueOp``/``StopOutfeedDequeueOp``, or ``MakeIterator`` with an
``Iterator``, runs on the host whole.

Constants are not judged here: they go where their readers go (:mod:`.partitioner`).
"""
from __future__ import annotations

from typing import Any

from ..graph.index import GraphIndex
from ..graph.tf_ops import tensorflow_op_def
from ..graph.vocabulary import CONST_OPS, CONTROL, DT_RESOURCE
from .edges import EdgeTypes
from .reasons import Why
from .supported import INPUT_OPS, SupportedOps

MAX_FUNCTION_DEPTH = 10
MARK_ATTR = "_without_npu_compile"
_OUTFEED_OPS = ("OutfeedDequeueOp", "StopOutfeedDequeueOp")
_ITERATOR_OPS = ("Iterator", "IteratorV2")

Verdict = tuple[int, Any]  # (Why code, detail)


class CandidateRules:
    """The per-node rules, with the per-op-type and per-function answers cached."""

    def __init__(self, index: GraphIndex, supported: SupportedOps, edges: EdgeTypes) -> None:
        self.index = index
        self.supported = supported
        self.edges = edges
        self.library = {f.signature.name: f for f in index.graph_def.library.function}
        self._function_attrs: dict[str, bool] = {}
        self._functions: dict[str, tuple[str, str, str, str] | None] = {}
        self._may_be_resource: bytearray | None = None

    # ------------------------------------------------------------ functions
    def _takes_functions(self, op: str) -> bool:
        """Whether nodes of ``op`` can carry function-valued attributes (or call one by name)."""
        known = self._function_attrs.get(op)
        if known is None:
            op_def = tensorflow_op_def(op)
            known = op in self.library or (op_def is not None and any(
                a.type in ("func", "list(func)") for a in op_def.attr))
            self._function_attrs[op] = known
        return known

    @staticmethod
    def called_functions(node: Any) -> list[str]:
        """The library functions a NodeDef's attributes name."""
        names = []
        for value in node.attr.values():
            if value.HasField("func"):
                names.append(value.func.name)
            elif value.HasField("list"):
                names.extend(f.name for f in value.list.func)
        return names

    def function_problem(self, name: str, depth: int = 1) -> tuple[str, str, str, str] | None:
        """None when function ``name`` holds only supported nodes, else ``(function, node, op,
        phrase)`` of the first one it does not."""
        if name in self._functions:
            return self._functions[name]
        self._functions[name] = None  # a recursive call counts as supported while it is judged
        problem = self._judge_function(name, depth)
        self._functions[name] = problem
        return problem

    def _judge_function(self, name: str, depth: int) -> tuple[str, str, str, str] | None:
        function = self.library.get(name)
        if function is None:
            return (name, "-", "-", "the function is not in the graph's library")
        if depth > MAX_FUNCTION_DEPTH:
            return (name, "-", "-", f"functions nested deeper than {MAX_FUNCTION_DEPTH}")
        for node in function.node_def:
            if node.op in CONST_OPS:
                continue
            phrase = self.supported.why_not(node.op)
            if phrase is None and self._takes_functions(node.op):
                calls = self.called_functions(node) + ([node.op] if node.op in self.library else [])
                for called in calls:
                    inner = self.function_problem(called, depth + 1)
                    if inner is not None:
                        return inner
            if phrase is not None:
                return (name, node.name, node.op, phrase)
        return None

    # ---------------------------------------------------------------- nodes
    def verdict(self, i: int) -> Verdict:
        """The node's own verdict: ``(Why.DEVICE, None)`` or why it is no candidate."""
        op = self.index.ops[i]
        node = self.index.nodes[i]
        phrase = self.supported.why_not(op)
        if phrase is not None:
            return (Why.INPUT, op) if op in INPUT_OPS else (Why.UNSUPPORTED, phrase)
        if MARK_ATTR in node.attr and node.attr[MARK_ATTR].b:
            return (Why.MARKED, None)
        if self._takes_functions(op):
            calls = self.called_functions(node) + ([op] if op in self.library else [])
            for called in calls:
                problem = self.function_problem(called)
                if problem is not None:
                    return (Why.FUNCTION, problem)
        return (Why.DEVICE, None)

    def resource_verdict(self, i: int) -> Verdict:
        """The reference's mixed-mode resource rule for a candidate."""
        index, edges = self.index, self.edges
        op = index.ops[i]
        if op == "VarHandleOp":
            return (Why.DEVICE, None)
        if edges.has_resource_output(i):
            return (Why.RESOURCE, (-1, op))
        resourceful = self._resourceful()
        for p, port in index.inputs[i]:
            if resourceful[p] and port != CONTROL and edges.output_dtype(p, port) == DT_RESOURCE:
                return (Why.RESOURCE, (p, index.ops[p]))
        return (Why.DEVICE, None)

    def _resourceful(self) -> bytearray:
        """Per node: its op may output a resource and is not a VarHandleOp (built once)."""
        if self._may_be_resource is None:
            by_op: dict[str, bool] = {}
            flags = bytearray(len(self.index))
            for i, op in enumerate(self.index.ops):
                known = by_op.get(op)
                if known is None:
                    known = by_op[op] = op != "VarHandleOp" and self.edges.may_be_resource(i)
                flags[i] = known
            self._may_be_resource = flags
        return self._may_be_resource

    def graph_rule(self) -> str | None:
        """The reference's rules that keep a whole graph on the host, as a phrase, or None."""
        index = self.index
        for op in _OUTFEED_OPS:
            if index.nodes_of_type(op):
                return f"the graph holds {op} {index.names[index.nodes_of_type(op)[0]]!r}: it runs on the host whole"
        makes = [i for i, op in enumerate(index.ops) if "MakeIterator" in op] if any(
            index.nodes_of_type(op) for op in _ITERATOR_OPS) else []
        if makes:
            return (f"the graph holds {index.ops[makes[0]]} {index.names[makes[0]]!r} and an Iterator: its data "
                    "pipeline runs on the host whole")
        return None


def initial_verdicts(rules: CandidateRules, *, resource_rule: bool) -> tuple[list[int], list[Any]]:
    """``why`` and ``detail`` per node before propagation; constants start as candidates."""
    index = rules.index
    n = len(index)
    why = [int(Why.DEVICE)] * n
    detail: list[Any] = [None] * n
    graph_phrase = rules.graph_rule() if resource_rule else None
    code: int
    for i, op in enumerate(index.ops):
        if op in CONST_OPS:
            continue
        if graph_phrase is not None:
            code, info = (Why.INPUT, op) if op in INPUT_OPS else (Why.GRAPH, graph_phrase)
        else:
            code, info = rules.verdict(i)
            if code == Why.DEVICE and resource_rule:
                code, info = rules.resource_verdict(i)
        why[i] = int(code)
        detail[i] = info
    return why, detail
