"""Benchmark: fusing the layer norms of a large frozen BERT-style encoder.

A synthetic frozen GraphDef is generated directly from protobuf messages.  It
looks like a deep BERT encoder: an embeddings block, then blocks
``bert/encoder/layer_N/...`` holding the query/key/value dense layers and the
attention arithmetic, an output dense layer with a residual ``AddV2`` and a
layer norm, an intermediate dense layer with GELU, and another dense layer,
residual and layer norm; a pooler closes the graph.  Dense layers are
``MatMul`` + ``BiasAdd`` reading ``Const`` kernels and biases through
``Identity`` reads, as a frozen TF2 graph has them.

The layer norm scopes are not written by hand: one real
``tf_slim.layers.layer_norm`` is built in ``tf.compat.v1`` graph mode and
frozen, and its nodes (names, wiring, attributes and constant tensors) are
copied and renamed into every layer norm scope of the generated graph.

The graph is written to a temporary ``.pb`` file and then timed stage by stage:

* load: read the file and parse it (``scopefusion.core.graph_io.load_model``);
* run: ``ScopePassManager.run`` with the registered passes, with its own
  stage split (index, scope_graph, match, apply, validate);
* save: ``scopefusion.core.graph_io.save_graph`` (write, fsync, rename).

Each graph is fused ``--repeat`` times (default 2) and the fastest run is
reported.  The baseline is plain protobuf on the same bytes:
``GraphDef.ParseFromString`` followed by ``SerializeToString``, best of three.
The figure of merit is ``(load + run + save) / baseline``.  Several sizes can
be given to check that the cost per node stays flat as the graph grows.

The hidden width (``--hidden``, default 16) only sets the size of the
constant payloads: larger payloads make parsing and serializing, the
baseline, heavier and so lower the ratio; the small default keeps the
comparison about nodes.  Time spent in garbage collection during load, run
and save is measured through ``gc.callbacks`` and reported (the collector
stays as the library leaves it).

Every layer norm scope must be fused: the run fails otherwise.  Before timing,
a two-layer instance of the same generator is run in TensorFlow, fused, and
the fused graph (in its TensorFlow-runnable form) is checked to compute the
same output as the original.

Usage::

    python benchmarks/bench_fuse.py                       # one graph of 200k nodes
    python benchmarks/bench_fuse.py --sizes 50000,100000,200000
    python benchmarks/bench_fuse.py --profile             # cProfile of the run stage
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

STAGES = ("index", "scope_graph", "match", "apply", "validate")
TARGET_RATIO = 5.0
LAYER_NORM_PASS = "ScopeLayerNormPass"
DT_FLOAT = 1
DT_INT32 = 3


# --------------------------------------------------------------------------- template
@dataclass
class Entry:
    """One node of a block: a prototype NodeDef (attrs, no name, no inputs),
    its name relative to the block and its inputs (relative names; ``None``
    is the block's input tensor)."""

    suffix: str
    proto: object
    inputs: list[str | None] = field(default_factory=list)
    random_shape: tuple[int, ...] | None = None  # Const whose value is drawn per instance


@dataclass
class LayerNormTemplate:
    """The frozen nodes of one real tf_slim layer norm, input placeholder removed."""

    nodes: list[object]
    input_name: str
    producer: int


def real_layer_norm_template(rows: int, hidden: int) -> LayerNormTemplate:
    """Build and freeze one ``tf_slim.layers.layer_norm`` in TF1 graph mode."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    tf.get_logger().setLevel("ERROR")  # convert_variables_to_constants is deprecated, and says so
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [rows, hidden], name="x")
        y = tf_slim.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1)
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            frozen = tf1.graph_util.convert_variables_to_constants(
                sess, graph.as_graph_def(), [y.op.name]
            )
    nodes = [n for n in frozen.node if n.name != x.op.name]
    ops = sorted(n.op for n in nodes)
    if not all(n.name.startswith("LayerNorm/") for n in nodes) or ops.count("Mean") != 2 or "Rsqrt" not in ops:
        raise RuntimeError(f"unexpected tf_slim layer norm structure: {[(n.name, n.op) for n in nodes]}")
    return LayerNormTemplate(nodes, x.op.name, frozen.versions.producer)


class BlockBuilder:
    """Collects the entries of one block (relative names)."""

    def __init__(self) -> None:
        from tensorflow.core.framework.node_def_pb2 import NodeDef

        self._NodeDef = NodeDef
        self.entries: list[Entry] = []

    def node(self, suffix: str, op: str, inputs: Sequence[str | None] = (), **attrs: object) -> str:
        proto = self._NodeDef(op=op)
        for key, value in attrs.items():
            attr = proto.attr[key]
            if isinstance(value, bool):
                attr.b = value
            elif isinstance(value, bytes):
                attr.s = value
            elif isinstance(value, int):
                attr.type = value  # only DataType enums are passed as ints here
            else:
                raise TypeError(f"{key}={value!r}")
        self.entries.append(Entry(suffix, proto, list(inputs)))
        return suffix

    def const(self, suffix: str, value: np.ndarray | float | Sequence[int], *, random: bool = False) -> str:
        from tensorflow.python.framework import tensor_util

        arr = np.asarray(value, dtype=np.float32 if isinstance(value, float) or random else None)
        proto = self._NodeDef(op="Const")
        proto.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(arr))
        proto.attr["dtype"].type = proto.attr["value"].tensor.dtype
        self.entries.append(Entry(suffix, proto, [], tuple(arr.shape) if random else None))
        return suffix

    def dense(self, scope: str, x: str | None, n_in: int, n_out: int) -> str:
        kernel = self.const(f"{scope}/kernel", np.zeros((n_in, n_out), np.float32), random=True)
        bias = self.const(f"{scope}/bias", np.zeros((n_out,), np.float32), random=True)
        k_read = self.node(f"{scope}/MatMul/ReadVariableOp", "Identity", [kernel], T=DT_FLOAT)
        mm = self.node(f"{scope}/MatMul", "MatMul", [x, k_read], T=DT_FLOAT,
                       transpose_a=False, transpose_b=False, grad_a=False, grad_b=False)
        b_read = self.node(f"{scope}/BiasAdd/ReadVariableOp", "Identity", [bias], T=DT_FLOAT)
        return self.node(f"{scope}/BiasAdd", "BiasAdd", [mm, b_read], T=DT_FLOAT, data_format=b"NHWC")

    def layer_norm(self, scope: str, x: str | None, template: LayerNormTemplate) -> str:
        """Copy the real layer norm under ``scope`` (``""`` for the block root)."""
        prefix = f"{scope}/" if scope else ""
        out = None
        for src in template.nodes:
            proto = self._NodeDef()
            proto.CopyFrom(src)
            inputs: list[str | None] = []
            for ref in src.input:
                control = ref.startswith("^")
                name = ref[1:] if control else ref
                if name == template.input_name or name.startswith(template.input_name + ":"):
                    if control:
                        raise RuntimeError("control input from the layer norm input")
                    inputs.append(x if name == template.input_name else f"{x}{name[len(template.input_name):]}")
                else:
                    inputs.append(("^" if control else "") + prefix + name)
            del proto.input[:]
            proto.name = ""
            self.entries.append(Entry(prefix + src.name, proto, inputs))
            out = prefix + src.name
        assert out is not None and out.endswith("LayerNorm/batchnorm/add_1")
        return out


@dataclass
class Block:
    entries: list[Entry]
    output: str


def embeddings_block(ln: LayerNormTemplate) -> Block:
    b = BlockBuilder()
    mul = b.node("mul", "Mul", [None, b.const("mul/y", 2.0)], T=DT_FLOAT)
    add = b.node("add", "AddV2", [mul, b.const("add/y", 1.0)], T=DT_FLOAT)
    return Block(b.entries, b.layer_norm("", add, ln))


def encoder_layer_block(ln: LayerNormTemplate, *, hidden: int, heads: int, batch: int, seq: int) -> Block:
    """One ``bert/encoder/layer_N`` block, as google-research/bert builds it."""
    b = BlockBuilder()
    head = hidden // heads
    inter = 4 * hidden
    s = "attention/self"
    q = b.dense(f"{s}/query", None, hidden, hidden)
    k = b.dense(f"{s}/key", None, hidden, hidden)
    v = b.dense(f"{s}/value", None, hidden, hidden)

    def split(t: str, reshape: str, transpose: str) -> str:
        shape = b.const(f"{s}/{reshape}/shape", np.array([batch, seq, heads, head], np.int32))
        r = b.node(f"{s}/{reshape}", "Reshape", [t, shape], T=DT_FLOAT, Tshape=DT_INT32)
        perm = b.const(f"{s}/{transpose}/perm", np.array([0, 2, 1, 3], np.int32))
        return b.node(f"{s}/{transpose}", "Transpose", [r, perm], T=DT_FLOAT, Tperm=DT_INT32)

    qt = split(q, "Reshape", "transpose")
    kt = split(k, "Reshape_1", "transpose_1")
    scores = b.node(f"{s}/MatMul", "BatchMatMulV2", [qt, kt], T=DT_FLOAT,
                    adj_x=False, adj_y=True, grad_x=False, grad_y=False)
    scaled = b.node(f"{s}/truediv", "RealDiv", [scores, b.const(f"{s}/truediv/y", float(math.sqrt(head)))],
                    T=DT_FLOAT)
    probs = b.node(f"{s}/Softmax", "Softmax", [scaled], T=DT_FLOAT)
    vt = split(v, "Reshape_2", "transpose_2")
    ctx = b.node(f"{s}/MatMul_1", "BatchMatMulV2", [probs, vt], T=DT_FLOAT,
                 adj_x=False, adj_y=False, grad_x=False, grad_y=False)
    perm = b.const(f"{s}/transpose_3/perm", np.array([0, 2, 1, 3], np.int32))
    ctx = b.node(f"{s}/transpose_3", "Transpose", [ctx, perm], T=DT_FLOAT, Tperm=DT_INT32)
    shape = b.const(f"{s}/Reshape_3/shape", np.array([batch * seq, hidden], np.int32))
    ctx = b.node(f"{s}/Reshape_3", "Reshape", [ctx, shape], T=DT_FLOAT, Tshape=DT_INT32)

    dense = b.dense("attention/output/dense", ctx, hidden, hidden)
    residual = b.node("attention/output/add", "AddV2", [dense, None], T=DT_FLOAT)
    attn = b.layer_norm("attention/output", residual, ln)

    g = "intermediate/dense/Gelu"
    pre = b.dense("intermediate/dense", attn, hidden, inter)
    half = b.node(f"{g}/mul", "Mul", [b.const(f"{g}/mul/x", 0.5), pre], T=DT_FLOAT)
    neg = b.node(f"{g}/Neg", "Neg", [pre], T=DT_FLOAT)
    arg = b.node(f"{g}/mul_1", "Mul", [neg, b.const(f"{g}/Cast/x", float(np.float32(1 / math.sqrt(2))))],
                 T=DT_FLOAT)
    erfc = b.node(f"{g}/Erfc", "Erfc", [arg], T=DT_FLOAT)
    gelu = b.node(f"{g}/mul_2", "Mul", [half, erfc], T=DT_FLOAT)

    dense = b.dense("output/dense", gelu, inter, hidden)
    residual = b.node("output/add", "AddV2", [dense, attn], T=DT_FLOAT)
    return Block(b.entries, b.layer_norm("output", residual, ln))


def pooler_block(hidden: int) -> Block:
    b = BlockBuilder()
    dense = b.dense("dense", None, hidden, hidden)
    return Block(b.entries, b.node("dense/Tanh", "Tanh", [dense], T=DT_FLOAT))


# --------------------------------------------------------------------------- graph
@dataclass
class GeneratedGraph:
    graph_def: object
    layers: int
    layer_norm_scopes: list[str]
    feed_name: str
    feed_shape: tuple[int, int]
    output: str


class EncoderGenerator:
    """Stamps out blocks into one GraphDef."""

    def __init__(self, *, hidden: int, heads: int, batch: int, seq: int, seed: int) -> None:
        if hidden % heads:
            raise SystemExit(f"--hidden {hidden} is not a multiple of --heads {heads}")
        self.hidden, self.heads, self.batch, self.seq, self.seed = hidden, heads, batch, seq, seed
        self.rows = batch * seq
        self.ln = real_layer_norm_template(self.rows, hidden)
        self.embeddings = embeddings_block(self.ln)
        self.layer = encoder_layer_block(self.ln, hidden=hidden, heads=heads, batch=batch, seq=seq)
        self.pooler = pooler_block(hidden)
        self.fixed_nodes = 1 + len(self.embeddings.entries) + len(self.pooler.entries)
        self.ln_per_layer = sum(e.suffix.endswith("LayerNorm/batchnorm/add_1") for e in self.layer.entries)

    @property
    def nodes_per_layer(self) -> int:
        return len(self.layer.entries)

    def layers_for(self, nodes: int) -> int:
        return max(1, math.ceil((nodes - self.fixed_nodes) / self.nodes_per_layer))

    def build(self, layers: int) -> GeneratedGraph:
        from tensorflow.core.framework import graph_pb2

        rng = np.random.default_rng(self.seed)
        graph = graph_pb2.GraphDef()
        graph.versions.producer = self.ln.producer
        feed = "input_embeddings"
        ph = graph.node.add(name=feed, op="Placeholder")
        ph.attr["dtype"].type = DT_FLOAT
        for d in (self.rows, self.hidden):
            ph.attr["shape"].shape.dim.add(size=d)
        ln_scopes: list[str] = []
        x = self._stamp(graph, self.embeddings, "bert/embeddings/", feed, rng, ln_scopes)
        for i in range(layers):
            x = self._stamp(graph, self.layer, f"bert/encoder/layer_{i}/", x, rng, ln_scopes)
        out = self._stamp(graph, self.pooler, "bert/pooler/", x, rng, ln_scopes)
        return GeneratedGraph(graph, layers, ln_scopes, feed + ":0", (self.rows, self.hidden), out + ":0")

    @staticmethod
    def _stamp(graph, block: Block, prefix: str, x: str, rng: np.random.Generator, ln_scopes: list[str]) -> str:
        add = graph.node.add
        randoms = [e.random_shape for e in block.entries if e.random_shape is not None]
        total = sum(int(np.prod(s)) for s in randoms)
        payload = (rng.standard_normal(total, dtype=np.float32) * 0.05).tobytes()
        offset = 0
        for e in block.entries:
            node = add()
            node.CopyFrom(e.proto)
            node.name = prefix + e.suffix
            if e.inputs:
                node.input.extend([
                    x if ref is None else ("^" + prefix + ref[1:] if ref[0] == "^" else prefix + ref)
                    for ref in e.inputs
                ])
            if e.random_shape is not None:
                size = 4 * int(np.prod(e.random_shape))
                node.attr["value"].tensor.tensor_content = payload[offset:offset + size]
                offset += size
            if e.suffix.endswith("LayerNorm/batchnorm/add_1"):
                ln_scopes.append(node.name.rsplit("/", 2)[0])
        return prefix + block.output


# --------------------------------------------------------------------------- checks
def check_small_instance(gen: EncoderGenerator) -> str:
    """Run a two-layer instance in TensorFlow, fuse it, and compare outputs."""
    from scopefusion.core.verify.execute import run_graph_def
    from scopefusion.core.fusion.options import FusionOptions
    from scopefusion.core.scope.pass_manager import ScopePassManager
    from scopefusion.core.verify.tf_form import to_tf_runnable
    from scopefusion.plugins.registry import load_registry
    from tensorflow.core.framework import graph_pb2

    small = gen.build(2)
    feed = {small.feed_name: np.random.default_rng(1).standard_normal(small.feed_shape).astype(np.float32)}
    (expected,) = run_graph_def(small.graph_def, feed, [small.output])
    reg = load_registry()
    fused = graph_pb2.GraphDef()
    fused.CopyFrom(small.graph_def)
    outcome = ScopePassManager(reg.passes, reg.fused_ops, FusionOptions()).run(fused)
    n = outcome.report.fused_count("LayerNorm")
    if n != len(small.layer_norm_scopes):
        raise SystemExit(f"small check: {n} of {len(small.layer_norm_scopes)} layer norms fused")
    (actual,) = run_graph_def(to_tf_runnable(outcome.graph_def, reg.fused_ops), feed, [small.output])
    err = float(np.max(np.abs(actual - expected)))
    if not np.all(np.isfinite(expected)) or err > 1e-4:
        raise SystemExit(f"small check: fused output differs from the original (max abs err {err:g})")
    return (f"2-layer instance ({len(small.graph_def.node)} nodes) runs in TensorFlow; "
            f"{n} layer norms fused, output max abs diff {err:.1e}")


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


@dataclass
class FuseTiming:
    load: float
    run: float
    save: float
    stages: dict[str, float]
    gc_seconds: float
    gc_collections: list[int]
    fused: int
    nodes_after: int

    @property
    def total(self) -> float:
        return self.load + self.run + self.save


@dataclass
class Result:
    nodes: int
    layers: int
    layer_norms: int
    file_bytes: int
    gen_seconds: float
    baseline: float
    fuse: FuseTiming
    repeats: int
    baseline_repeats: int

    @property
    def total(self) -> float:
        return self.fuse.total

    @property
    def ratio(self) -> float:
        return self.total / self.baseline


def best_of(n: int, fn: Callable[[], None]) -> float:
    best = math.inf
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def fuse_once(src: Path, dest: Path, scopes: Sequence[str]) -> FuseTiming:
    """load + run + save, each timed; checks that every layer norm scope was fused."""
    from scopefusion.core.graph.io import load_model, save_graph
    from scopefusion.core.fusion.options import FusionOptions
    from scopefusion.core.scope.pass_manager import ScopePassManager
    from scopefusion.plugins.registry import load_registry

    reg = load_registry()
    manager = ScopePassManager(reg.passes, reg.fused_ops, FusionOptions())
    with GcMeter() as meter:
        t0 = time.perf_counter()
        model = load_model(src)
        t_load = time.perf_counter() - t0

        t0 = time.perf_counter()
        outcome = manager.run(model.graph_def)
        t_run = time.perf_counter() - t0

        t0 = time.perf_counter()
        save_graph(outcome.graph_def, dest)
        t_save = time.perf_counter() - t0

    report = outcome.report
    ln = report.pass_report(LAYER_NORM_PASS)
    fused_scopes = sorted(s for f in ln.fused for s in f.scopes)
    if ln.error or fused_scopes != sorted(scopes):
        missing = sorted(set(scopes) - set(fused_scopes))
        reasons = [f"{r.name}: {r.reason}" for r in ln.refused[:3]]
        raise SystemExit(
            f"{src.name}: fused {len(fused_scopes)} of {len(scopes)} layer norm scopes "
            f"(missing e.g. {missing[:3]}; refused {reasons}; error {ln.error})"
        )
    fused = report.fused_count("LayerNorm")
    if fused != len(scopes) or sum(1 for n in outcome.graph_def.node if n.op == "LayerNorm") != len(scopes):
        raise SystemExit(f"{src.name}: {fused} LayerNorm nodes for {len(scopes)} layer norm scopes")
    return FuseTiming(
        load=t_load, run=t_run, save=t_save, stages=dict(report.stage_seconds),
        gc_seconds=meter.seconds, gc_collections=list(meter.collections),
        fused=fused, nodes_after=report.nodes_after,
    )


def bench_one(gen: EncoderGenerator, nodes: int, workdir: Path, baseline_repeats: int, repeats: int) -> Result:
    from tensorflow.core.framework import graph_pb2

    t0 = time.perf_counter()
    generated = gen.build(gen.layers_for(nodes))
    src = workdir / f"encoder_{nodes}.pb"
    src.write_bytes(generated.graph_def.SerializeToString())
    n_nodes = len(generated.graph_def.node)
    scopes = generated.layer_norm_scopes
    layers = generated.layers
    del generated
    gen_seconds = time.perf_counter() - t0
    gc.collect()

    data = src.read_bytes()

    def plain() -> None:
        g = graph_pb2.GraphDef()
        g.ParseFromString(data)
        g.SerializeToString()

    baseline = best_of(baseline_repeats, plain)
    del data
    gc.collect()

    dest = workdir / f"encoder_{nodes}.fused.pb"
    runs = []
    for _ in range(repeats):
        runs.append(fuse_once(src, dest, scopes))
        gc.collect()
    result = Result(
        nodes=n_nodes, layers=layers, layer_norms=len(scopes), file_bytes=src.stat().st_size,
        gen_seconds=gen_seconds, baseline=baseline, fuse=min(runs, key=lambda r: r.total), repeats=repeats,
        baseline_repeats=baseline_repeats,
    )
    src.unlink()
    dest.unlink()
    return result


def profile_run(gen: EncoderGenerator, nodes: int, workdir: Path, top: int) -> None:
    import cProfile
    import pstats

    from scopefusion.core.graph.io import load_model
    from scopefusion.core.fusion.options import FusionOptions
    from scopefusion.core.scope.pass_manager import ScopePassManager
    from scopefusion.plugins.registry import load_registry

    generated = gen.build(gen.layers_for(nodes))
    src = workdir / f"encoder_{nodes}.profile.pb"
    src.write_bytes(generated.graph_def.SerializeToString())
    del generated
    gc.collect()
    reg = load_registry()
    manager = ScopePassManager(reg.passes, reg.fused_ops, FusionOptions())
    model = load_model(src)
    profiler = cProfile.Profile()
    profiler.enable()
    manager.run(model.graph_def)
    profiler.disable()
    src.unlink()
    print(f"\ncProfile of ScopePassManager.run, {nodes} nodes (profiler overhead inflates Python-heavy code)")
    stats = pstats.Stats(profiler, stream=sys.stdout).strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


# --------------------------------------------------------------------------- report
def print_result(r: Result) -> None:
    f = r.fuse
    mb = r.file_bytes / 1e6
    print(f"\n== {r.nodes} nodes ({r.layers} encoder layers, {mb:.1f} MB .pb, generated in {r.gen_seconds:.2f} s)")
    print(f"   layer norm scopes: {r.layer_norms}, LayerNorm ops fused: {f.fused}, nodes after fusion: {f.nodes_after}")
    rows = [("load (read + parse)", f.load)]
    rows += [(f"run: {s}", f.stages.get(s, 0.0)) for s in STAGES]
    other = f.run - sum(f.stages.get(s, 0.0) for s in STAGES)
    print(f"   {'stage':<26}{'seconds':>9}{'share':>8}" + ("" if r.repeats == 1 else f"   (fastest of {r.repeats} runs)"))
    for name, sec in rows:
        print(f"   {name:<26}{sec:9.3f}{100 * sec / r.total:7.1f}%")
    if abs(other) >= 5e-4:
        print(f"   {'run: outside the stages':<26}{other:9.3f}{100 * other / r.total:7.1f}%")
    print(f"   {'save (serialize + write)':<26}{f.save:9.3f}{100 * f.save / r.total:7.1f}%")
    print(f"   {'run (total)':<26}{f.run:9.3f}")
    print(f"   {'total fuse time':<26}{r.total:9.3f}")
    gens = "/".join(str(n) for n in f.gc_collections)
    print(f"   {'  of which gc pauses':<26}{f.gc_seconds:9.3f}{100 * f.gc_seconds / r.total:7.1f}%"
          f"   ({gens} collections of generation 0/1/2)")
    print(f"   {'baseline parse+serialize':<26}{r.baseline:9.3f}   (best of {r.baseline_repeats})")
    verdict = "met" if r.ratio <= TARGET_RATIO else "NOT met"
    print(f"   {'ratio total / baseline':<26}{r.ratio:9.2f}   (target <= {TARGET_RATIO:g}: {verdict})")


def print_summary(results: Sequence[Result]) -> None:
    print("\n== per size (seconds)")
    print(f"   {'nodes':>8} {'load':>6} {'index':>6} {'scope':>6} {'match':>6} {'apply':>6} {'valid':>6}"
          f" {'save':>6} {'total':>6} {'gc':>6} {'base':>6} {'ratio':>6} {'s/1k nodes':>11} {'ex-gc/1k':>9}"
          f" {'base/1k':>8}")
    for r in results:
        f, st = r.fuse, r.fuse.stages
        print(f"   {r.nodes:>8} {f.load:6.3f} {st['index']:6.3f} {st['scope_graph']:6.3f} {st['match']:6.3f}"
              f" {st['apply']:6.3f} {st['validate']:6.3f} {f.save:6.3f} {r.total:6.3f} {f.gc_seconds:6.3f}"
              f" {r.baseline:6.3f} {r.ratio:6.2f} {1000 * r.total / r.nodes:11.5f}"
              f" {1000 * (r.total - f.gc_seconds) / r.nodes:9.5f} {1000 * r.baseline / r.nodes:8.5f}")
    if len(results) > 1:
        ordered = sorted(results, key=lambda r: r.nodes)
        small, large = ordered[0], ordered[-1]
        growth = (large.total / large.nodes) / (small.total / small.nodes)
        ex_gc = ((large.total - large.fuse.gc_seconds) / large.nodes) / (
            (small.total - small.fuse.gc_seconds) / small.nodes)
        print(f"   seconds per 1k nodes at {large.nodes} / at {small.nodes} nodes: {growth:.2f} "
              f"(1.00 is linear; {'within' if growth <= 1.25 else 'NOT within'} 25%); "
              f"without gc pauses: {ex_gc:.2f}")


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
    parser.add_argument("--nodes", type=int, default=200_000, help="graph size in nodes (default 200000)")
    parser.add_argument("--sizes", type=parse_sizes, default=None,
                        help="comma-separated node counts to run instead of --nodes, e.g. 50000,100000,200000")
    parser.add_argument("--hidden", type=int, default=16,
                        help="hidden width; sets the size of the Const payloads (default 16)")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=8)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2,
                        help="fuse each graph this many times and keep the fastest run (default 2)")
    parser.add_argument("--baseline-repeats", type=int, default=3)
    parser.add_argument("--skip-tf-check", action="store_true",
                        help="skip running a small instance in TensorFlow before timing")
    parser.add_argument("--profile", action="store_true",
                        help="also profile the run stage with cProfile on the largest size")
    parser.add_argument("--profile-top", type=int, default=30)
    args = parser.parse_args(argv)
    sizes = args.sizes or [args.nodes]
    if min(sizes) < 1000:
        parser.error("--nodes must be >= 1000")

    started = time.perf_counter()
    import tensorflow as tf
    from google.protobuf.internal import api_implementation

    gen = EncoderGenerator(hidden=args.hidden, heads=args.heads, batch=args.batch, seq=args.seq, seed=args.seed)
    print(f"python {platform.python_version()}, tensorflow {tf.__version__}, "
          f"protobuf {api_implementation.Type()} backend, {os.cpu_count()} CPUs, gc enabled: {gc.isenabled()}")
    print(f"layer norm template: real tf_slim layer_norm, {len(gen.ln.nodes)} frozen nodes; "
          f"encoder layer: {gen.nodes_per_layer} nodes, {gen.ln_per_layer} layer norms; "
          f"hidden {args.hidden}, {args.heads} heads, input [{gen.rows}, {args.hidden}]")
    if not args.skip_tf_check:
        print("check:", check_small_instance(gen))

    results = []
    with tempfile.TemporaryDirectory(prefix="bench_fuse.") as tmp:
        for nodes in sizes:
            r = bench_one(gen, nodes, Path(tmp), args.baseline_repeats, max(1, args.repeat))
            print_result(r)
            results.append(r)
        print_summary(results)
        if args.profile:
            profile_run(gen, max(sizes), Path(tmp), args.profile_top)
    print(f"\nwall time {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
