"""Benchmark: fusing a large frozen graph (scope fusion, then graph fusion).

Two kinds of synthetic frozen GraphDef are generated (``--graph``), both made
of copies of small graphs that TensorFlow itself built and froze
(``bench_graphs.py``):

* ``bert`` (default): a deep BERT-style encoder.  An embeddings block, then
  blocks ``bert/encoder/layer_N/...`` holding the query/key/value dense layers
  and the attention arithmetic, an output dense layer with a residual ``AddV2``
  and a layer norm, an intermediate dense layer with GELU, and another dense
  layer, residual and layer norm; a pooler closes the graph.  Dense layers are
  ``MatMul`` + ``BiasAdd`` reading ``Const`` kernels and biases through
  ``Identity`` reads, as a frozen TF2 graph has them.  The layer norm scopes
  are copies of one real ``tf_slim.layers.layer_norm`` built in
  ``tf.compat.v1`` graph mode and frozen.
* ``dense-gelu``: a chain of blocks ``model/block_N/dense/...``, each a copy
  of one real tf_keras ``Dense(hidden, activation="gelu")`` traced with
  ``tf.function`` and frozen with ``convert_variables_to_constants_v2``
  (MatMul + BiasAdd, then ``0.5 * x * erfc(-x * 0.70710677)``).
* ``ln-blocks``: a chain of blocks ``model/block_N/LayerNorm/...``, each a copy
  of the real frozen ``tf_slim.layers.layer_norm`` (reduction axis -1): many
  small layer norms and nothing else.
* ``transformer``: a chain of blocks ``model/block_N/encoder_1/...``, each a copy
  of one real keras-hub ``TransformerEncoder`` (BERT's layer written by Keras 3:
  einsum projections, multi-head self attention with Keras' softmax, two layer
  norms, a GELU feed-forward) traced with ``tf.function`` and frozen.

``--memory`` also fuses each graph once more in a process of its own and reports
the peak resident memory above the parsed graph (``bench_memory.py``).

The generated graph must be valid (``scopefusion.GraphIndex`` accepts it).  It
is written to a temporary ``.pb`` file and then timed stage by stage:

* load: read the file and parse it (``scopefusion.load_model``);
* run: ``scopefusion.fuse`` with the installed passes (scope passes, then
  graph passes), with the report's own stage split: ``index``, ``scope.tree``,
  ``scope.match``, ``scope.apply``, ``scope.validate`` for scope fusion and
  ``graph.index``, ``graph.match``, ``graph.apply``, ``graph.validate`` for
  graph fusion (``scope.match`` is shown without ``scope.tree``, which it
  contains);
* save: ``scopefusion.save_graph`` (write, fsync, rename).

Each graph is fused ``--repeat`` times (default 2) and the fastest run is
reported.  The baseline is plain protobuf on the same bytes:
``GraphDef.ParseFromString`` followed by ``SerializeToString``, best of three.
The figure of merit is ``(load + run + save) / baseline``.  Beside it, the
*Python floor*: the baseline plus reading every node's name, op type and input
strings once through protobuf's Python API, the least that any fusion written
in Python does (it builds no index and matches nothing), as a ratio to the
baseline too.  Several sizes can
be given to check that the cost per node, of the whole run and of the graph
stage alone, stays flat as the graph grows.

The hidden width (``--hidden``, default 16) only sets the size of the
constant payloads: larger payloads make parsing and serializing, the
baseline, heavier and so lower the ratio; the small default keeps the
comparison about nodes.  Time spent in garbage collection during load, run
and save is measured through ``gc.callbacks`` and reported (the collector
stays as the library leaves it).

Every fusion the graph calls for must happen, or the run fails: every layer
norm scope becomes a ``LayerNorm``, every dense layer a ``MatMulBiasAdd``,
every GELU a ``Gelu`` and every attention softmax a ``ScaledDotProductAttention``
(for ``dense-gelu``: exactly one dense layer and one GELU per block).
Before timing, a small instance of the same generator is run in TensorFlow,
fused, and the fused graph (in its TensorFlow-runnable form) is checked to
compute the same output as the original.

Usage::

    python benchmarks/bench_fuse.py                       # one BERT graph of 200k nodes
    python benchmarks/bench_fuse.py --sizes 50000,100000,200000
    python benchmarks/bench_fuse.py --graph dense-gelu --sizes 10000,50000,200000
    python benchmarks/bench_fuse.py --graph transformer --sizes 10000,100000
    python benchmarks/bench_fuse.py --profile             # cProfile of the whole run
    python benchmarks/bench_fuse.py --profile graph       # cProfile of the graph stage alone
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import math
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helper modules beside this script

import numpy as np  # noqa: E402

from bench_graphs import GRAPH_KINDS, Generator, make_generator  # noqa: E402
from bench_memory import measure as measure_memory  # noqa: E402
from bench_report import FuseTiming, Result, exclusive_stages, print_result, print_summary  # noqa: E402

LAYER_NORM_PASS = "ScopeLayerNormPass"


# --------------------------------------------------------------------------- checks
def check_small_instance(gen: Generator, registry) -> str:
    """Run a small instance in TensorFlow, fuse it, and compare outputs."""
    from scopefusion import fuse
    from scopefusion.core.graph.index import GraphIndex
    from scopefusion.core.verify.execute import run_graph_def

    small = gen.build(gen.small_units)
    GraphIndex(small.graph_def)
    feed = {small.feed_name: np.random.default_rng(1).standard_normal(small.feed_shape).astype(np.float32)}
    (expected,) = run_graph_def(small.graph_def, feed, [small.output])
    result = fuse(small.graph_def, emit="tf", registry=registry)
    got = {t: result.report.fused_count(t) for t in small.expected}
    if got != small.expected:
        raise SystemExit(f"small check: fused {got}, expected {small.expected}")
    (actual,) = run_graph_def(result.graph_def, feed, [small.output])
    scale = float(np.max(np.abs(expected)))
    err = float(np.max(np.abs(actual - expected)))
    if not np.all(np.isfinite(expected)) or scale == 0 or err > 1e-4 * max(1.0, scale):
        raise SystemExit(f"small check: fused output differs from the original (max abs err {err:g}, "
                         f"max abs output {scale:g})")
    fused = ", ".join(f"{n} {t}" for t, n in got.items() if n)
    return (f"{gen.small_units}-{gen.unit_name.split()[-1].rstrip('s')} instance ({len(small.graph_def.node)} "
            f"nodes) runs in TensorFlow; fused {fused}; output max abs diff {err:.1e} (max |y| {scale:.2g})")


def check_fused(name: str, report, graph_def, scopes: Sequence[str], expected: dict[str, int],
                switched: bool = False) -> dict[str, int]:
    """Every pass ran cleanly, every layer norm scope is fused, and each fused op type
    appears exactly as often as the generator says (only at most that often when a fusion
    switch file turned passes off); returns the fused counts."""
    errors = [f"{p.name}: {p.error}" for p in report.passes if p.error]
    if errors:
        raise SystemExit(f"{name}: pass errors: {errors}")
    ln = report.pass_report(LAYER_NORM_PASS)
    fused_scopes = sorted(s for f in ln.fused for s in f.scopes)
    if fused_scopes != sorted(scopes):
        missing = sorted(set(scopes) - set(fused_scopes))
        reasons = [f"{r.name}: {r.reason}" for r in ln.refused[:3]]
        raise SystemExit(f"{name}: fused {len(fused_scopes)} of {len(scopes)} layer norm scopes "
                         f"(missing e.g. {missing[:3]}; refused {reasons})")
    in_graph = Counter(n.op for n in graph_def.node)
    fused = {t: report.fused_count(t) for t in expected}
    # a later stage (UB fusion: MatMulBiasAdd + activation) may take fused ops into its own
    later = any(p.fusion_type == "UBFusion" and p.fused for p in report.passes)
    for op_type, want in expected.items():
        if switched and fused[op_type] <= want and in_graph[op_type] <= want:
            continue  # a pass switched off leaves its blocks unfused
        if fused[op_type] != want or (in_graph[op_type] != want and not later):
            refused = [f"{r.name}: {r.reason}" for p in report.passes for r in p.refused[:2]]
            raise SystemExit(f"{name}: {fused[op_type]} {op_type} fused, {in_graph[op_type]} {op_type} nodes "
                             f"in the result, expected {want} (refusals e.g. {refused[:4]})")
    return fused


# --------------------------------------------------------------------------- timing
class GcMeter:
    """Counts garbage collections and the time spent in them (gc stays enabled)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._start = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start
            self.collections[info["generation"]] += 1

    def __enter__(self) -> "GcMeter":
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def best_of(n: int, fn: Callable[[], None]) -> float:
    best = math.inf
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def fuse_once(src: Path, dest: Path, registry, scopes: Sequence[str], expected: dict[str, int],
              switch: str | None = None) -> FuseTiming:
    """load + run + save, each timed; checks that everything expected was fused."""
    from scopefusion import fuse, load_model, save_graph

    with GcMeter() as meter:
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        model = load_model(src)
        t_load = time.perf_counter() - t0

        t0 = time.perf_counter()
        # the passes a switch file leaves out are not tried afterwards for hints: that is their work
        result = fuse(model, registry=registry, fusion_switch_file=switch, hints=switch is None)
        t_run = time.perf_counter() - t0

        t0 = time.perf_counter()
        save_graph(result.graph_def, dest)
        t_save = time.perf_counter() - t0
        cpu = time.process_time() - cpu0

    report = result.report
    fused = check_fused(src.name, report, result.graph_def, scopes, expected, switch is not None)
    return FuseTiming(
        load=t_load, run=t_run, save=t_save, cpu=cpu, stages=exclusive_stages(report.stage_seconds),
        pass_seconds={p.name: p.seconds for p in report.passes if p.engine == "graph" and p.ran},
        gc_seconds=meter.seconds, gc_collections=list(meter.collections),
        fused=fused, nodes_after=report.nodes_after,
    )


def bench_one(gen: Generator, nodes: int, workdir: Path, registry, baseline_repeats: int, repeats: int,
              memory: bool = False, switch: str | None = None) -> Result:
    from scopefusion.core.graph.index import GraphIndex
    from tensorflow.core.framework import graph_pb2

    t0 = time.perf_counter()
    generated = gen.build(gen.units_for(nodes))
    gen_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    GraphIndex(generated.graph_def)  # raises on a dangling input, a duplicate name, a cycle...
    index_seconds = time.perf_counter() - t0
    src = workdir / f"{gen.kind}_{nodes}.pb"
    src.write_bytes(generated.graph_def.SerializeToString())
    n_nodes = len(generated.graph_def.node)
    scopes, units, expected = generated.layer_norm_scopes, generated.units, generated.expected
    del generated
    gc.collect()

    data = src.read_bytes()

    def round_trip(read_nodes: bool) -> None:
        g = graph_pb2.GraphDef()
        g.ParseFromString(data)
        if read_nodes:  # what any pass over the graph written in Python reads at the least
            for node in g.node:
                node.name, node.op, list(node.input)
        g.SerializeToString()

    baseline = best_of(baseline_repeats, lambda: round_trip(False))
    python_floor = best_of(baseline_repeats, lambda: round_trip(True))
    data = b""  # the file's bytes go
    gc.collect()

    dest = workdir / f"{gen.kind}_{nodes}.fused.pb"
    runs = []
    for _ in range(repeats):
        runs.append(fuse_once(src, dest, registry, scopes, expected, switch))
        gc.collect()
    print(f"   sha256 of the fused {gen.kind} graph ({n_nodes} nodes): {hashlib.sha256(dest.read_bytes()).hexdigest()}")
    result = Result(
        kind=gen.kind, nodes=n_nodes, units=units, unit_name=gen.unit_name, expected=expected,
        file_bytes=src.stat().st_size, gen_seconds=gen_seconds, index_check_seconds=index_seconds,
        baseline=baseline, python_floor=python_floor, fuse=min(runs, key=lambda r: r.total), repeats=repeats,
        baseline_repeats=baseline_repeats,
        memory=measure_memory(src, dest) if memory else None,
    )
    src.unlink()
    dest.unlink()
    return result


def profile_run(gen: Generator, nodes: int, workdir: Path, registry, what: str, top: int,
                switch: str | None = None) -> None:
    """cProfile of the whole run (``run``), or of the scope or graph stage alone (the graph
    stage runs on the graph the scope stage left, as in a whole run)."""
    import cProfile
    import pstats

    from scopefusion import load_model
    from scopefusion.core.fusion.options import FusionOptions
    from scopefusion.core.fusion.pipeline import FusionPipeline
    from scopefusion.api import build_pipeline, load_switch

    generated = gen.build(gen.units_for(nodes))
    src = workdir / f"{gen.kind}_{nodes}.profile.pb"
    src.write_bytes(generated.graph_def.SerializeToString())
    n_nodes = len(generated.graph_def.node)
    del generated
    gc.collect()
    pipeline = build_pipeline(registry, FusionOptions(), load_switch(switch))
    if pipeline.engines[0].stage != "scope":
        raise RuntimeError(f"expected the scope engine first, got {[e.stage for e in pipeline.engines]}")
    parts = {
        "run": pipeline,
        "scope": FusionPipeline(pipeline.engines[:1], registry.fused_ops, pipeline.options),
        "graph": FusionPipeline(pipeline.engines[1:], registry.fused_ops, pipeline.options),
    }
    graph_def = load_model(src).graph_def
    src.unlink()
    if what == "graph":
        parts["scope"].run(graph_def)  # not profiled
    profiler = cProfile.Profile()
    profiler.enable()
    outcome = parts[what].run(graph_def)
    profiler.disable()
    stages = ", ".join(f"{k} {v:.3f}" for k, v in outcome.report.stage_seconds.items())
    label = {"run": "the whole run", "scope": "the scope stage", "graph": "the graph stage"}[what]
    print(f"\ncProfile of {label} ({gen.kind}, {n_nodes} nodes; profiler overhead inflates Python-heavy code)")
    print(f"stage seconds under the profiler: {stages}")
    if what == "graph":
        print("(graph.index is reported as 'index' here: the profiled pipeline starts with the graph stage)")
    stats = pstats.Stats(profiler, stream=sys.stdout).strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


# --------------------------------------------------------------------------- main
def source_fingerprint() -> str:
    """A digest of the installed scopefusion sources and the time the newest was changed, so
    that a table can be tied to the code that produced it (the tree may hold uncommitted work)."""
    import scopefusion

    root = Path(scopefusion.__file__).resolve().parent
    files = sorted(root.rglob("*.py"))
    digest = hashlib.sha1()
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    newest = max(files, key=lambda p: p.stat().st_mtime)
    changed = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(newest.stat().st_mtime))
    return (f"scopefusion {scopefusion.__version__} at {root}: {len(files)} source files, sha1 "
            f"{digest.hexdigest()[:12]}, newest {newest.relative_to(root)} changed {changed}")


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(s.replace("_", "")) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of node counts: {text!r}") from None
    if not sizes or min(sizes) < 1000:
        raise argparse.ArgumentTypeError("sizes must be node counts >= 1000")
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", choices=GRAPH_KINDS, default="bert",
                        help="bert: BERT-style encoder with tf_slim layer norms (default); "
                             "transformer: a chain of frozen keras-hub TransformerEncoder blocks; "
                             "dense-gelu: a chain of frozen tf_keras Dense(activation='gelu') blocks; "
                             "ln-blocks: a chain of frozen tf_slim layer norms (about 19 nodes each)")
    parser.add_argument("--nodes", type=int, default=200_000, help="graph size in nodes (default 200000)")
    parser.add_argument("--sizes", type=parse_sizes, default=None,
                        help="comma-separated node counts to run instead of --nodes, e.g. 50000,100000,200000")
    parser.add_argument("--hidden", type=int, default=16,
                        help="hidden width; sets the size of the Const payloads (default 16)")
    parser.add_argument("--heads", type=int, default=4, help="attention heads (bert)")
    parser.add_argument("--seq", type=int, default=8)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2,
                        help="fuse each graph this many times and keep the fastest run (default 2)")
    parser.add_argument("--baseline-repeats", type=int, default=3)
    parser.add_argument("--skip-tf-check", action="store_true",
                        help="skip running a small instance in TensorFlow before timing")
    parser.add_argument("--profile", nargs="?", const="run", choices=("run", "scope", "graph"), default=None,
                        help="also cProfile, on the largest size, the whole run (default) or one stage")
    parser.add_argument("--profile-top", type=int, default=30)
    parser.add_argument("--fusion-switch-file", default=None, metavar="FILE",
                        help="turn graph passes on or off as this fusion switch file says (e.g. to time only "
                             "the passes an older version had; the passes left out are not tried for hints "
                             "either); fused counts are then checked as at most what the generator expects")
    parser.add_argument("--memory", action="store_true",
                        help="also measure, in a process of its own, the peak memory of a run above the parsed graph")
    args = parser.parse_args(argv)
    sizes = args.sizes or [args.nodes]
    if min(sizes) < 1000:
        parser.error("--nodes must be >= 1000")

    started = time.perf_counter()
    import tensorflow as tf
    from google.protobuf.internal import api_implementation

    from scopefusion import load_registry

    gen = make_generator(args.graph, hidden=args.hidden, heads=args.heads, batch=args.batch, seq=args.seq,
                         seed=args.seed)
    registry = load_registry()
    print(f"python {platform.python_version()}, tensorflow {tf.__version__}, "
          f"protobuf {api_implementation.Type()} backend, {os.cpu_count()} CPUs, gc enabled: {gc.isenabled()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(source_fingerprint())
    print(f"graph: {gen.kind}; {gen.describe()}")
    print(f"passes: scope {[s.name for s in registry.passes]}, graph {[s.name for s in registry.graph_passes]}")
    if args.fusion_switch_file:
        lines = Path(args.fusion_switch_file).read_text().splitlines()
        said = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        print(f"fusion switch file {args.fusion_switch_file}: {' '.join(said)}")
    if not args.skip_tf_check:
        print("check:", check_small_instance(gen, registry))

    results = []
    with tempfile.TemporaryDirectory(prefix="bench_fuse.") as tmp:
        for nodes in sizes:
            r = bench_one(gen, nodes, Path(tmp), registry, args.baseline_repeats, max(1, args.repeat), args.memory,
                          args.fusion_switch_file)
            print_result(r)
            if gen.kind == "dense-gelu" and args.fusion_switch_file is None:
                f = r.fuse.fused
                assert f["MatMulBiasAdd"] == f["Gelu"] == r.units, (f, r.units)
                print(f"   every block fused: {f['MatMulBiasAdd']} MatMulBiasAdd and {f['Gelu']} Gelu "
                      f"for {r.units} blocks")
            results.append(r)
        print_summary(results)
        if args.profile:
            profile_run(gen, max(sizes), Path(tmp), registry, args.profile, args.profile_top,
                        args.fusion_switch_file)
    print(f"\nwall time {time.perf_counter() - started:.1f} s, load average now {os.getloadavg()[0]:.2f} "
          "(our run counts for about 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
