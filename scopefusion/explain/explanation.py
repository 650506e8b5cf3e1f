"""``explain``: every registered pass's verdict on one scope or node of a model.

The model is fused once with every pass on (scope passes enabled, graph passes on whatever a
switch file says; the switch file only shows in each pass's default state), and each pass's
verdict at the place is read from that run: fused, refused (why), dropped in a conflict (to
what), a near miss, or no match; with what it produced there (the
fused op, its attributes, the tensors it reads and the ones it replaces).  Then, on the graph as
given, each scope pass's patterns are checked at the place feature by feature (wanted / found),
and each graph pass's patterns are tried with their root at the place's nodes (the step that fails).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..core.graph.model_input import ModelLike, as_model
from ..core.errors import ScopeFusionError
from ..core.fusion.candidate import FusionCandidate
from ..core.fusion.fused_ops import FusedOpDef
from ..core.fusion.options import FusionOptions, check_pass_names
from ..core.fusion.pipeline import FusionPipeline, StageContext
from ..core.fusion.report import FusionReport, PassReport
from ..core.graph.index import GraphIndex
from ..core.graph.matching import MatchFailure, match_at
from ..core.graph.view import GraphView
from ..core.graph.vocabulary import dtype_name, tensor_name
from ..core.graph_fusion.base_pass import FUSION_TYPES
from ..core.graph_fusion.engine import GraphFusionEngine, checked_patterns
from ..core.graph_fusion.switch import OFF_BY_DEFAULT, FusionSwitch
from ..core.scope.feature_checks import PatternCheck, check_patterns
from ..core.scope.pass_manager import ScopePassManager
from ..core.scope.patterns import attr_text, check_pattern_sets
from ..core.scope.scope_graph import ScopeGraph
from ..plugins.registry import Registry, load_registry

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

#: Nodes of a scope a graph pattern is tried at, at most (the attempts that got furthest are kept).
ROOTS_TRIED = 200


@dataclass
class Produced:
    """A fused op a pass made at (or around) the place."""

    name: str
    type: str
    attrs: dict[str, str]
    inputs: list[str]  # per fused input, the tensor feeding it
    outputs: list[str]  # per fused output, the tensors of the graph it replaces


@dataclass
class Attempt:
    """A graph pattern tried with its root at one node: ``failure`` is empty when it matched."""

    pattern: str
    node: str
    failure: str
    progress: int = 0


@dataclass
class PassVerdict:
    name: str
    engine: str  # "scope" or "graph"
    default: str  # how a plain run treats it: "general", "needs enabling", "on", "off (...)"
    verdict: str  # "fused", "refused", "dropped", "near miss", "no match", "failed"
    reason: str = ""
    patterns: list[PatternCheck] = field(default_factory=list)  # scope passes
    attempts: list[Attempt] = field(default_factory=list)  # graph passes
    produced: list[Produced] = field(default_factory=list)


@dataclass
class Explanation:
    place: str
    kind: str  # "scope" or "node"
    scope: str  # the scope checked (a node's own scope)
    verdicts: list[PassVerdict]


def _within(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/")


def _touches(names: Sequence[str], place: str) -> bool:
    return any(_within(n, place) or _within(place, n) for n in names)


def resolve_place(graph_def: "GraphDef", place: str) -> tuple[str, str]:
    """``(kind, scope)`` of ``place``, a node or scope name; an error with close matches otherwise."""
    nodes = {n.name for n in graph_def.node}
    if place in nodes:
        return "node", place.rsplit("/", 1)[0] if "/" in place else ""
    scopes = {name.rsplit("/", k)[0] for name in nodes for k in range(1, name.count("/") + 1)}
    if place in scopes:
        return "scope", place
    close = difflib.get_close_matches(place, sorted(nodes | scopes), n=5, cutoff=0.6)
    last = place.rsplit("/", 1)[-1]
    same_end = sorted(n for n in nodes | scopes if n.rsplit("/", 1)[-1] == last)[:5]
    hint = list(dict.fromkeys([*same_end, *close]))[:5]
    raise ScopeFusionError(f"no scope or node named {place!r} in the model" +
                           (f"; close matches: {', '.join(repr(h) for h in hint)}" if hint else ""))


class _Recording:
    """An engine that passes its candidates on and keeps those at the place, by tensor names."""

    def __init__(self, engine: Any, place: str, produced: dict[str, list[Produced]],
                 fused_ops: Mapping[str, FusedOpDef]) -> None:
        self.engine, self.place, self.produced, self.fused_ops = engine, place, produced, fused_ops
        self.stage = engine.stage

    def active(self) -> bool:
        return bool(self.engine.active())

    def skipped(self, report: FusionReport) -> None:
        self.engine.skipped(report)

    def propose(self, context: StageContext) -> list[FusionCandidate]:
        candidates = self.engine.propose(context)
        names = context.index.names
        for c in candidates:
            if _touches([*c.where, c.name], self.place) or any(_within(names[m], self.place) for m in c.members):
                outputs: dict[int, list[str]] = {}
                for (node, port), k in c.outputs.items():
                    outputs.setdefault(k, []).append(tensor_name(names[node], port))
                self.produced.setdefault(c.pass_name, []).append(Produced(
                    c.name, c.type,
                    {k: _attr_text(v, _attr_type(self.fused_ops, c.type, k)) for k, v in c.attrs.items()},
                    [tensor_name(names[c.inputs[k][0]], c.inputs[k][1]) if k in c.inputs else "-"
                     for k in range(c.num_inputs())],
                    [", ".join(outputs.get(k, ["-"])) for k in range(c.num_outputs())]))
        return candidates


def _attr_text(value: Any, attr_type: str) -> str:
    if hasattr(value, "WhichOneof"):  # an AttrValue
        return attr_text(value)
    if attr_type == "type" and isinstance(value, int):
        return dtype_name(value)
    if isinstance(value, float):
        return f"{value:.7g}"
    if attr_type == "list(type)" and isinstance(value, (list, tuple)):
        return "[" + ", ".join(dtype_name(v) for v in value) + "]"
    return repr(value)


def _attr_type(fused_ops: Mapping[str, FusedOpDef], op: str, name: str) -> str:
    definition = fused_ops.get(op)
    attr = definition.attr_def(name) if definition is not None else None
    return attr.type if attr is not None else ""


def _default_state(spec: Any, switch: FusionSwitch) -> str:
    if spec.engine == "scope":
        return "general" if spec.general else "needs --enable_scope_fusion_passes"
    decision = switch.decide(spec.name, spec.fusion_type, spec.forbidden_close, spec.default_on)
    if decision.source == OFF_BY_DEFAULT:
        return "off (off by default: the switch file turns it on)"
    return ("on" if decision.on else "off") + ("" if decision.source == "default" else f" (switch file: "
                                                                                     f"{decision.source})")


def _verdict(p: PassReport, place: str) -> tuple[str, str]:
    if p.error:
        return "failed", p.error
    for f in p.fused:
        if _touches([f.name, *f.scopes], place):
            return "fused", f"as {f.type} {f.name!r}"
    for r in p.refused:
        if _touches([r.name, *r.scopes], place):
            return "refused", _at(r.name, place) + r.reason
    for r in p.dropped:
        if _touches([r.name, *r.scopes], place):
            return "dropped", _at(r.name, place) + f"{r.reason}; kept {r.winner}"
    for r in p.near_misses:
        if _touches([r.name], place):
            return "near miss", _at(r.name, place) + r.reason
    return "no match", ""


def _at(name: str, place: str) -> str:
    return "" if name == place else f"at {name!r}: "


def _graph_attempts(spec: Any, index: GraphIndex, nodes: list[int]) -> list[Attempt]:
    """Each pattern of a graph pass tried at the place's nodes of its root types: the matches, else
    the attempt that got furthest (or why no node could be a root)."""
    view = GraphView(index)
    out = []
    for pattern in checked_patterns(spec.cls().define_patterns()):
        roots = [i for i in nodes if index.ops[i] in pattern.root_types][:ROOTS_TRIED]
        if not roots:
            out.append(Attempt(pattern.name, "-", f"no node here is a root: {' or '.join(pattern.root_types)} "
                                                  "wanted"))
            continue
        tries = []
        for root in roots:
            try:
                match_at(view, pattern, root)
                tries.append(Attempt(pattern.name, index.names[root], "", 1 << 30))
            except MatchFailure as why:
                tries.append(Attempt(pattern.name, index.names[root], str(why), why.progress))
        matched = [t for t in tries if not t.failure]
        out.extend(matched or [max(tries, key=lambda t: t.progress)])
    return out


def explain(model: ModelLike, place: str, *, pass_name: str | None = None, registry: Registry | None = None,
            signature: str | None = None, switch: FusionSwitch | None = None) -> Explanation:
    """Every registered pass's verdict on ``place`` (a scope or node name of ``model``); with
    ``pass_name``, that pass's only."""
    registry = registry or load_registry()
    switch = switch or FusionSwitch.default()
    specs = [*registry.passes, *registry.graph_passes]
    if pass_name is not None:
        check_pass_names([pass_name], [s.name for s in specs])
        specs = [s for s in specs if s.name == pass_name]
    loaded = as_model(model, signature)
    original = type(loaded.graph_def)()
    original.CopyFrom(loaded.graph_def)
    kind, scope_name = resolve_place(original, place)
    report, produced = _run_everything(loaded.graph_def, registry, specs, place)
    index = GraphIndex(original)
    scope_graph = ScopeGraph(index)
    scope = scope_graph.scope(scope_name) if scope_name else scope_graph.root
    in_place = [index.index[place]] if kind == "node" else \
        [i for i, n in enumerate(index.names) if _within(n, place)]
    verdicts = []
    try:
        for spec in specs:
            ran = [p for p in report.passes if p.name == spec.name]
            verdict, reason = _verdict(ran[0], place) if ran else ("not run", "off by default: the switch file turns "
                                                                                "it on")
            v = PassVerdict(spec.name, spec.engine, _default_state(spec, switch), verdict, reason,
                            produced=produced.get(spec.name, []))
            if spec.engine == "scope" and scope is not None:
                v.patterns = check_patterns(scope.tree, check_pattern_sets(spec.cls().define_patterns()), scope)
            elif spec.engine == "graph":
                v.attempts = _graph_attempts(spec, index, in_place)
            verdicts.append(v)
    finally:
        scope_graph.close()
    return Explanation(place, kind, scope_name, verdicts)


def _run_everything(graph_def: "GraphDef", registry: Registry, specs: Sequence[Any],
                    place: str) -> tuple[FusionReport, dict[str, list[Produced]]]:
    """Fuse with every pass of ``specs`` on (scope passes enabled, graph passes on whatever a switch
    file says); the report and what each pass produced at ``place``."""
    scope_specs = [s for s in specs if s.engine == "scope"]
    graph_specs = [s for s in specs if s.engine == "graph"]
    options = FusionOptions(enable_scope_fusion_passes=[s.name for s in scope_specs if not s.general])
    produced: dict[str, list[Produced]] = {}
    ops = registry.fused_ops
    engines: list[Any] = [_Recording(ScopePassManager(scope_specs, ops, options), place, produced, ops)]
    for fusion_type in FUSION_TYPES:
        engines.append(_Recording(GraphFusionEngine(graph_specs, ops, options, FusionSwitch.default(), fusion_type),
                                  place, produced, ops))
    return FusionPipeline(engines, ops, options).run(graph_def).report, produced
