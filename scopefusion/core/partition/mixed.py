"""A mixed run: partition the graph, fuse inside the device segments only, cut the segments out.

The order is the simplest one that is correct:

1. **place** the original graph (:func:`.partitioner.place`): the nodes the back end runs
   are fusion's ``fusible_nodes``, so a fusion candidate reaching a host node is refused
   with the reason (and reported like any refusal);
2. the fusion pipeline runs on the whole graph, as without partitioning;
3. **cut** the fused graph: a node is on the device when its name was a device node's or
   is new (fusion only ever replaces device nodes, so a fused node or an inner node
   stands where device nodes stood); the device nodes are clustered again on the fused
   graph (fusion may have contracted them) and each segment is cut out into a function
   (:mod:`.segments`).

Fusing inside the extracted functions instead would need every pass to run once per
segment and would split the fusion report; here fusion sees the graph as the user wrote
it, and the clustering, done last, is always that of the graph written out.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ..fusion.fused_ops import FusedOpDef
from ..graph.index import GraphIndex
from ..graph.vocabulary import parse_input
from ..options.record import session_attrs
from .boundary import Tensor
from .clusters import cluster
from .edges import EdgeTypes
from .frames import LoopFrames
from .partitioner import Placement, free_constants, place
from .placement import PartitionReport, make_report, segment_names, segment_summary
from .request import PartitionRequest
from .segments import SegmentGraph, Segmenting, cut, standalone_graph
from .supported import OpSupport, SupportedOps, read_supported_ops_file

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

    from ..graph.graph_scan import GraphColumns


def supported_ops_for(request: PartitionRequest, plugin_table: Mapping[str, OpSupport],
                      fused_ops: Mapping[str, FusedOpDef]) -> SupportedOps:
    """The table of a run: the request's file, the plugins' declarations, the fused ops."""
    file_table = read_supported_ops_file(request.supported_ops_file) if request.supported_ops_file else None
    return SupportedOps.build(file_table=file_table, plugin_table=plugin_table, fused_ops=fused_ops)


@dataclass
class MixedResult:
    """What a mixed run adds to a fusion result: the report, the standalone segments, and the
    TensorFlow-runnable form of the partitioned graph (what ``verify`` runs, whatever was emitted)."""

    report: PartitionReport
    segment_graphs: list[SegmentGraph] = field(default_factory=list)
    runnable_graph_def: "GraphDef | None" = None


@dataclass
class MixedOutput:
    """The graphs a mixed run writes: the fused form, the TensorFlow-runnable form (when asked)."""

    fused: "GraphDef"
    runnable: "GraphDef | None"
    result: MixedResult


def graph_output_tensors(index: GraphIndex, outputs: Sequence[str]) -> list[Tensor]:
    """``name`` / ``name:port`` tensors as ``(node index, port)`` (names not in the graph skipped)."""
    found = []
    for text in outputs:
        name, port = parse_input(text)
        if name in index.index and port >= 0:
            found.append((index.index[name], port))
    return found


class MixedRun:
    """Partition, then (after fusion) cut; see the module's documentation."""

    def __init__(self, request: PartitionRequest, supported: SupportedOps,
                 fused_ops: Mapping[str, FusedOpDef]) -> None:
        self.request = request
        self.supported = supported
        self.fused_ops = dict(fused_ops)
        self.placement: Placement | None = None
        self.seconds: dict[str, float] = {}

    @classmethod
    def for_request(cls, request: PartitionRequest, plugin_table: Mapping[str, OpSupport],
                    fused_ops: Mapping[str, FusedOpDef]) -> "MixedRun | None":
        """The run of a mixed request (its supported-ops file read now), or None when not mixed."""
        if not request.mixed:
            return None
        return cls(request, supported_ops_for(request, plugin_table, fused_ops), fused_ops)

    def place(self, graph_def: "GraphDef", columns: "GraphColumns | None" = None) -> frozenset[str]:
        """Place the original graph (``columns``: its columns as the native scan read them, for the
        placement's index); returns the names fusion may touch."""
        t0 = time.perf_counter()
        self.placement = place(graph_def, self.supported, self.request, self.fused_ops, columns=columns)
        self.seconds["partition"] = time.perf_counter() - t0
        return self.placement.device_names()

    def _segmenting(self, graph_def: "GraphDef", outputs: Sequence[str],
                    segment_of: Sequence[int] | None = None, names: list[str] | None = None) -> Segmenting:
        index = GraphIndex(graph_def)
        free = free_constants(index)
        if segment_of is None:
            assert self.placement is not None
            original = self.placement.index
            device = {original.names[i] for i, s in enumerate(self.placement.clustering.segment_of) if s >= 0}
            on_device = [not free[i] and (name in device or name not in original.index)
                         for i, name in enumerate(index.names)]
            clustering = cluster(index, on_device, free, LoopFrames(index))
            segment_of = clustering.segment_of
            taken = [*index.names, *(f.signature.name for f in graph_def.library.function)]
            names = segment_names(clustering.count, taken)
        return Segmenting(index, segment_of, names or [], free, graph_output_tensors(index, outputs))

    def finish(self, fused_graph: "GraphDef", outputs: Sequence[str],
               to_runnable: Callable[["GraphDef"], "GraphDef"] | None, *, segments: bool = True) -> MixedOutput:
        """Cut the fused graph (and its runnable form, when ``to_runnable`` is given)."""
        assert self.placement is not None, "place() first"
        t0 = time.perf_counter()
        attrs = session_attrs(self.request.session)
        seg = self._segmenting(fused_graph, outputs)
        edges = EdgeTypes(seg.index, self.fused_ops)
        fused_form = cut(seg, edges, fused_form=True, attrs=attrs)
        runnable = None
        if to_runnable is not None:
            tf_graph = to_runnable(fused_graph)
            by_name = dict(zip(seg.index.names, seg.segment_of, strict=True))
            tf_names = [n.name for n in tf_graph.node]
            tf_seg = self._segmenting(tf_graph, outputs, [by_name.get(n, -1) for n in tf_names], seg.names)
            runnable = cut(tf_seg, EdgeTypes(tf_seg.index, self.fused_ops), fused_form=False, attrs=attrs)
        graphs = [standalone_graph(seg, edges, k) for k in range(len(seg.names))] if segments else []
        summaries = [segment_summary(seg.index, name, bound, self.supported)
                     for name, bound in zip(seg.names, seg.bounds, strict=True)]
        self.seconds["segments"] = time.perf_counter() - t0
        report = make_report(self.placement, summaries, len(self.placement.index))
        report.seconds.update(self.seconds)
        return MixedOutput(fused_form, runnable, MixedResult(report, graphs, runnable))
