"""The pipeline every engine's candidates go through.

A run is a sequence of stages, one per engine (scope fusion, then graph fusion,
then UB fusion).  Each stage indexes the graph as the previous stage left it,
asks its engine for :class:`FusionCandidate` objects, checks each one
(:func:`make_plan`), settles conflicts (:func:`select_plans`) and applies the
survivors in one rewrite.  The engines only propose; what is safe to apply is
decided here, the same way for all of them.
"""
from __future__ import annotations

import math
import operator
import signal
from collections import Counter
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from ..errors import GraphValidationError, OptionError, PassError, ScopeFusionError
from ..graph.index import GraphIndex, no_gc
from ..graph.reindex import layout_of, reindex, rewritten_ops
from ..graph.vocabulary import CONTROL, NON_OUTPUT_SINKS, parse_input, tensor_name
from .candidate import FusionCandidate
from .conflicts import Conflict, select_plans
from .fused_ops import FusedOpDef
from .op_checks import OpChecks
from .options import FusionOptions
from .places import Place, PlaceRecorder
from .plan import FusionPlan, make_plan
from .refusal import Refused
from .report import FusedRecord, FusionReport, PassReport, Refusal
from .rewrite import RewriteSummary, apply_plans, check_rewrite, check_written_nodes
from .young_cycles import young_cycles_collected

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

    from ..graph.graph_scan import GraphColumns


@dataclass
class FusionOutcome:
    """The rewritten graph and the report of the run."""

    graph_def: "GraphDef"
    report: FusionReport


@dataclass
class StageContext:
    """What an engine sees of one stage: the graph as the previous stage left it."""

    index: GraphIndex
    graph_outputs: Mapping[int, Sequence[int]]
    report: FusionReport
    fused_ops: Mapping[str, FusedOpDef]
    options: FusionOptions
    progress: Callable[[str], None] | None = None

    def pass_report(self, report: PassReport) -> PassReport:
        """Add a pass's report to the run's."""
        self.report.passes.append(report)
        return report

    def say(self, text: str) -> None:
        """Tell a progress display what the stage is doing (e.g. which pass runs)."""
        if self.progress is not None:
            self.progress(text)


class Engine(Protocol):
    """What the pipeline needs of an engine."""

    #: the stage's name in the report's timings, e.g. "scope" or "graph"
    stage: str

    def active(self) -> bool:
        """Whether the engine has any pass to run (an inactive stage costs nothing)."""

    def propose(self, context: StageContext) -> list[FusionCandidate]:
        """Run the engine's passes over the stage's graph and return their candidates."""

    def skipped(self, report: FusionReport) -> None:
        """The stage does not run (nothing active): record what the report should still say."""


class PassTimeout(Exception):
    """A pass ran longer than the run's per-pass time limit."""


@contextmanager
def contained(spec_name: str, origin: str, report: PassReport, strict: bool,
              timeout: float | None = None, changed: list[str] | None = None) -> Iterator[None]:
    """Run a pass's own code: whatever it raises (``SystemExit`` too, and a ``KeyboardInterrupt``
    the pass raises itself) names the pass and skips it (``strict``: raises :class:`PassError`);
    with ``timeout``, a pass still running after that many seconds is stopped the same way.  Only
    a real interrupt (Ctrl-C, SIGINT) goes through, and any interrupt where the signal cannot be
    watched (off the main thread)."""
    interrupts: list[int] = []
    try:
        with time_limit(timeout, f"ran longer than the limit of {timeout} s"), _watch_interrupts(interrupts):
            yield
    except KeyboardInterrupt as exc:
        if interrupts or not _watchable():
            raise
        _contain(exc, spec_name, origin, report, strict, changed)
    except BaseException as exc:  # noqa: BLE001 - a pass's own bug, whatever it raised
        _contain(exc, spec_name, origin, report, strict, changed)


def _watchable() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def _watch_interrupts(seen: list[int]) -> Iterator[None]:
    """Note each SIGINT received in the block in ``seen``, then let the handler in place act on it."""
    if not _watchable():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def note(signum: int, frame: Any) -> None:
        seen.append(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _contain(exc: BaseException, spec_name: str, origin: str, report: PassReport, strict: bool,
             changed: list[str] | None) -> None:
    """Name the pass and what it raised (``strict``: as a :class:`PassError`)."""
    text = shorten_text(" ".join(str(exc).split())) or "(no message)"
    message = f"pass {spec_name} ({origin}) raised {type(exc).__name__}: {text}"
    if isinstance(exc, (PassTimeout, PassChangedGraph)):
        message = f"pass {spec_name} ({origin}) {text}"
    elif changed:
        message += f"; it also {_changed_text(changed)}"
    if strict:
        raise PassError(message) from exc
    report.error = message


def shorten_text(text: str, limit: int = 300) -> str:
    """``text`` with its middle cut when it is longer than ``limit`` characters."""
    return text if len(text) <= limit else f"{text[:limit // 2]} ... {text[-limit // 2:]}"


class PassChangedGraph(Exception):
    """A pass changed nodes it may only read."""


def reject_if_changed(spec_name: str, origin: str, changed: list[str]) -> None:
    """A pass that changed the nodes it read (they were put back) is treated as failing."""
    if changed:
        raise PassChangedGraph(f"{_changed_text(changed)} and its results dropped")


def _changed_text(changed: list[str]) -> str:
    shown = ", ".join(repr(n) for n in changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return f"changed node(s) {shown}, which passes may only read; the changes were undone"


@contextmanager
def time_limit(seconds: float | None, message: str) -> Iterator[None]:
    """Raise :class:`PassTimeout` in the block when it runs longer than ``seconds`` (a real-time
    timer on the main thread; elsewhere, or without ``seconds``, no limit)."""
    if (not seconds or math.isinf(seconds) or threading.current_thread() is not threading.main_thread()
            or not hasattr(signal, "setitimer")):
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise PassTimeout(message)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class FusionPipeline:
    """Runs engines stage by stage over a graph, in place."""

    def __init__(self, engines: Sequence[Engine], fused_ops: Mapping[str, FusedOpDef],
                 options: FusionOptions | None = None, progress: Callable[[str], None] | None = None) -> None:
        self.engines = list(engines)
        self.fused_ops = dict(fused_ops)
        self.options = options or FusionOptions()
        #: hears what the run is doing ("graph fusion: matching (2,345 nodes)"), for progress displays
        self.progress = progress

    def _say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(text)

    def run(self, graph_def: "GraphDef", *, columns: "GraphColumns | None" = None) -> FusionOutcome:
        """Fuse ``graph_def`` in place and return it with the report.  ``columns``: its names, op
        types and inputs as :mod:`..graph.graph_scan` read them from the bytes it was parsed from,
        none of them changed since (the first index takes them over)."""
        # Indexing creates millions of small containers; pausing the cyclic
        # collector for the run saves its repeated full sweeps over them.
        with no_gc():
            return self._run(graph_def, columns)

    def _run(self, graph_def: "GraphDef", columns: "GraphColumns | None" = None) -> FusionOutcome:
        report = FusionReport()
        self._say(f"indexing {len(graph_def.node):,} nodes")
        t0 = time.perf_counter()
        index = GraphIndex(graph_def, columns=columns)
        del columns  # the index holds what it uses
        report.nodes_before = len(index)
        report.op_counts_before = dict(Counter(index.ops))
        report.stage_seconds["index"] = time.perf_counter() - t0
        outputs = self._output_tensors(index)
        report.outputs = [tensor_name(n, p) for n, p in outputs]
        first, rewrite = True, None
        watched: dict[str, list[str]] = {}  # a scope near miss's scope -> its nodes when it was missed
        for engine in self.engines:
            if not engine.active():
                engine.skipped(report)
                continue
            if not first:
                t0 = time.perf_counter()
                self._say(f"{engine.stage} stage: indexing {len(graph_def.node):,} nodes")
                index = _index_after(index, graph_def, rewrite)
                rewrite = None  # the last rewrite's lists go before this stage makes its own
                report.stage_seconds[f"{engine.stage}.index"] = time.perf_counter() - t0
            first = False
            rewrite = self._stage(engine, index, outputs, report)
            watched.update(scope_members(index, report, watched))  # before a later stage rewrites them
        report.nodes_after = len(graph_def.node)
        report.op_counts_after = dict(Counter(_ops_after(index, graph_def, rewrite)))
        settle_scope_near_misses(graph_def, report, self.fused_ops, watched)
        return FusionOutcome(graph_def, report)

    def _stage(self, engine: Engine, index: GraphIndex, outputs: Sequence[tuple[str, int]],
               report: FusionReport) -> RewriteSummary | None:
        """Run one stage over ``index``; what its rewrite changed (None: it rewrote nothing).  What
        matching leaves in reference cycles (they hold the index) is collected when the stage ends,
        among the objects the stage made: by then its candidates and plans are gone, which the
        collection would otherwise walk (some seven objects each), and the index is still needed."""
        with young_cycles_collected():
            return self._run_stage(engine, index, outputs, report)

    def _run_stage(self, engine: Engine, index: GraphIndex, outputs: Sequence[tuple[str, int]],
                   report: FusionReport) -> RewriteSummary | None:
        stages = report.stage_seconds
        context = StageContext(index, _outputs_by_index(index, outputs), report, self.fused_ops, self.options,
                               self.progress)
        self._say(f"{engine.stage} stage: matching ({len(index):,} nodes)")
        t0 = time.perf_counter()
        reports_before = len(report.passes)
        candidates = engine.propose(context)
        stages[f"{engine.stage}.match"] = time.perf_counter() - t0

        self._say(f"{engine.stage} stage: checking and applying {len(candidates):,} candidate(s)")
        t0 = time.perf_counter()
        reports = {p.name: p for p in report.passes[reports_before:]}
        recorder = PlaceRecorder(index) if self.options.keep_places else None
        plans = self._plans(context, candidates, reports, recorder)
        del candidates  # the refused go now; a plan holds its own
        accepted = select_plans(index, plans, lambda plan, why: _refuse(reports, plan.candidate, why, recorder))
        del plans  # the plans that lost a conflict go before the rewrite adds nodes
        settle_near_misses(index, reports.values(), accepted, self.fused_ops)
        places = _stage_places(recorder, reports.values(), accepted)  # before the rewrite changes the index
        if accepted:  # the rewrite reads no order nor op table, only consumers (without one, the next stage reads them)
            index.release_tables(keep_consumers=True)
        summary = apply_plans(index, accepted)
        for plan, place in zip(accepted, places, strict=True):
            c = plan.candidate  # its ``where`` list is the record's: nothing changes either
            reports[c.pass_name].fused.append(FusedRecord(
                name=c.label, type=c.type, scopes=c.where, removed_nodes=len(plan.removed),
                kept_nodes=len(plan.kept), inner_nodes=len(c.inner_nodes), place=place,
                description=c.description,
            ))
        stages[f"{engine.stage}.apply"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        try:
            check_rewrite(index.graph_def, index, accepted, summary, full=self.options.validate_output)
        except GraphValidationError as exc:  # a bug here, never the user's
            raise ScopeFusionError(f"internal error: the fused graph is invalid: {exc}") from exc
        check_written_nodes(index, accepted, summary)
        stages[f"{engine.stage}.validate"] = time.perf_counter() - t0
        return summary if accepted else None

    def _plans(self, context: StageContext, candidates: Sequence[FusionCandidate],
               reports: Mapping[str, PassReport], recorder: PlaceRecorder | None = None) -> list[FusionPlan]:
        plans = []
        ops = OpChecks(self.fused_ops)
        for candidate in candidates:
            if reports[candidate.pass_name].error:  # the pass failed: none of its candidates is trusted
                _refuse(reports, candidate, "not applied: the pass raised (see its error)", recorder)
                continue
            try:
                self._check_fusible(context.index, candidate)
                plans.append(make_plan(context.index, candidate, fused_ops=self.fused_ops,
                                       graph_outputs=context.graph_outputs, ops=ops))
            except Refused as why:
                _refuse(reports, candidate, why.reason, recorder, why.nodes)
        return plans

    def _check_fusible(self, index: GraphIndex, candidate: FusionCandidate) -> None:
        """With ``fusible_nodes`` (the nodes a back end runs), a candidate reaching past them is refused."""
        allowed = self.options.fusible_nodes
        if allowed is None:
            return
        outside = [index.names[m] for m in sorted(candidate.members) if index.names[m] not in allowed]
        if outside:
            raise Refused(f"{outside[0]!r}{f' and {len(outside) - 1} more' if len(outside) > 1 else ''} "
                          "lie outside the nodes the back end runs", outside[0])

    def _output_tensors(self, index: GraphIndex) -> list[tuple[str, int]]:
        """The graph outputs (``--outputs``, else the sinks), by name: every stage keeps them fetchable."""
        if self.options.outputs:
            missing, out = [], []
            for tensor in self.options.outputs:
                name, port = parse_input(tensor.lstrip("^"))
                if name not in index.index or port == CONTROL:
                    missing.append(tensor)
                elif (name, port) not in out:
                    out.append((name, port))
            if missing:
                raise OptionError(f"output tensor(s) not in the graph: {', '.join(missing)}")
            return out
        return [(index.names[i], 0) for i in index.sinks() if index.ops[i] not in NON_OUTPUT_SINKS]


def _index_after(index: GraphIndex, graph_def: "GraphDef", rewrite: RewriteSummary | None) -> GraphIndex:
    """The index of ``graph_def`` for the next stage: after a rewrite, ``index`` updated with what it
    changed; after none, ``index`` itself while it still indexes the graph."""
    if rewrite is not None and index.graph_def is graph_def:
        return reindex(index, rewrite.dropped, rewrite.changed, rewrite.inserted, layout=rewrite.layout,
                       release_old=True)
    if rewrite is None and _indexes(index, graph_def):
        return index
    return GraphIndex(graph_def)


def _ops_after(index: GraphIndex, graph_def: "GraphDef", rewrite: RewriteSummary | None) -> list[str]:
    """The op type of every node of ``graph_def`` in graph order, after the last stage: the op types of
    ``index`` (the last stage's) laid out as its rewrite left the nodes, without reading the untouched
    nodes again."""
    if rewrite is None:
        ops = index.ops
    else:
        layout = rewrite.layout or layout_of(len(index), rewrite.dropped, rewrite.inserted)
        ops = rewritten_ops(index, layout, [node for nodes in rewrite.inserted.values() for node in nodes],
                            rewrite.changed)
    if index.graph_def is not graph_def or len(ops) != len(graph_def.node):
        return [node.op for node in graph_def.node]
    return ops


def _indexes(index: GraphIndex, graph_def: "GraphDef") -> bool:
    """Whether ``index`` still indexes ``graph_def``, which no stage rewrote since it was built:
    the same node messages in the same order.  (Passes only read the graph: a node a pass
    changed is put back as it was, in the same message.)"""
    nodes = index.nodes
    return index.graph_def is graph_def and len(graph_def.node) == len(nodes) and all(
        map(operator.is_, graph_def.node, nodes))


def _outputs_by_index(index: GraphIndex, outputs: Sequence[tuple[str, int]]) -> dict[int, list[int]]:
    by_index: dict[int, list[int]] = {}
    for name, port in outputs:
        by_index.setdefault(index.index[name], []).append(port)
    return by_index


def _refuse(reports: Mapping[str, PassReport], candidate: FusionCandidate, reason: str,
            recorder: PlaceRecorder | None = None, nodes: Sequence[str] = ()) -> None:
    """Record why ``candidate`` was not applied: lost to another result (:class:`Conflict`), or refused."""
    report = reports[candidate.pass_name]
    place = recorder.of_members(sorted(candidate.members)) if recorder is not None else None
    if isinstance(reason, Conflict):
        report.dropped.append(Refusal(candidate.label, str(reason), list(candidate.where), winner=reason.winner,
                                      place=place))
    else:
        report.refused.append(Refusal(candidate.label, reason, list(candidate.where), place=place,
                                      nodes=list(nodes)))


#: near misses listed per pass (all that remain are counted)
MAX_NEAR_MISSES = 50


def settle_near_misses(index: GraphIndex, reports: Iterable[PassReport], accepted: Sequence[FusionPlan],
                       fused_ops: Mapping[str, FusedOpDef]) -> None:
    """A near miss on a part another pass fused is noise: drop those at a node a result of this stage
    replaces or at a fused op an earlier stage made (a graph pass's near miss names its root node),
    and those in or under a scope a result of this stage fused (a scope pass's names a scope); then
    keep the first :data:`MAX_NEAR_MISSES` of each pass listed, and count the rest."""
    missed = [p for p in reports if p.near_misses]
    if not missed:  # the common case: nothing to look up
        return
    taken: set[int] = set()
    for plan in accepted:
        taken.update(plan.candidate.members)
    scopes = {s for plan in accepted for s in plan.candidate.where}
    for p in missed:
        kept = [r for r in p.near_misses if not _covered(r.name, index, taken, scopes, fused_ops)]
        p.near_miss_count -= len(p.near_misses) - len(kept)
        p.near_misses = kept[:MAX_NEAR_MISSES]


def scope_members(index: GraphIndex, report: FusionReport, watched: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """The nodes under each scope a scope pass nearly matched (not yet watched), as the stage saw them."""
    scopes = {r.name for p in report.passes if p.engine == "scope" for r in p.near_misses
              if "::" not in r.name and r.name not in watched}
    if not scopes:
        return {}
    members: dict[str, list[str]] = {s: [] for s in scopes}
    for name in index.names:
        k = name.find("/")
        while k != -1:
            if name[:k] in scopes:
                members[name[:k]].append(name)
            k = name.find("/", k + 1)
    return members


def settle_scope_near_misses(graph_def: "GraphDef", report: FusionReport, fused_ops: Mapping[str, FusedOpDef],
                             watched: Mapping[str, list[str]]) -> None:
    """A scope pass's near miss at a scope whose every node a later stage fused (none of them is left in
    the graph but as a fused op) is noise too: it goes, once the run's last stage is done."""
    if not watched:
        return
    wanted = {name for names in watched.values() for name in names}
    unfused = {node.name for node in graph_def.node if node.name in wanted and node.op not in fused_ops}
    for p in report.passes:
        if p.engine != "scope" or not p.near_misses:
            continue
        kept = [r for r in p.near_misses if r.name not in watched or unfused.intersection(watched[r.name])]
        p.near_miss_count -= len(p.near_misses) - len(kept)
        p.near_misses = kept


def _covered(name: str, index: GraphIndex, taken: set[int], scopes: set[str],
             fused_ops: Mapping[str, FusedOpDef]) -> bool:
    node = index.index.get(name)
    if node is not None and (node in taken or index.ops[node] in fused_ops):
        return True
    if name in scopes:
        return True
    cut = name.find("/")  # under a fused scope: one of the name's own prefixes is one (not every scope tried)
    while cut != -1:
        if name[:cut] in scopes:
            return True
        cut = name.find("/", cut + 1)
    return False


def _stage_places(recorder: PlaceRecorder | None, reports: Iterable[PassReport],
                  accepted: Sequence[FusionPlan]) -> list[Place | None]:
    """With places kept: the place of every plan about to be applied (the nodes it replaces), and
    of the stage's refusals without a candidate and near misses (by their scopes or nodes)."""
    if recorder is None:
        return [None] * len(accepted)
    for p in reports:
        for r in [*p.refused, *p.near_misses]:
            if r.place is None:
                r.place = recorder.of_names(r.scopes or [r.name], r.reason, r.nodes)
    return [recorder.of_members(plan.removed, plan.inputs) for plan in accepted]
