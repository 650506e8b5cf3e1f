"""The placement report: the segments (nodes, op counts, what each reads and hands back)
and, for every node left on the host, why.

Segments are named as the reference names its clusters, ``GeOp<graph>_<n>`` (graph 0 here),
numbered in the order they run; a name a node of the graph already has gets a suffix.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from ..graph.index import GraphIndex
from ..graph.vocabulary import CONTROL, tensor_name
from .boundary import SegmentBoundary, Tensor, boundaries
from .partitioner import Placement
from .reasons import CODE_NAMES, Why, describe
from .supported import SupportedOps

SEGMENT_PREFIX = "GeOp0_"
_EXAMPLES = 5


def segment_names(count: int, taken: Iterable[str]) -> list[str]:
    """``GeOp0_0``, ``GeOp0_1``, ...: each free of the names in ``taken``."""
    used = set(taken)
    names = []
    for k in range(count):
        name = f"{SEGMENT_PREFIX}{k}"
        suffix = 0
        while name in used:
            suffix += 1
            name = f"{SEGMENT_PREFIX}{k}_{suffix}"
        used.add(name)
        names.append(name)
    return names


@dataclass
class SegmentSummary:
    """One segment as the report shows it."""

    name: str
    nodes: int
    ops: dict[str, int]
    inputs: list[str]
    outputs: list[str]
    waits_for: list[str]
    constants: int
    heavy_ops: int
    node_names: list[str] = field(default_factory=list, repr=False)
    const_names: list[str] = field(default_factory=list, repr=False)


@dataclass
class HostNode:
    """A node left on the host, and why."""

    name: str
    op: str
    code: str
    reason: str


@dataclass
class PartitionReport:
    """What the partitioner decided for one graph."""

    mode: str
    supported: str
    nodes: int
    device_nodes: int
    segments: list[SegmentSummary]
    host: list[HostNode]
    seconds: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._where = {n: s.name for s in reversed(self.segments) for n in (*s.const_names, *s.node_names)}
        self._host = {h.name: h for h in self.host}

    def where(self, name: str) -> str:
        """The segment that runs node ``name`` (a constant: the first segment holding a copy), or
        ``"host"``.  After a fusion run the segments are those of the graph written out: a node
        fusion replaced is known by the fused node's name."""
        if name in self._where:
            return self._where[name]
        if name in self._host:
            return "host"
        raise KeyError(f"no node {name!r} in the partitioned graph")

    def reason(self, name: str) -> str | None:
        """Why node ``name`` stays on the host (None when a segment runs it)."""
        entry = self._host.get(name)
        return entry.reason if entry is not None else None

    def segment(self, name: str) -> SegmentSummary:
        for s in self.segments:
            if s.name == name:
                return s
        raise KeyError(name)

    def host_by_reason(self) -> dict[str, list[HostNode]]:
        """Host nodes grouped by reason code, in order of first appearance."""
        groups: dict[str, list[HostNode]] = {}
        for h in self.host:
            groups.setdefault(h.code, []).append(h)
        return groups

    def to_dict(self, *, nodes: bool = False) -> dict[str, Any]:
        """JSON-ready; ``nodes=True`` lists every segment's node names too."""
        out = asdict(self)
        for entry in out["segments"]:
            if not nodes:
                entry.pop("node_names")
                entry.pop("const_names")
        return out

    def to_json(self, indent: int = 2, *, nodes: bool = False) -> str:
        return json.dumps(self.to_dict(nodes=nodes), indent=indent)

    def summary_lines(self) -> list[str]:
        """A plain-text account: the totals, then host nodes by reason with a few examples."""
        lines = [f"{len(self.segments)} segment(s); {self.device_nodes} of {self.nodes} node(s) on the back end, "
                 f"{len(self.host)} on the host", f"placement: {self.mode}", f"supported ops: {self.supported}"]
        for code, group in self.host_by_reason().items():
            shown = "; ".join(f"{h.name!r} ({h.op}): {h.reason}" for h in group[:_EXAMPLES])
            more = f"; and {len(group) - _EXAMPLES} more" if len(group) > _EXAMPLES else ""
            lines.append(f"host, {code} ({len(group)}): {shown}{more}")
        return lines


def _tensor(index: GraphIndex, tensor: Tensor) -> str:
    p, port = tensor
    return tensor_name(index.names[p], port)


def segment_summary(index: GraphIndex, name: str, boundary: SegmentBoundary,
                    supported: SupportedOps) -> SegmentSummary:
    """One segment of an indexed graph, as the report shows it."""
    ops = Counter(index.ops[i] for i in boundary.members)
    heavy = sum(n for op, n in ops.items() if supported.is_heavy(op))
    return SegmentSummary(
        name=name, nodes=len(boundary.members), ops=dict(ops.most_common()),
        inputs=[_tensor(index, t) for t in boundary.args], outputs=[_tensor(index, t) for t in boundary.rets],
        waits_for=[tensor_name(index.names[p], CONTROL) for p in boundary.control_in],
        constants=len(boundary.consts), heavy_ops=heavy, node_names=[index.names[i] for i in boundary.members],
        const_names=[index.names[i] for i in boundary.consts])


def host_nodes(placement: Placement) -> list[HostNode]:
    """Every node ``placement`` leaves on the host, with its reason."""
    index = placement.index
    host = []
    for i, code in enumerate(placement.why):
        if code != Why.DEVICE and not placement.on_device(i):
            host.append(HostNode(index.names[i], index.ops[i], CODE_NAMES[Why(code)],
                                 describe(code, placement.detail[i], index.names, index.ops)))
    return host


def make_report(placement: Placement, segments: list[SegmentSummary], nodes: int) -> PartitionReport:
    """The report: ``segments`` (of the graph as written), host nodes from ``placement``."""
    device = sum(s.nodes for s in segments) + len({c for s in segments for c in s.const_names})
    return PartitionReport(placement.request.mode(), placement.supported.describe(), nodes, device, segments,
                           host_nodes(placement), dict(placement.seconds))


def build_report(placement: Placement, graph_outputs: Sequence[Tensor]) -> PartitionReport:
    """The report of ``placement`` on its own graph; ``graph_outputs`` are the tensors kept fetchable."""
    index = placement.index
    clustering = placement.clustering
    names = segment_names(clustering.count, index.names)
    bounds = boundaries(index, clustering.segment_of, clustering.count, placement.free_const, graph_outputs)
    segments = [segment_summary(index, name, b, placement.supported) for name, b in zip(names, bounds, strict=True)]
    return make_report(placement, segments, len(index))
