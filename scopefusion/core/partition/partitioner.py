"""The partitioner: which nodes of a graph the back end runs, in which segment, and why the
others stay on the host.

Order of work (each step linear in the graph's size; the graph is indexed once):

1. the candidates (:mod:`.candidates`) on the default path, or the ``in_out_pair`` ranges
   (:mod:`.in_out`);
2. on the default path, spreading along string, resource and ref edges and to whole TF1
   loops (:mod:`.propagation`);
3. constants: one with inputs (a loop's constant) follows the nodes it waits for, as in
   the reference; one without inputs goes into every segment that reads it;
4. cycle-free clustering into segments (:mod:`.clusters`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ..fusion.fused_ops import FusedOpDef
from ..graph.index import GraphIndex
from ..graph.vocabulary import CONST_OPS
from .candidates import CandidateRules, initial_verdicts
from .clusters import Clustering, cluster
from .edges import EdgeTypes
from .frames import LoopFrames
from .in_out import check_loops_whole, in_out_ranges, range_error
from .propagation import propagate
from .reasons import Why, describe
from .request import PartitionRequest
from .supported import SupportedOps

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

    from ..graph.graph_scan import GraphColumns

_DEVICE = int(Why.DEVICE)


@dataclass
class Placement:
    """Where every node of one graph goes."""

    index: GraphIndex
    edges: EdgeTypes
    frames: LoopFrames
    why: list[int]
    detail: list[Any]
    free_const: bytearray
    clustering: Clustering
    supported: SupportedOps
    request: PartitionRequest
    seconds: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        segment_of = self.clustering.segment_of
        # a free constant is on the device when some node of a segment reads it
        self.const_on_device = bytearray(len(self.index))
        for c, ins in enumerate(self.index.inputs):
            if segment_of[c] >= 0:
                for p, _ in ins:
                    if self.free_const[p]:
                        self.const_on_device[p] = 1

    def on_device(self, i: int) -> bool:
        return self.clustering.segment_of[i] >= 0 or bool(self.const_on_device[i])

    def device_names(self) -> frozenset[str]:
        """The nodes the back end runs, constants it reads included (what fusion may touch)."""
        names = self.index.names
        return frozenset(names[i] for i in range(len(names)) if self.on_device(i))


def free_constants(index: GraphIndex) -> bytearray:
    return bytearray(op in CONST_OPS and not ins for op, ins in zip(index.ops, index.inputs, strict=True))


def _default_path(rules: CandidateRules, frames: LoopFrames) -> tuple[list[int], list[Any]]:
    why, detail = initial_verdicts(rules, resource_rule=True)
    propagate(rules.index, rules.edges, frames, why, detail, loops=True)
    return why, detail


def _range_path(rules: CandidateRules, request: PartitionRequest) -> tuple[list[int], list[Any]]:
    index = rules.index
    owner = in_out_ranges(index, request.pairs)
    n = len(index)
    why = [_DEVICE] * n
    detail: list[Any] = [None] * n
    for i, op in enumerate(index.ops):
        inside = owner[i]
        if request.device_ranges:
            if not inside:
                why[i] = int(Why.OUTSIDE_RANGE)
            elif op not in CONST_OPS:
                code, info = rules.verdict(i)
                if code != Why.DEVICE:
                    phrase = info if code == Why.UNSUPPORTED else _phrase(index, i, code, info)
                    raise range_error(index, i, inside, phrase)
        elif inside:
            why[i], detail[i] = int(Why.INSIDE_RANGE), inside
        elif op not in CONST_OPS:
            code, info = rules.verdict(i)
            why[i], detail[i] = int(code), info
    return why, detail


def _phrase(index: GraphIndex, i: int, code: int, info: Any) -> str:
    return describe(code, info, index.names, index.ops)


def _loop_constants(index: GraphIndex, why: list[int], detail: list[Any], free_const: bytearray) -> None:
    """A constant with inputs runs where one of the nodes it waits for runs (the reference's
    rule: a Const with a control input from a candidate is a candidate)."""
    for i in index.topological_order():
        if index.ops[i] in CONST_OPS and not free_const[i] and why[i] == _DEVICE \
                and not any(why[p] == _DEVICE for p, _ in index.inputs[i]):
            why[i], detail[i] = int(Why.CONST), None


def place(graph: "GraphDef | GraphIndex", supported: SupportedOps, request: PartitionRequest,
          fused_ops: Mapping[str, FusedOpDef] | None = None, *, columns: "GraphColumns | None" = None) -> Placement:
    """Place every node of ``graph`` (indexed here unless an index is given; ``columns``: the graph's
    as the native scan read them, for that index, see :class:`~..graph.index.GraphIndex`)."""
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    index = graph if isinstance(graph, GraphIndex) else GraphIndex(graph, columns=columns)
    edges = EdgeTypes(index, fused_ops)
    frames = LoopFrames(index)
    free_const = free_constants(index)
    rules = CandidateRules(index, supported, edges)
    seconds["index"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if request.pairs:
        why, detail = _range_path(rules, request)
    else:
        why, detail = _default_path(rules, frames)
    _loop_constants(index, why, detail, free_const)
    on_device = [w == _DEVICE and not f for w, f in zip(why, free_const, strict=True)]
    if request.pairs:
        check_loops_whole(index, frames, on_device, free_const)
    seconds["candidates"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    clustering = cluster(index, on_device, free_const, frames)
    for i in clustering.dropped:
        why[i], detail[i] = int(Why.DROPPED), index.ops[i]
    seconds["clusters"] = time.perf_counter() - t0
    for i in range(len(why)):
        if free_const[i] and why[i] == _DEVICE:
            why[i] = int(Why.CONST)  # unless a segment reads it: see Placement.on_device
    return Placement(index, edges, frames, why, detail, free_const, clustering, supported, request, seconds)
