"""Fusion inside the function library: the bodies of ``While``, ``If``, ``PartitionedCall``
and ``StatefulPartitionedCall`` nodes (and any other function of the library).

Each function is fused as a graph of its own (:mod:`.convert`) by the same stages, passes,
options and safety checks as the graph, and written back with the same signature, so the
nodes calling it stay valid.  A function that calls another is fused on its own, as is the
one it calls.  What the passes did inside a function joins the run's report: records and
refusals carry the function's name (``function``) and their names and scopes start with
``function::``; :class:`~..fusion.report.FunctionRecord` says per function what was done,
or why it was left alone.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..errors import GraphValidationError
from ..fusion.fused_ops import FusedOpDef
from ..fusion.pipeline import FusionOutcome
from ..fusion.report import FunctionRecord, FusionReport, PassReport, Refusal
from .arg_shapes import constant_arg_shapes
from .convert import Unconvertible, body_to_function, function_to_body
from .layout import OutputLayouts

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.function_pb2 import FunctionDef
    from tensorflow.core.framework.graph_pb2 import GraphDef

#: separates a function's name from a node name or scope inside it, in the report
FUNCTION_SEPARATOR = "::"

RunPipeline = Callable[["GraphDef"], FusionOutcome]


@dataclass
class FunctionFusion:
    """Fuses the functions of one graph's library with ``run`` (a pipeline run on a body)."""

    run: RunPipeline
    fused_ops: Mapping[str, FusedOpDef]
    progress: Callable[[str], None] | None = None

    def fuse(self, graph_def: "GraphDef", report: FusionReport) -> None:
        """Fuse inside every function of ``graph_def``'s library (in place), adding to ``report``."""
        t0 = time.perf_counter()
        library = graph_def.library.function
        functions = {f.signature.name: f for f in library}
        layouts = OutputLayouts(functions, self.fused_ops)
        shapes = constant_arg_shapes(graph_def)
        for position in range(len(library)):
            function = library[position]
            if self.progress is not None:
                self.progress(f"functions: fusing inside {function.signature.name}")
            record, rewritten, added = self._fuse_one(function, functions, layouts, report,
                                                      shapes.get(function.signature.name, {}))
            report.functions.append(record)
            if rewritten is not None:
                library[position].CopyFrom(rewritten)
                _add_functions(graph_def, added)
        report.stage_seconds["functions"] = time.perf_counter() - t0

    def _fuse_one(self, function: "FunctionDef", functions: Mapping[str, "FunctionDef"], layouts: OutputLayouts,
                  report: FusionReport, arg_shapes: Mapping[int, Any],
                  ) -> tuple[FunctionRecord, "FunctionDef | None", list["FunctionDef"]]:
        name = function.signature.name
        record = FunctionRecord(name, len(function.node_def), len(function.node_def))
        try:
            body = function_to_body(function, functions, layouts, arg_shapes)
        except Unconvertible as why:
            record.status, record.reason = "left alone", str(why)
            return record, None, []
        stubs = {f.signature.name for f in body.graph_def.library.function}
        try:
            outcome = self.run(body.graph_def)
        except GraphValidationError as why:  # what TensorFlow would refuse too, e.g. a port a node lacks
            record.status, record.reason = "left alone", f"its body is not a valid graph: {why}"
            return record, None, []
        record.fused = len(outcome.report.fused)
        if not record.fused:
            merge_function_report(report, outcome.report, name)
            return record, None, []
        try:
            rewritten = body_to_function(body, outcome.graph_def, layouts)
        except Unconvertible as why:
            record.status, record.fused = "left alone", 0
            record.reason = f"the fused body cannot be written back: {why}"
            return record, None, []
        merge_function_report(report, outcome.report, name)
        record.status, record.nodes_after = "fused", len(rewritten.node_def)
        added = [f for f in outcome.graph_def.library.function if f.signature.name not in stubs]
        return record, rewritten, added


def _add_functions(graph_def: "GraphDef", added: list["FunctionDef"]) -> None:
    present = {f.signature.name for f in graph_def.library.function}
    for function in added:
        if function.signature.name not in present:
            graph_def.library.function.add().CopyFrom(function)
            present.add(function.signature.name)


def _in_function(text: str, function: str) -> str:
    return f"{function}{FUNCTION_SEPARATOR}{text}"


def _tag(refusals: list[Refusal], function: str) -> list[Refusal]:
    for r in refusals:
        r.name, r.function = _in_function(r.name, function), function
        r.scopes = [_in_function(s, function) for s in r.scopes]
    return refusals


def _merge_pass(into: PassReport, inner: PassReport, function: str) -> None:
    for record in inner.fused:
        record.name, record.function = _in_function(record.name, function), function
        record.scopes = [_in_function(s, function) for s in record.scopes]
    _tag(inner.refused, function)
    _tag(inner.dropped, function)
    _tag(inner.near_misses, function)
    inner.matched_scopes = [_in_function(s, function) for s in inner.matched_scopes]
    if inner.error:
        inner.error = f"in function {function}: {inner.error}"
    _join_pass(into, inner)


def _join_pass(into: PassReport, inner: PassReport) -> None:
    into.fused.extend(inner.fused)
    into.refused.extend(inner.refused)
    into.dropped.extend(inner.dropped)
    into.near_misses.extend(inner.near_misses)
    into.matched_scopes.extend(inner.matched_scopes)
    for counter in ("match_times", "candidates", "near_miss_count", "results", "matches", "seconds"):
        setattr(into, counter, getattr(into, counter) + getattr(inner, counter))
    if inner.error and not into.error:
        into.error = inner.error


def _add_pass(report: FusionReport, by_name: dict[str, PassReport], p: PassReport) -> PassReport:
    """The report's record of pass ``p``, added (empty) when the report has none."""
    if p.name not in by_name:
        by_name[p.name] = PassReport(p.name, p.general, p.origin, p.engine, p.fusion_type, p.switch)
        report.passes.append(by_name[p.name])
    return by_name[p.name]


def merge_function_report(report: FusionReport, inner: FusionReport, function: str) -> None:
    """Add what the passes did inside ``function`` (``inner``) to the run's ``report``, pass by pass."""
    by_name = {p.name: p for p in report.passes}
    for p in inner.passes:
        _merge_pass(_add_pass(report, by_name, p), p, function)


def library_op_counts(graph_def: "GraphDef") -> dict[str, int]:
    """Nodes per op type over the bodies of every function of ``graph_def``'s library."""
    counts: dict[str, int] = {}
    for function in graph_def.library.function:
        for node in function.node_def:
            counts[node.op] = counts.get(node.op, 0) + 1
    return counts


def join_reports(report: FusionReport, library: FusionReport) -> None:
    """Add the report of the fusion inside the library (``library``, run before the graph's own
    stages) to the run's ``report``: its passes' records, function records, warnings and time."""
    by_name = {p.name: p for p in report.passes}
    for p in library.passes:
        _join_pass(_add_pass(report, by_name, p), p)
    report.functions.extend(library.functions)
    report.warnings.extend(library.warnings)
    for stage, seconds in library.stage_seconds.items():
        report.stage_seconds[stage] = report.stage_seconds.get(stage, 0.0) + seconds


def fuse_library(graph_def: "GraphDef", run: RunPipeline, fused_ops: Mapping[str, FusedOpDef],
                 report: FusionReport, progress: Callable[[str], None] | None = None) -> None:
    """Fuse inside every function of ``graph_def``'s library; see :class:`FunctionFusion`."""
    FunctionFusion(run, fused_ops, progress).fuse(graph_def, report)
