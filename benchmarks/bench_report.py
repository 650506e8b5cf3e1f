"""Results and their tables for ``bench_fuse.py``.

Stage names are those of ``FusionReport.stage_seconds`` (see
``scopefusion/core/fusion/pipeline.py``): ``index`` (the first index, the scope
stage's), ``scope.tree``, ``scope.match``, ``scope.apply``, ``scope.validate``, and
for graph fusion ``graph.index``, ``graph.match``, ``graph.apply``, ``graph.validate``.
The pipeline times ``scope.match`` around the scope engine's ``propose()``, which
builds the scope tree (``scope.tree``) first: the tables show ``scope.match``
without the tree, so that the stages add up.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

SCOPE_STAGES = ("index", "scope.tree", "scope.match", "scope.apply", "scope.validate")
GRAPH_STAGES = ("graph.index", "graph.match", "graph.apply", "graph.validate")
STAGES = SCOPE_STAGES + GRAPH_STAGES
SHORT = {"index": "index", "scope.tree": "s.tree", "scope.match": "s.match", "scope.apply": "s.apply",
         "scope.validate": "s.valid", "graph.index": "g.index", "graph.match": "g.match",
         "graph.apply": "g.apply", "graph.validate": "g.valid"}
TARGET_RATIO = 5.0
TARGET_BYTES_PER_NODE = 1024  # peak memory above the parsed protobuf
LINEAR_TOLERANCE = 1.25  # per-node time may grow this much from the smallest to the largest size


def exclusive_stages(stage_seconds: Mapping[str, float]) -> dict[str, float]:
    """The report's stage times, each stage without the ones nested in it, in pipeline order;
    stages this script does not know (a UB stage, ``emit_tf``) follow."""
    st = dict(stage_seconds)
    if "scope.match" in st:
        st["scope.match"] -= st.get("scope.tree", 0.0)
    out = {s: st.pop(s, 0.0) for s in STAGES}
    out.update(st)
    return out


@dataclass
class FuseTiming:
    load: float
    run: float
    save: float
    cpu: float  # process CPU time of load + run + save: near the wall time unless the machine is busy
    stages: dict[str, float]  # exclusive_stages() of the run's report
    pass_seconds: dict[str, float]  # graph passes' own time (inside graph.match)
    gc_seconds: float
    gc_collections: list[int]
    fused: dict[str, int]  # fused op type -> fused ops in the result
    nodes_after: int

    @property
    def total(self) -> float:
        return self.load + self.run + self.save

    @property
    def scope_stage(self) -> float:
        return sum(self.stages[s] for s in SCOPE_STAGES)

    @property
    def graph_stage(self) -> float:
        return sum(self.stages[s] for s in GRAPH_STAGES)


@dataclass
class Result:
    kind: str
    nodes: int
    units: int
    unit_name: str
    expected: dict[str, int]
    file_bytes: int
    gen_seconds: float
    index_check_seconds: float
    baseline: float
    #: the baseline plus reading every node's name, op and inputs in Python (see bench_fuse)
    python_floor: float
    fuse: FuseTiming
    repeats: int
    baseline_repeats: int
    memory: Any = None  # bench_memory.Memory when measured (--memory)

    @property
    def total(self) -> float:
        return self.fuse.total

    @property
    def ratio(self) -> float:
        return self.total / self.baseline

    def us_per_node(self, seconds: float) -> float:
        return 1e6 * seconds / self.nodes


def print_result(r: Result) -> None:
    f = r.fuse
    mb = r.file_bytes / 1e6
    print(f"\n== {r.nodes} nodes ({r.units} {r.unit_name}, {mb:.1f} MB .pb, generated in {r.gen_seconds:.2f} s; "
          f"GraphIndex accepts it, {r.index_check_seconds:.2f} s)")
    fused = ", ".join(f"{t} {f.fused.get(t, 0)}/{n}" for t, n in r.expected.items())
    print(f"   fused ops (fused/expected): {fused}; nodes after fusion: {f.nodes_after}")
    head = f"   {'stage':<32}{'seconds':>9}{'share':>8}{'us/node':>9}"
    print(head + ("" if r.repeats == 1 else f"   (fastest of {r.repeats} runs)"))

    def row(name: str, sec: float, note: str = "") -> None:
        print(f"   {name:<32}{sec:9.3f}{100 * sec / r.total:7.1f}%{r.us_per_node(sec):9.2f}{note}")

    row("load (read + parse)", f.load)
    for name, sec in f.stages.items():
        label = name + (" (excl. tree)" if name == "scope.match" else "")
        row(f"run: {label}", sec)
    other = f.run - sum(f.stages.values())
    if abs(other) >= 5e-4:
        row("run: outside the stages", other)
    row("save (serialize + write)", f.save)
    row("scope stage (index + scope.*)", f.scope_stage)
    row("graph stage (graph.*)", f.graph_stage,
        f"   graph/scope {f.graph_stage / f.scope_stage:.2f}x" if f.scope_stage else "")
    if f.pass_seconds:
        passes = ", ".join(f"{name} {sec:.3f} s" for name, sec in f.pass_seconds.items())
        print(f"   {'  graph.match by pass:':<32}{passes}")
    row("run (total)", f.run)
    row("total fuse time", r.total, f"   (CPU time {f.cpu:.3f} s, {100 * f.cpu / r.total:.0f}% of it)")
    gens = "/".join(str(n) for n in f.gc_collections)
    row("  of which gc pauses", f.gc_seconds, f"   ({gens} collections of generation 0/1/2)")
    print(f"   {'baseline parse+serialize':<32}{r.baseline:9.3f}{'':8}{r.us_per_node(r.baseline):9.2f}"
          f"   (best of {r.baseline_repeats})")
    verdict = "met" if r.ratio <= TARGET_RATIO else "NOT met"
    print(f"   {'ratio total / baseline':<32}{r.ratio:9.2f}   (target <= {TARGET_RATIO:g}: {verdict})")
    print(f"   {'python floor':<32}{r.python_floor:9.3f}{'':8}{r.us_per_node(r.python_floor):9.2f}"
          f"   ({r.python_floor / r.baseline:.2f}x the baseline: the baseline plus reading each node's "
          f"name, op and inputs in Python)")
    if r.memory is not None:
        m = r.memory
        verdict = "met" if m.per_node <= TARGET_BYTES_PER_NODE else "NOT met"
        print(f"   {'peak memory above the parse':<32}{m.above / 2**20:9.1f} MiB {m.per_node:8.0f} B/node   "
              f"(parsed graph {m.parsed_rss / 2**20:.1f} MiB resident; target <= {TARGET_BYTES_PER_NODE} B/node: "
              f"{verdict})")


def print_summary(results: Sequence[Result]) -> None:
    print("\n== per size, seconds (s.* scope stage, g.* graph stage; s.match excludes s.tree; "
          "cpu: CPU time of the total)")
    cols = (["nodes", "load"] + [SHORT[s] for s in STAGES]
            + ["save", "total", "cpu", "gc", "base", "ratio", "floor", "f/base"])
    print("   " + " ".join(f"{c:>7}" for c in cols))
    for r in results:
        f = r.fuse
        vals = [f.load] + [f.stages[s] for s in STAGES] + [f.save, r.total, f.cpu, f.gc_seconds, r.baseline]
        print(f"   {r.nodes:>7} " + " ".join(f"{v:7.3f}" for v in vals) + f" {r.ratio:7.2f}"
              f" {r.python_floor:7.3f} {r.python_floor / r.baseline:7.2f}")

    print("\n== per size, microseconds per node")
    cols = ["nodes", "scope", "graph", "g/s"] + [SHORT[s] for s in GRAPH_STAGES] + ["total", "ex-gc", "base"]
    print("   " + " ".join(f"{c:>7}" for c in cols))
    for r in results:
        f = r.fuse
        ratio = f.graph_stage / f.scope_stage if f.scope_stage else float("nan")
        vals = [f.scope_stage, f.graph_stage] + [f.stages[s] for s in GRAPH_STAGES]
        per = [r.us_per_node(v) for v in vals]
        print(f"   {r.nodes:>7} {per[0]:7.2f} {per[1]:7.2f} {ratio:6.2f}x "
              + " ".join(f"{v:7.2f}" for v in per[2:])
              + f" {r.us_per_node(r.total):7.2f} {r.us_per_node(r.total - f.gc_seconds):7.2f}"
              f" {r.us_per_node(r.baseline):7.2f}")

    if len(results) > 1:
        ordered = sorted(results, key=lambda r: r.nodes)
        small, large = ordered[0], ordered[-1]

        def growth(seconds) -> float:
            a, b = seconds(small) / small.nodes, seconds(large) / large.nodes
            return b / a if a else float("nan")

        parts = {
            "total": growth(lambda r: r.total),
            "total ex-gc": growth(lambda r: r.total - r.fuse.gc_seconds),
            "scope stage": growth(lambda r: r.fuse.scope_stage),
            "graph stage": growth(lambda r: r.fuse.graph_stage),
        }
        parts.update({s: growth(lambda r, s=s: r.fuse.stages[s]) for s in GRAPH_STAGES})
        print(f"\n   time per node at {large.nodes} / at {small.nodes} nodes (1.00 is linear): "
              + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()))
        for name in ("total", "graph stage"):
            ok = parts[name] <= LINEAR_TOLERANCE
            print(f"   {name}: {'within' if ok else 'NOT within'} {100 * (LINEAR_TOLERANCE - 1):.0f}% of linear")
