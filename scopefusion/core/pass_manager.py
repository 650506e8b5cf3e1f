"""The :class:`ScopePassManager`: creates the enabled passes, matches them in
registration order, checks and filters their results and applies the
survivors in one rewrite."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence, Union

from .base_pass import PassSpec, ScopeBasePass
from .conflicts import resolve_conflicts
from .errors import GraphValidationError, OptionError, PassError, ScopeFusionError
from .fused_ops import FusedOpDef
from .graph_index import CONTROL, GraphIndex, no_gc, parse_input
from .matcher import MatchStats, match_pattern_sets
from .patterns import check_pattern_sets
from .options import FusionOptions, check_pass_names
from .cycles import find_cycle, plans_on_cycle
from .plan import FusionPlan, Refused, make_plan, new_node_names
from .report import FusedRecord, FusionReport, PassReport, Refusal
from .results import FusionScopesResult
from .rewrite import apply_plans, check_rewrite
from .scope_graph import ScopeGraph

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

#: Sinks of these op types are not treated as graph outputs by default.
NON_OUTPUT_SINKS = frozenset({"Const", "NoOp", "Placeholder", "Assert", "VarHandleOp", "VariableV2"})


@dataclass
class FusionOutcome:
    """The rewritten graph and the report of the run."""

    graph_def: "GraphDef"
    report: FusionReport


def _spec(entry: Union[PassSpec, type[ScopeBasePass]]) -> PassSpec:
    return entry if isinstance(entry, PassSpec) else PassSpec(entry)


class ScopePassManager:
    """Runs the enabled passes over a graph.

    ``passes`` are in registration order; general passes always run, the
    others only when named in ``options.enable_scope_fusion_passes``.
    """

    def __init__(
        self,
        passes: Sequence[Union[PassSpec, type[ScopeBasePass]]],
        fused_ops: Mapping[str, FusedOpDef],
        options: FusionOptions | None = None,
    ) -> None:
        self.specs = [_spec(p) for p in passes]
        self.fused_ops = dict(fused_ops)
        self.options = options or FusionOptions()
        known = [s.name for s in self.specs]
        check_pass_names(self.options.enable_scope_fusion_passes, known)
        wanted = set(self.options.enable_scope_fusion_passes)
        self.enabled = [s for s in self.specs if s.general or s.name in wanted]

    # ------------------------------------------------------------------ outputs
    def _graph_outputs(self, index: GraphIndex) -> dict[int, list[int]]:
        outputs: dict[int, list[int]] = {}
        if self.options.outputs:
            missing = []
            for tensor in self.options.outputs:
                name, port = parse_input(tensor.lstrip("^"))
                i = index.index.get(name)
                if i is None or port == CONTROL:
                    missing.append(tensor)
                    continue
                outputs.setdefault(i, [])
                if port not in outputs[i]:
                    outputs[i].append(port)
            if missing:
                raise OptionError(f"output tensor(s) not in the graph: {', '.join(missing)}")
            return outputs
        for i in index.sinks():
            if index.ops[i] not in NON_OUTPUT_SINKS:
                outputs[i] = [0]
        return outputs

    # ---------------------------------------------------------------------- run
    def run(self, graph_def: "GraphDef") -> FusionOutcome:
        """Fuse ``graph_def`` in place and return it with the report."""
        # Indexing creates millions of small containers; pausing the cyclic
        # collector for the run saves its repeated full sweeps over them.
        with no_gc():
            return self._run(graph_def)

    def _run(self, graph_def: "GraphDef") -> FusionOutcome:
        report = FusionReport()
        stages = report.stage_seconds
        t0 = time.perf_counter()
        index = GraphIndex(graph_def)
        report.nodes_before = len(index)
        stages["index"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        scope_graph = ScopeGraph(index)
        graph_outputs = self._graph_outputs(index)
        report.outputs = [
            index.names[i] + ("" if p == 0 else f":{p}") for i, ports in graph_outputs.items() for p in ports
        ]
        stages["scope_graph"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        plans: list[FusionPlan] = []
        reports: dict[str, PassReport] = {}
        for k, spec in enumerate(self.enabled):
            pr = PassReport(spec.name, spec.general, spec.origin)
            report.passes.append(pr)
            reports[spec.name] = pr
            started = time.perf_counter()
            try:
                plans.extend(self._run_pass(k, spec, scope_graph, graph_outputs, pr))
            except Exception as exc:  # a pass's own bug (whatever it raised): name it, skip it
                message = f"pass {spec.name} ({spec.origin}) raised {type(exc).__name__}: {exc}"
                if self.options.strict:
                    raise PassError(message) from exc
                pr.error = message
                plans = [p for p in plans if p.pass_name != spec.name]
            pr.seconds = time.perf_counter() - started
        stages["match"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        accepted = self._select(index, plans, reports)
        counts = apply_plans(index, accepted)
        for plan in accepted:
            res = plan.result
            reports[plan.pass_name].fused.append(FusedRecord(
                name=res.name, type=res.type, scopes=[s.name for s in res.scopes],
                removed_nodes=len(plan.removed), kept_nodes=len(plan.kept),
                inner_nodes=len(res.inner_nodes),
            ))
        stages["apply"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        try:
            check_rewrite(graph_def, index, accepted, counts, full=self.options.validate_output)
        except GraphValidationError as exc:  # a bug here, never the user's
            raise ScopeFusionError(f"internal error: the fused graph is invalid: {exc}") from exc
        report.nodes_after = len(graph_def.node)
        stages["validate"] = time.perf_counter() - t0
        scope_graph.close()
        return FusionOutcome(graph_def, report)

    def _run_pass(
        self, order: int, spec: PassSpec, scope_graph: ScopeGraph,
        graph_outputs: Mapping[int, Sequence[int]], pr: PassReport,
    ) -> list[FusionPlan]:
        instance = spec.cls()
        stats = MatchStats()
        scope_graph.tree.clear_labels()  # labels of earlier passes are theirs only
        pattern_sets = check_pattern_sets(instance.define_patterns())
        matches = match_pattern_sets(scope_graph.tree, pattern_sets, stats)
        stats.finish(matches)
        scope_graph.matches[spec.name] = matches
        pr.matched_scopes = [s.name for s in matches]
        pr.candidates = stats.candidates
        pr.near_miss_count = stats.near_miss_count
        pr.near_misses = [Refusal(name, reason, [name]) for name, reason in stats.near_misses]
        plans = []
        groups = instance.last_match_scopes_and_ops(scope_graph)
        pr.results = len(groups)
        for j, group in enumerate(groups):
            result = FusionScopesResult(instance.result_name(group.scopes), group.scopes, group.nodes)
            instance.generate_fusion_result(group.scopes, result)
            scopes = [s.name for s in result.scopes]
            if result.rejected:
                pr.refuse(result.name, f"rejected by the pass: {result.rejection}", scopes)
                continue
            try:
                plans.append(make_plan(
                    scope_graph.index, result, pass_name=spec.name, order=order * 1_000_000 + j,
                    fused_ops=self.fused_ops, graph_outputs=graph_outputs,
                ))
            except Refused as why:
                pr.refuse(result.name, str(why), scopes)
        return plans

    def _select(
        self, index: GraphIndex, plans: list[FusionPlan], reports: Mapping[str, PassReport]
    ) -> list[FusionPlan]:
        def drop(plan: FusionPlan, reason: str) -> None:
            reports[plan.pass_name].refuse(plan.name, reason, [s.name for s in plan.result.scopes])

        # A result that cannot be applied on its own (not convex) is refused
        # before conflicts are resolved, so that it cannot push aside a valid
        # result it contains or overlaps.
        applicable: list[FusionPlan] = []
        for plan in plans:
            cycle = find_cycle(index, plan)
            if cycle is not None:
                drop(plan, cycle)
            else:
                applicable.append(plan)
        accepted: list[FusionPlan] = []
        names: dict[str, FusionPlan] = {}
        for plan in resolve_conflicts(applicable, drop):
            clash = next((n for n in new_node_names(plan.result) if n in names), None)
            if clash is not None:
                drop(plan, f"new node name {clash!r} is also produced by {names[clash].name!r}")
                continue
            for n in new_node_names(plan.result):
                names[n] = plan
            accepted.append(plan)
        while len(accepted) > 1:
            looped = plans_on_cycle(index, accepted)
            if not looped:
                break
            last = max(looped, key=lambda p: p.order)
            others = ", ".join(repr(p.name) for p in looped if p is not last)
            drop(last, f"fusing it together with {others} would create a cycle")
            accepted.remove(last)
        return accepted
