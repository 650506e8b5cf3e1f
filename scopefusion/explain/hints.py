"""Hints: what another registered pass makes of a place a pass refused or nearly matched.

After a run, every refusal and near miss is compared with what the other passes fused
(``fused by ScopeLayerNormPass as 'encoder/LayerNorm'``).  The passes the run left out (scope
passes not enabled, graph passes the switch file turned off) are then tried on the fused graph
(a copy: the places nothing fused are still there) and every place one of them would fuse is
reported once for the run (``ScopeInstanceNormPass is not enabled; it would fuse 2 place(s)``)
and on the refusals and near misses at that place.  A place no pass can fuse gets no hint.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, AbstractSet, Any, Iterator, Sequence

from ..core.errors import ScopeFusionError
from ..core.fusion.options import FusionOptions
from ..core.fusion.pipeline import FusionPipeline
from ..core.fusion.report import FusedRecord, FusionReport, PassReport, Refusal
from ..core.graph_fusion.base_pass import FUSION_TYPES
from ..core.graph_fusion.engine import GraphFusionEngine, checked_patterns
from ..core.graph_fusion.switch import FusionSwitch
from ..core.scope.pass_manager import ScopePassManager

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

    from ..core.fusion.pass_spec import PassSpec
    from ..plugins.registry import Registry

#: Places named in a run-level hint (the rest are counted).
PLACES_SHOWN = 3
#: At most this many places asked: an added place is compared with each of them (see :class:`_Places`).
_FEW_ASKED = 8


class _Places:
    """Fused records by place, answering "which record is at, inside or around this scope or node?"
    in time proportional to the name's depth.  With ``asked`` (the places that will be looked up),
    only what those lookups can read is kept: a large run fuses far more places than it refuses."""

    def __init__(self, asked: AbstractSet[str] | None = None) -> None:
        self._exact: dict[str, tuple[str, FusedRecord]] = {}
        self._inside: dict[str, tuple[str, FusedRecord]] = {}  # every proper prefix of a place
        #: the keys :meth:`find` reads of ``_exact`` (the asked places and their prefixes) and of ``_inside``
        self._exact_asked = None if asked is None else {k for a in asked for k in (a, *_prefixes(a))}
        self._inside_asked = asked
        #: with few places asked, each added place is held against them (``a/`` starting it) instead of
        #: cutting every prefix of it: a run that refuses at a few places fuses at tens of thousands
        self._few = None if asked is None or len(asked) > _FEW_ASKED else [(a, a + "/") for a in asked]

    def add(self, pass_name: str, record: FusedRecord) -> None:
        exact_asked, inside_asked, few = self._exact_asked, self._inside_asked, self._few
        for place in dict.fromkeys([record.name, *record.scopes]):  # the fused node's name is a place too
            if exact_asked is None or place in exact_asked:
                self._exact.setdefault(place, (pass_name, record))
            if few is not None:
                for prefix, start in few:
                    if place.startswith(start):
                        self._inside.setdefault(prefix, (pass_name, record))
                continue
            for prefix in _prefixes(place):
                if inside_asked is None or prefix in inside_asked:
                    self._inside.setdefault(prefix, (pass_name, record))

    def find(self, place: str, other_than: str) -> tuple[str, FusedRecord, bool] | None:
        """A record of another pass than ``other_than`` at ``place`` or around it (``False``), else
        one inside it (``True``)."""
        for key in (place, *_prefixes(place)):
            hit = self._exact.get(key)
            if hit is not None and hit[0] != other_than:
                return hit[0], hit[1], False
        hit = self._inside.get(place)
        return (hit[0], hit[1], True) if hit is not None and hit[0] != other_than else None


def _prefixes(name: str) -> Iterator[str]:
    """The proper prefixes of ``name`` at its slashes, longest first (``a/b/c``: ``a/b``, ``a``)."""
    cut = name.rfind("/")
    while cut != -1:
        yield name[:cut]
        cut = name.rfind("/", 0, cut)


def left_out_passes(registry: "Registry", options: FusionOptions, switch: FusionSwitch) -> tuple[list, list]:
    """The scope passes not enabled and the graph passes the switch file turns off (not those off by
    default: they are off by design, not by the user's choice)."""
    enabled = set(options.enable_scope_fusion_passes)
    scope = [s for s in registry.passes if not s.general and s.name not in enabled]
    graph = [s for s in registry.graph_passes
             if not switch.decide(s.name, s.fusion_type, s.forbidden_close, s.default_on).on and s.default_on]
    return scope, graph


def _may_fuse(spec: "PassSpec", op_types: AbstractSet[str]) -> bool:
    """Whether a pass can fuse anything in a graph of ``op_types`` (a scope pass says; a graph
    pass matches only at roots of its patterns' root types).  A pass whose answer fails is tried."""
    try:
        if spec.engine == "scope":
            return bool(spec.cls().may_fuse(op_types))
        patterns = checked_patterns(spec.cls().define_patterns())
        return any(not op_types.isdisjoint(p.root_types) for p in patterns)
    except Exception:  # noqa: BLE001 - the probe runs the pass contained and reports what it raises
        return True


def passes_to_probe(registry: "Registry", options: FusionOptions, switch: FusionSwitch,
                    op_types: AbstractSet[str]) -> tuple[list, list]:
    """The left-out passes that may fuse something in a graph of ``op_types``.  A graph pass
    after a stage that runs may meet the op types that stage makes, so it is kept."""
    scope, graph = left_out_passes(registry, options, switch)
    scope = [s for s in scope if _may_fuse(s, op_types)]
    kept: list = []
    for fusion_type in FUSION_TYPES:
        of_type = [g for g in graph if g.fusion_type == fusion_type]
        if scope or kept:
            kept.extend(of_type)
        else:
            kept.extend(g for g in of_type if _may_fuse(g, op_types))
    return scope, kept


def probe(graph_def: "GraphDef", registry: "Registry", options: FusionOptions, switch: FusionSwitch,
          op_types: AbstractSet[str] | None = None) -> FusionReport:
    """Run the left-out passes on a copy of ``graph_def``; their report (the copy is dropped).
    With ``op_types`` (every op type of the graph and its functions), passes that cannot fuse
    anything in such a graph are not tried, and no copy is made when none can."""
    if op_types is None:
        scope, graph = left_out_passes(registry, options, switch)
    else:
        scope, graph = passes_to_probe(registry, options, switch, op_types)
    if not scope and not graph:
        return FusionReport()
    copy = type(graph_def)()
    copy.CopyFrom(graph_def)
    probe_options = dataclasses.replace(options, enable_scope_fusion_passes=[s.name for s in scope], strict=False,
                                        keep_places=False)  # the probe's report is read for hints only
    engines: list[Any] = [ScopePassManager(scope, registry.fused_ops, probe_options)] if scope else []
    for fusion_type in FUSION_TYPES:  # a stage with no pass to try is not run
        if any(g.fusion_type == fusion_type for g in graph):
            engines.append(GraphFusionEngine(graph, registry.fused_ops, probe_options, FusionSwitch.default(),
                                             fusion_type))
    return FusionPipeline(engines, registry.fused_ops, probe_options).run(copy).report


def _how_to_enable(p: PassReport) -> str:
    if p.engine == "scope":
        return f"enable {p.name} (--enable_scope_fusion_passes {p.name})"
    return f"turn {p.name} on in the fusion switch file"


def _would_fuse_text(p: PassReport) -> str:
    places = [f.name for f in p.fused]
    shown = ", ".join(repr(n) for n in places[:PLACES_SHOWN])
    more = f" and {len(places) - PLACES_SHOWN} more" if len(places) > PLACES_SHOWN else ""
    state = "is not enabled" if p.engine == "scope" else "is switched off"
    return f"{p.name} {state}; it would fuse {len(places)} place(s) ({shown}{more}): {_how_to_enable(p)}"


def _annotate(notes: Sequence[tuple[PassReport, Refusal]], fused: _Places, would: _Places,
              probed: dict[str, PassReport]) -> None:
    for owner, note in notes:
        for place in note.scopes or [note.name]:
            hit = fused.find(place, owner.name)
            if hit is not None:
                name, record, inside = hit
                note.hint = (f"{record.name!r} inside it was fused by {name}" if inside
                             else f"fused by {name} as {record.name!r}")
                break
            hit = would.find(place, owner.name)
            if hit is not None:
                name, record, inside = hit
                what = f"{record.name!r} inside it" if inside else "it"
                note.hint = f"{name} would fuse {what} as {record.type}: {_how_to_enable(probed[name])}"
                break


def _op_types(graph_def: "GraphDef") -> set[str]:
    """Every op type of the fused graph and of its functions."""
    ops = {node.op for node in graph_def.node}
    ops.update(node.op for function in graph_def.library.function for node in function.node_def)
    return ops


def add_hints(report: FusionReport, fused_graph: "GraphDef", registry: "Registry", options: FusionOptions,
              switch: FusionSwitch) -> None:
    """Fill in ``report.hints`` and the ``hint`` of every refusal and near miss that has one."""
    notes = [(p, r) for p in report.passes for r in (*p.refused, *p.near_misses)]
    asked = {place for _, note in notes for place in note.scopes or [note.name]}  # what _annotate looks up
    would, probed = _Places(asked), {}
    scope, graph = left_out_passes(registry, options, switch)
    if (scope or graph) and options.fusible_nodes is None:
        op_types = _op_types(fused_graph)
        try:
            probed_report = probe(fused_graph, registry, options, switch, op_types)
        except ScopeFusionError as exc:  # never the run's own failure: say so and go without
            report.warnings.append(f"no hints from the passes left out: {' '.join(str(exc).split())}")
            probed_report = FusionReport()
        for p in probed_report.passes:
            if p.fused and p.ran:
                probed[p.name] = p
                report.hints.append(_would_fuse_text(p))
                for record in p.fused:
                    would.add(p.name, record)
    if notes:  # the places of what was fused are looked up only for refusals and near misses
        fused = _Places(asked)
        for p in report.passes:
            for record in p.fused:
                fused.add(p.name, record)
        _annotate(notes, fused, would, probed)
