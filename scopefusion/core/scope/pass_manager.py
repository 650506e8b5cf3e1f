"""The :class:`ScopePassManager`: the scope fusion engine.

It builds the :class:`ScopeGraph` of the stage's graph, creates the enabled
scope passes, matches their patterns in registration order, and turns each
pass's results into fusion candidates for the shared pipeline.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Mapping, Sequence, Union

import numpy as np

from ..fusion.candidate import FusionCandidate
from ..fusion.fused_ops import FusedOpDef, shape_rules
from ..fusion.options import FusionOptions, check_pass_names
from ..fusion.pass_spec import PassSpec
from ..fusion.pipeline import FusionOutcome, FusionPipeline, StageContext, contained, reject_if_changed
from ..fusion.refusal import Refused, warn_older_spelling
from ..fusion.report import FusionReport, PassReport, Refusal
from .base_pass import ScopeBasePass
from .candidates import to_candidate
from .matcher import MatchStats, match_pattern_sets
from .patterns import check_pattern_sets
from .results import FusionScopesResult, ScopesResult
from .scope_graph import Scope, ScopeGraph

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

#: Candidates of one pass are ordered after those of every earlier pass.
ORDER_STRIDE = 1_000_000


def _spec(entry: Union[PassSpec, type[ScopeBasePass]]) -> PassSpec:
    spec = entry if isinstance(entry, PassSpec) else PassSpec(entry)
    if spec.engine != "scope":
        raise TypeError(f"{spec.name} is not a scope pass")
    return spec


class ScopePassManager:
    """Runs the enabled scope passes over a graph.

    ``passes`` are in registration order; general passes always run, the
    others only when named in ``options.enable_scope_fusion_passes``.
    """

    stage = "scope"

    def __init__(
        self,
        passes: Sequence[Union[PassSpec, type[ScopeBasePass]]],
        fused_ops: Mapping[str, FusedOpDef],
        options: FusionOptions | None = None,
    ) -> None:
        self.specs = [_spec(p) for p in passes]
        self.fused_ops = dict(fused_ops)
        self.options = options or FusionOptions()
        aliases = {a: s.name for s in self.specs for a in s.aliases}  # the reference's names too
        names = [aliases.get(n, n) for n in self.options.enable_scope_fusion_passes]
        check_pass_names(names, [s.name for s in self.specs])
        wanted = set(names)
        self.enabled = [s for s in self.specs if s.general or s.name in wanted]

    def run(self, graph_def: "GraphDef") -> FusionOutcome:
        """Fuse ``graph_def`` in place with the scope passes alone and return it with the report."""
        return FusionPipeline([self], self.fused_ops, self.options).run(graph_def)

    # ------------------------------------------------------------------ engine
    def active(self) -> bool:
        return bool(self.enabled)

    def skipped(self, report: FusionReport) -> None:
        """No scope pass is enabled: nothing to record."""

    def propose(self, context: StageContext) -> list[FusionCandidate]:
        t0 = time.perf_counter()
        scope_graph = ScopeGraph(context.index, same_shape=shape_rules(self.fused_ops))
        context.report.stage_seconds["scope.tree"] = time.perf_counter() - t0
        candidates: list[FusionCandidate] = []
        try:
            for k, spec in enumerate(self.enabled):
                context.say(f"scope stage: {spec.name} ({k + 1} of {len(self.enabled)}, {len(context.index):,} nodes)")
                pr = context.pass_report(PassReport(spec.name, spec.general, spec.origin))
                started = time.perf_counter()
                changed: list[str] = []
                with contained(spec.name, spec.origin, pr, self.options.strict, self.options.pass_timeout, changed):
                    with scope_graph.watch(changed):
                        found = self._run_pass(k, spec, scope_graph, pr, context.report.warnings)
                    reject_if_changed(spec.name, spec.origin, changed)
                    candidates.extend(found)
                pr.seconds = time.perf_counter() - started
        finally:
            scope_graph.close()
            scope_graph.note_tensorflow_shapes(context.report.warnings)
        return candidates

    def _run_pass(self, order: int, spec: PassSpec, scope_graph: ScopeGraph,
                  pr: PassReport, warnings: list[str]) -> list[FusionCandidate]:
        instance = spec.cls()
        stats = MatchStats()
        scope_graph.tree.clear_labels()  # labels of earlier passes are theirs only
        pattern_sets = check_pattern_sets(instance.define_patterns())
        matches = match_pattern_sets(scope_graph.tree, pattern_sets, stats)
        scope_graph.matches[spec.name] = matches
        pr.matched_scopes = [s.name for s in matches]
        pr.candidates = stats.candidates
        candidates = []
        groups = instance.last_match_scopes_and_ops(scope_graph)
        # a scope the pass made a result of (one its patterns do not name, e.g. a cell's step
        # scope) is fused or refused with its reason, no near miss
        stats.finish([*matches, *(s for group in groups for s in group.scopes)])
        pr.near_miss_count = stats.near_miss_count
        pr.near_misses = [Refusal(name, reason, [name]) for name, reason in stats.near_misses]
        pr.results = len(groups)
        left = _without_result(matches, groups)
        pr.matches = len(groups) + len(left)
        for scope in left:  # matched, but the pass made no result of it: say so
            pr.refuse(scope.name, "the pass made no result of this match", [scope.name])
        older = False  # the pass refused through result.reject (said once)
        for j, group in enumerate(groups):
            result = FusionScopesResult(instance.result_name(group.scopes), group.scopes, group.nodes, group.part)
            try:
                instance.generate_fusion_result(group.scopes, result)
            except Refused as why:
                pr.refuse(result.name, f"rejected by the pass: {why.reason}", [s.name for s in result.scopes],
                          why.nodes)
                continue
            scopes = [s.name for s in result.scopes]
            if result.rejected:
                if not older:
                    older = True
                    warn_older_spelling(spec.name, "result.reject()")
                pr.refuse(result.name, f"rejected by the pass: {result.rejection}", scopes)
                continue
            try:
                candidates.append(to_candidate(scope_graph.index, result, pass_name=spec.name,
                                               order=order * ORDER_STRIDE + j))
            except Refused as why:
                pr.refuse(result.name, why.reason, scopes, why.nodes)
        if candidates:
            _check_may_fuse(instance, spec, scope_graph, len(candidates), warnings)
        return candidates


def _check_may_fuse(instance: ScopeBasePass, spec: PassSpec, scope_graph: ScopeGraph, found: int,
                    warnings: list[str]) -> None:
    """A pass that made results where its ``may_fuse`` says it cannot would be left out of hints
    wrongly: say so."""
    op_types = scope_graph.index.op_types()
    try:
        says = instance.may_fuse(op_types)
    except Exception as exc:  # noqa: BLE001 - the pass's own bug: it costs the hints, not the run
        text = " ".join(str(exc).split()) or "(no message)"
        warnings.append(f"pass {spec.name} ({spec.origin}): its may_fuse() raised {type(exc).__name__}: {text}; "
                        "hints try it always")
        return
    if not says:
        warnings.append(f"pass {spec.name} ({spec.origin}) made {found} result(s) in a graph whose op types its "
                        "may_fuse() says it cannot fuse: hints would leave it out; its may_fuse() is wrong")


def _without_result(matches: Sequence[Scope], groups: Sequence[ScopesResult]) -> list[Scope]:
    """The matched scopes no result accounts for: none of the results' scopes is the scope,
    lies inside it or holds it (a pass may turn a matched scope into a tighter or wider one)."""
    in_result = [s._k for group in groups for s in group.scopes]
    if not matches or not in_result:
        return list(matches)
    layout = matches[0].tree.layout
    at = np.asarray(in_result, dtype=np.int64)
    below = layout.range_counts(at)  # results in each subtree, the scope itself included
    covered = layout.covered(at)  # a result's scope or inside one
    own = set(in_result)
    return [m for m in matches if not covered[m._k] and below[m._k] - (m._k in own) == 0]
