"""The graph fusion engine: runs graph passes of one switch-file section over a stage's graph.

Each pass runs once, in priority order (registration order unless the switch
file's Priority section says otherwise).  Its patterns are tried only at nodes of
their root op types, looked up in the index; every match is collected first, then
each is handed to the pass's ``fusion``; the answers become fusion candidates
for the shared pipeline.  A pass the switch file turns off does not run (one
flagged ``forbidden_close`` runs anyway, and the report says so); nor, when the
graph is trained, does a pass whose class sets ``training_safe = False``.  A pass off
by default (``default_on = False``) that the file does not turn on neither runs nor
appears in the run's report.
"""
from __future__ import annotations

import time
from functools import partial
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..fusion.candidate import FusionCandidate, Tensor
from ..fusion.fused_ops import FusedOpDef, shape_rules
from ..fusion.op_checks import attrs_key
from ..fusion.options import FusionOptions
from ..fusion.pass_spec import PassSpec
from ..fusion.pipeline import StageContext, contained, reject_if_changed
from ..fusion.refusal import Refused, warn_older_spelling
from ..fusion.young_cycles import young_cycles_collected
from ..fusion.report import FusionReport, PassReport, Refusal
from ..graph.matching import MatchFailure, PatternMatch, find_matches
from ..graph.pattern import OpPattern
from ..graph.view import GraphView
from ..graph.vocabulary import parse_input
from .base_pass import FusedOp, NotFused
from .fusion_pattern import FusionPattern
from .switch import OFF_BY_DEFAULT, FusionSwitch, SwitchDecision

#: Default priorities, as the reference counts them: plugin passes from 6000, built-ins from 8000.
CUSTOM_PRIORITY_BASE = 6000
BUILTIN_PRIORITY_BASE = 8000
ORDER_STRIDE = 1_000_000
#: A failed match is a near miss when it matched at least this many ops, and half the pattern.
NEAR_MISS_MIN_OPS = 2
#: What the report says of a pass skipped because it is not safe for training.
TRAINING_SKIP = "off (training: the pass is not safe for training)"


@dataclass
class _Scheduled:
    spec: PassSpec
    decision: SwitchDecision


def default_priorities(specs: Sequence[PassSpec]) -> list[int]:
    """Each pass's default priority: built-ins (and plugin passes that replaced one) count up
    from 8000 in registration order, other plugin passes from 6000."""
    out = []
    custom = builtin = 0
    for spec in specs:
        if spec.origin == "built-in" or spec.replaces:
            out.append(BUILTIN_PRIORITY_BASE + builtin)
            builtin += 1
        else:
            out.append(CUSTOM_PRIORITY_BASE + custom)
            custom += 1
    return out


class GraphFusionEngine:
    """The graph passes of one section (``GraphFusion`` or ``UBFusion``)."""

    def __init__(self, specs: Sequence[PassSpec], fused_ops: Mapping[str, FusedOpDef],
                 options: FusionOptions | None = None, switch: FusionSwitch | None = None,
                 fusion_type: str = "GraphFusion") -> None:
        self.fusion_type = fusion_type
        self.stage = "graph" if fusion_type == "GraphFusion" else "ub"
        self.fused_ops = dict(fused_ops)
        self.shape_rules = shape_rules(self.fused_ops)
        self.options = options or FusionOptions()
        self.switch = switch or FusionSwitch.default()
        mine = [s for s in specs if s.engine == "graph" and s.fusion_type == fusion_type]
        priorities = dict(zip((s.name for s in mine), default_priorities(mine), strict=True))
        by_name = {s.name: s for s in mine}
        ordered = self.switch.order(fusion_type, [(s.name, priorities[s.name]) for s in mine])
        self.scheduled = [
            _Scheduled(by_name[n], self.switch.decide(n, fusion_type, by_name[n].forbidden_close,
                                                           by_name[n].default_on)) for n in ordered
        ]

    def active(self) -> bool:
        return any(s.decision.on for s in self.scheduled)

    def _pass_report(self, item: _Scheduled) -> PassReport:
        return PassReport(item.spec.name, True, item.spec.origin, engine="graph", fusion_type=self.fusion_type,
                          switch=_switch_text(item.decision))

    def skipped(self, report: FusionReport) -> None:
        """Every pass of the section is switched off: the report still lists them (not those off by
        default, which the report leaves out unless the switch file turns them on)."""
        report.passes.extend(self._pass_report(item) for item in self.scheduled
                             if item.decision.source != OFF_BY_DEFAULT)

    def propose(self, context: StageContext) -> list[FusionCandidate]:
        # the view and the matchers are left in reference cycles that hold the stage's index:
        # collected here, among the stage's own objects only, not with the whole run's at its end
        # (in a pipeline's stage, whose own block collects them when the stage ends, nothing here)
        with young_cycles_collected():
            return self._propose(context)

    def _propose(self, context: StageContext) -> list[FusionCandidate]:
        view = GraphView(context.index, same_shape=self.shape_rules)
        candidates: list[FusionCandidate] = []
        for k, item in enumerate(self.scheduled):
            spec = item.spec
            if item.decision.source == OFF_BY_DEFAULT:  # not asked for: not part of this run's report
                continue
            pr = context.pass_report(self._pass_report(item))
            if not item.decision.on:
                continue
            if self.options.training and not getattr(spec.cls, "training_safe", True):
                pr.switch = TRAINING_SKIP
                continue
            context.say(f"{self.stage} stage: {spec.name} ({k + 1} of {len(self.scheduled)}, "
                        f"{len(context.index):,} nodes)")
            started = time.perf_counter()
            changed: list[str] = []
            with contained(spec.name, spec.origin, pr, self.options.strict, self.options.pass_timeout, changed):
                with view.watch(changed):
                    found = self._run_pass(k, spec, view, pr)
                reject_if_changed(spec.name, spec.origin, changed)
                candidates.extend(found)
            pr.seconds = time.perf_counter() - started
        view.note_tensorflow_shapes(context.report.warnings)
        return candidates

    def _run_pass(self, order: int, spec: PassSpec, view: GraphView, pr: PassReport) -> list[FusionCandidate]:
        instance = spec.cls()
        patterns = _patterns_of(spec, instance)
        matches: list[PatternMatch] = []
        misses = _NearMisses(view)
        matched: set[int] = set()  # a root an earlier pattern matched is that match (and tried no more)
        for pattern in patterns:
            found = find_matches(view, pattern, partial(misses.add, pattern), skip=matched)
            matches.extend(found)
            matched.update(m.root for m in found)
        matches = _outermost(matches)
        misses.settle({m.root for m in matches})
        pr.candidates = len(misses.tried | {m.root for m in matches})
        pr.match_times = pr.matches = len(matches)
        pr.matched_scopes = [m.root_name for m in matches]
        pr.near_miss_count = len(misses.kept)
        pr.near_misses = misses.kept  # all of them: the pipeline drops those on parts other passes fused, then cuts
        candidates = []
        attr_sets: dict[Any, dict[str, Any]] = {}
        older = False  # the pass refused through NotFused (said once)
        for j, match in enumerate(matches):
            matches[j] = None  # type: ignore[call-overload]  # each match goes once its candidate is made
            try:
                answer = instance.fusion(match)
            except Refused as why:
                pr.refuse(match.root_name, f"rejected by the pass: {why.reason}", [match.root_name], why.nodes)
                continue
            if isinstance(answer, NotFused):
                if not older:
                    older = True
                    warn_older_spelling(spec.name, "fusion() returning NotFused")
                pr.refuse(match.root_name, f"rejected by the pass: {answer.reason}", [match.root_name])
                continue
            if not isinstance(answer, FusedOp):
                raise TypeError(f"fusion() must return a FusedOp or NotFused, not {type(answer).__name__}")
            try:
                candidates.append(to_candidate(match, answer, pass_name=spec.name, order=order * ORDER_STRIDE + j,
                                               attr_sets=attr_sets))
            except Refused as why:
                pr.refuse(match.root_name, why.reason, [match.root_name], why.nodes)
        return candidates


def _switch_text(decision: SwitchDecision) -> str:
    if decision.overridden:
        return "on (forbidden_close: the switch file's off is overridden)"
    return ("on" if decision.on else "off") + ("" if decision.source == "default" else f" ({decision.source})")


#: The checked patterns of built-in passes, per class and ``define_patterns`` function: made once per
#: process, so that what matching works out once per pattern (compiled steps, first looks, required
#: op types) is not worked out again on every run.
_BUILT_IN_PATTERNS: dict[tuple[type, Any], list[OpPattern]] = {}


def _patterns_of(spec: PassSpec, instance: Any) -> list[OpPattern]:
    """``instance.define_patterns()``, checked; a built-in pass's once per process (patterns are
    immutable), a plugin's on every run."""
    if spec.origin != "built-in":
        return checked_patterns(instance.define_patterns())
    key = (spec.cls, getattr(spec.cls, "define_patterns", None))
    known = _BUILT_IN_PATTERNS.get(key)
    if known is None:
        known = _BUILT_IN_PATTERNS[key] = checked_patterns(instance.define_patterns())
    return list(known)


def checked_patterns(value: Any) -> list[OpPattern]:
    """``define_patterns()``'s answer as OpPatterns (FusionPatterns are built)."""
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"define_patterns() must return a list of OpPattern or FusionPattern, "
                        f"got {type(value).__name__}")
    out = []
    for k, item in enumerate(value):
        if isinstance(item, FusionPattern):
            item = item.build()
        if not isinstance(item, OpPattern):
            raise TypeError(f"define_patterns() item {k} is a {type(item).__name__}, not an OpPattern "
                            "or FusionPattern")
        out.append(item)
    return out


def _outermost(matches: Sequence[PatternMatch]) -> list[PatternMatch]:
    """Drop a match whose nodes all lie inside one bigger match of the same pass (a pattern
    that also matches the inner part of a larger form): the outermost match wins, as with
    scopes, and the inner one is no match of its own."""
    owner: dict[int, int] = {}
    kept: set[int] = set()
    for k, match in sorted(enumerate(matches), key=lambda item: -len(item[1].members)):
        members = match.members
        if owner.keys().isdisjoint(members):  # no node owned yet: kept, and owner of them all
            kept.add(k)
            for i in members:
                owner[i] = k
            continue
        if _inside_one(members, owner):
            continue
        kept.add(k)
        for i in members:
            owner.setdefault(i, k)
    return [m for k, m in enumerate(matches) if k in kept]


def _inside_one(members: frozenset[int], owner: dict[int, int]) -> bool:
    """Whether every node of ``members`` (at least one) has one and the same owner."""
    first = None
    for i in members:
        known = owner.get(i)
        if known is None or (first is not None and known != first):
            return False
        first = known
    return first is not None


class _NearMisses:
    """Failed matches that got far (at least half the pattern): per root node the one that
    got furthest, once the pass's matches are known (a root some pattern matched is none)."""

    def __init__(self, view: GraphView) -> None:
        self.view = view
        self.kept: list[Refusal] = []
        self.tried: set[int] = set()
        self._best: dict[int, tuple[int, str]] = {}

    def add(self, pattern: OpPattern, root: int, why: MatchFailure) -> None:
        """A failed match: kept when it got through half the pattern's ops (at least
        NEAR_MISS_MIN_OPS; the pattern's size is computed only then)."""
        self.tried.add(root)
        if why.progress < NEAR_MISS_MIN_OPS or why.progress < (pattern.op_count() + 1) // 2:
            return
        best = self._best.get(root)
        if best is None or why.progress > best[0]:
            self._best[root] = (why.progress, f"pattern {pattern.name}: {why}")

    def settle(self, matched: set[int]) -> None:
        names = self.view.index.names
        for root in sorted(self._best):
            if root not in matched:
                self.kept.append(Refusal(names[root], self._best[root][1], [names[root]]))


def _tensor(match: PatternMatch, ref: str) -> Tensor:
    """A tensor of the match named by a variable, a label, or ``label:port``."""
    tensor = match.tensors.get(ref)
    if tensor is not None:
        return tensor
    node = match.nodes.get(ref)
    if node is not None:
        return node, 0
    label, port = parse_input(ref)
    if label in match.nodes and port >= 0:
        return match.nodes[label], port
    known = sorted(set(match.tensors) | set(match.nodes))
    raise Refused(f"the fused op names {ref!r}, which is no label or variable of the match "
                  f"(known: {', '.join(known)})")


def _inputs(match: PatternMatch, refs: Sequence[str]) -> dict[int, Tensor]:
    """The tensor of each fused input (:func:`_tensor`; a variable or a label read directly)."""
    tensors, nodes = match.tensors, match.nodes
    out: dict[int, Tensor] = {}
    for i, ref in enumerate(refs):
        tensor = tensors.get(ref)
        if tensor is None:
            node = nodes.get(ref)
            tensor = _tensor(match, ref) if node is None else (node, 0)
        out[i] = tensor
    return out


def _shared_attrs(attrs: Mapping[str, Any], attr_sets: dict[Any, dict[str, Any]] | None) -> dict[str, Any]:
    """A dict of ``attrs``; with ``attr_sets``, the one already made for equal attributes (a pass's
    candidates mostly share a few attribute sets, and nothing changes a candidate's).  Equal means
    :func:`.attrs_key` equal: the same names, Python types and values of plain scalars (1 is not
    True, -0.0 not 0.0); any other value (a list ...) gets a dict of its own."""
    key = None if attr_sets is None else attrs_key("", attrs)
    if attr_sets is None or key is None:
        return dict(attrs)
    shared = attr_sets.get(key)
    if shared is None:
        shared = attr_sets[key] = dict(attrs)
    return shared


def to_candidate(match: PatternMatch, fused: FusedOp, *, pass_name: str, order: int,
                 attr_sets: dict[Any, dict[str, Any]] | None = None) -> FusionCandidate:
    """The candidate a graph pass's answer describes; raises :class:`Refused`.  ``attr_sets``: the
    attribute dicts of the pass's earlier candidates, by content, which an equal set reuses."""
    output_refs = list(fused.outputs) or list(match.pattern.outputs)
    outputs: dict[Tensor, int] = {}
    members = match.members | fused.absorbed if fused.absorbed else match.members
    for k, ref in enumerate(output_refs):
        tensor = _tensor(match, ref)
        if tensor[0] not in members:
            raise Refused(f"fused output {k} ({ref!r}) is not produced inside the match")
        outputs[tensor] = k
    if not output_refs:  # the root's output
        outputs[(match.root, match.pattern.root_port)] = 0
    return FusionCandidate(
        name=fused.name or match.view.index.names[next(iter(outputs))[0]],
        members=members,
        pass_name=pass_name,
        engine="graph",
        type=fused.type,
        attrs=_shared_attrs(fused.attrs, attr_sets),
        inputs=_inputs(match, fused.inputs),
        outputs=outputs,
        inner_nodes=list(fused.inner_nodes) if fused.inner_nodes else [],
        inner_outputs=dict(fused.inner_outputs) if fused.inner_outputs else {},
        where=[match.root_name],
        description=fused.description,
        order=order,
        view_shapes=fused.view_shapes,
    )
