"""The report of a fusion run: per pass what matched, what was fused, what
was refused and why, and how long it took.  Scope passes and graph passes
report alike; graph passes also carry the reference's counters
(``match_times``: matches found, ``effect_times``: matches fused) and what the
fusion switch file decided for them."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from .places import Place


@dataclass(slots=True)  # a large graph's report holds one per fused op
class FusedRecord:
    """One fused op written into the graph."""

    name: str
    type: str
    scopes: list[str]  # the matched scopes; for a graph pass, the node its pattern matched at
    removed_nodes: int
    kept_nodes: int
    inner_nodes: int = 0
    #: what the pass said the fused op is (``set_description``, ``FusedOp.description``)
    description: str = ""
    #: the nodes it replaced and their neighbours, as its stage saw them (runs that keep places)
    place: Place | None = None
    #: the library function whose body holds it ("" for the graph itself); its name and
    #: scopes then start with ``function::``
    function: str = ""


@dataclass(slots=True)  # ... and one per refusal or near miss
class Refusal:
    """A result that was not applied, with the reason; for one dropped in a conflict,
    also the result that won (``"name (pass)"``)."""

    name: str
    reason: str
    scopes: list[str] = field(default_factory=list)
    winner: str = ""
    #: what another registered pass makes of the place ("fused by ...", "... would fuse it: enable ...")
    hint: str = ""
    #: the nodes of the place and their neighbours (runs that keep places)
    place: Place | None = None
    #: the library function whose body holds it ("" for the graph itself)
    function: str = ""
    #: the nodes the refusal names (:class:`~.refusal.Refused`), by their names in the graph it was
    #: refused in (for a function's body, those of the body, as the reason and the place give them)
    nodes: list[str] = field(default_factory=list)


@dataclass
class FunctionRecord:
    """What fusion did inside one function of the graph's library."""

    name: str
    nodes_before: int
    nodes_after: int
    fused: int = 0
    #: "fused" (its body rewritten), "unchanged" (nothing to fuse) or "left alone" (see ``reason``)
    status: str = "unchanged"
    reason: str = ""


@dataclass
class PassReport:
    """What one pass did."""

    name: str
    general: bool
    origin: str = "built-in"
    engine: str = "scope"  # "scope" or "graph"
    fusion_type: str = ""  # graph passes: "GraphFusion" or "UBFusion"
    switch: str = ""  # graph passes: what the switch file decided ("on", "off", "on (forbidden_close)")
    match_times: int = 0  # graph passes: matches of its patterns
    matched_scopes: list[str] = field(default_factory=list)
    candidates: int = 0
    near_miss_count: int = 0
    near_misses: list[Refusal] = field(default_factory=list)
    results: int = 0
    #: matches as the pass grouped them (a scope pass's results plus the matched scopes it made
    #: no result of; a graph pass's matches): each ends fused, refused or dropped in a conflict
    matches: int = 0
    fused: list[FusedRecord] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    dropped: list[Refusal] = field(default_factory=list)  # lost a conflict to another result
    error: str | None = None
    seconds: float = 0.0

    def refuse(self, name: str, reason: str, scopes: list[str] | None = None, nodes: Sequence[str] = ()) -> None:
        self.refused.append(Refusal(name, reason, list(scopes or []), nodes=list(nodes)))

    @property
    def effect_times(self) -> int:
        """Matches fused (the reference's counter)."""
        return len(self.fused)

    @property
    def accounted(self) -> bool:
        """Every match ended fused, refused or dropped (false only for a pass that failed midway)."""
        return self.matches == len(self.fused) + len(self.refused) + len(self.dropped)

    @property
    def ran(self) -> bool:
        """False for a graph pass the switch file left off."""
        return not self.switch.startswith("off")


@dataclass
class FusionReport:
    """The whole run."""

    passes: list[PassReport] = field(default_factory=list)
    nodes_before: int = 0
    nodes_after: int = 0
    #: nodes per op type in the graph given and in the fused graph (fused form)
    op_counts_before: dict[str, int] = field(default_factory=dict)
    op_counts_after: dict[str, int] = field(default_factory=dict)
    #: the same over the bodies of the graph's library functions (empty without a library;
    #: after the run, functions a fusion left uncalled are gone)
    function_op_counts_before: dict[str, int] = field(default_factory=dict)
    function_op_counts_after: dict[str, int] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    plugin_errors: list[str] = field(default_factory=list)  # plugins skipped because a hook raised
    warnings: list[str] = field(default_factory=list)  # e.g. names in the switch file that match no pass
    #: passes the run left out that would fuse something, and how to turn them on
    hints: list[str] = field(default_factory=list)
    #: which source set each run option that a session configuration may also give ("argument" or
    #: "session configuration")
    option_sources: dict[str, str] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    #: input shapes declared for the run (``input_shape``; -1: dynamic), written into the placeholders
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    #: options the session configuration sets that only a back end uses: validated, recorded, not acted on
    recorded_options: list[str] = field(default_factory=list)
    #: the node carrying the session options in the output graph (a run with a configuration, unpartitioned)
    options_node: str | None = None
    #: options the session configuration leaves unset whose seed default was filled in: option -> value
    default_options: dict[str, str] = field(default_factory=dict)
    #: why no pass ran at all, when something turned fusion off (``use_off_line`` False)
    fusion_off: str = ""
    #: the session configuration's keys outside the option table (each also a warning)
    unknown_options: list[str] = field(default_factory=list)
    #: one record per function of the graph's library that fusion looked inside (``functions=True``)
    functions: list[FunctionRecord] = field(default_factory=list)
    #: library functions a fusion left uncalled (a fused loop's body and condition), removed
    removed_functions: list[str] = field(default_factory=list)
    #: what made the run: scopefusion, TensorFlow, protobuf and Python versions (as installed)
    versions: dict[str, str] = field(default_factory=dict)

    def pass_report(self, name: str) -> PassReport:
        for p in self.passes:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def fused(self) -> list[FusedRecord]:
        return [f for p in self.passes for f in p.fused]

    @property
    def refused(self) -> list[Refusal]:
        return [r for p in self.passes for r in p.refused]

    @property
    def dropped(self) -> list[Refusal]:
        return [r for p in self.passes for r in p.dropped]

    def op_count_changes(self) -> list[tuple[str, int, int]]:
        """``(op type, before, after)`` for every op type whose count the run changed, by name."""
        return _changes(self.op_counts_before, self.op_counts_after)

    def function_op_count_changes(self) -> list[tuple[str, int, int]]:
        """:meth:`op_count_changes` over the bodies of the library's functions."""
        return _changes(self.function_op_counts_before, self.function_op_counts_after)

    def fused_count(self, op_type: str | None = None) -> int:
        return sum(1 for f in self.fused if op_type is None or f.type == op_type)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for entry, p in zip(out["passes"], self.passes, strict=True):
            entry["effect_times"] = p.effect_times
            for key in ("fused", "refused", "dropped", "near_misses"):
                for item in entry[key]:
                    if item.get("place") is None:
                        del item["place"]  # places are kept only when a run asks for them
                    if not item.get("nodes", True):
                        del item["nodes"]  # only refusals that name nodes have them
        return out

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def summary(self) -> str:
        """One line: nodes before and after, fused ops by type (most first), refusals and warnings."""
        counts: dict[str, int] = {}
        for f in self.fused:
            counts[f.type] = counts.get(f.type, 0) + 1
        ops = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{op} {n}" for op, n in ops[:8]) + (f", {len(ops) - 8} more types" if len(ops) > 8 else "")
        parts = [f"{self.nodes_before:,} nodes -> {self.nodes_after:,}",
                 f"{sum(counts.values())} fused" + (f" ({shown})" if shown else ""),
                 f"{len(self.refused)} refused"]
        if self.warnings:
            parts.append(f"{len(self.warnings)} warning(s)")
        return "; ".join(parts)

    def __repr__(self) -> str:  # the whole report is ``to_dict()``; a notebook shows this
        return f"<FusionReport {self.summary()}>"


def _changes(before: dict[str, int], after: dict[str, int]) -> list[tuple[str, int, int]]:
    return [(op, before.get(op, 0), after.get(op, 0)) for op in sorted(set(before) | set(after))
            if before.get(op, 0) != after.get(op, 0)]
