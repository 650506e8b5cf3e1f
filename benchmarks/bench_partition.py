"""Benchmark of the partitioner: placing and cutting graphs of 50k to 200k nodes.

The graph is a chain of copies of one real block that TensorFlow built and froze (TF1 graph
mode, tf_slim layers): a dense layer with GELU, its output printed as text and parsed back
(host-only string ops), a dense layer, a ``tf.compat.v1.while_loop`` of dense + GELU (runs on
the back end), a loop whose body formats its state as text (runs on the host, whole), and a
last dense layer.  Each block alternates host and device several times, so the graph has
thousands of segments, loops and string edges: the partitioner's every step has work.

Timed: indexing (``GraphIndex``), placement (candidates, spreading, clustering), the report,
and cutting every segment out into a function and a call node (both forms' work: one form).
``--sizes`` chooses the node counts; the per-node time across sizes shows the growth.
``--check`` first verifies on a 3-block graph that the cut graph computes what the original does.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HIDDEN = 8


def build_block() -> tuple[Any, str, str]:
    """One real frozen block: (GraphDef, its input placeholder's name, its output node's name)."""
    import tensorflow as tf
    import tf_slim
    from tensorflow.python.ops import control_flow_util

    tf1 = tf.compat.v1
    tf.get_logger().setLevel("ERROR")
    v2 = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
    graph = tf.Graph()
    try:
        with graph.as_default():
            x = tf1.placeholder(tf.float32, [2, HIDDEN], name="x")
            h = tf_slim.fully_connected(x, HIDDEN, activation_fn=tf.nn.gelu, scope="dense_in")
            h = tf.strings.to_number(tf.strings.as_string(h, precision=6), name="reparsed")
            h = tf_slim.fully_connected(h, HIDDEN, activation_fn=None, scope="dense_mid")

            def refine(i, v):
                return i + 1, tf_slim.fully_connected(v, HIDDEN, activation_fn=tf.nn.gelu, scope="refine_dense",
                                                      reuse=tf1.AUTO_REUSE) + v

            def formatted(i, v):
                return i + 1, tf.strings.to_number(tf.strings.as_string(v * 0.5, precision=6))

            _, h = tf1.while_loop(lambda i, v: i < 2, refine, [tf.constant(0), h], name="refine")
            _, h = tf1.while_loop(lambda i, v: i < 2, formatted, [tf.constant(0), h], name="formatted")
            y = tf.identity(tf_slim.fully_connected(h, HIDDEN, activation_fn=tf.nn.relu, scope="dense_out"), name="y")
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                frozen = tf1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), [y.op.name])
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = v2
    return frozen, "x", "y"


def chain(block: Any, input_name: str, output_name: str, nodes: int) -> Any:
    """Copies of ``block`` under scopes ``b0/``, ``b1/``, ..., each reading the previous one's output."""
    from tensorflow.core.framework import graph_pb2

    body = [n for n in block.node if n.name != input_name]
    copies = max(1, round(nodes / len(body)))
    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(block.versions)
    out.node.add().CopyFrom(next(n for n in block.node if n.name == input_name))
    previous = input_name
    for k in range(copies):
        prefix = f"b{k}/"
        for proto in body:
            node = out.node.add()
            node.CopyFrom(proto)
            node.name = prefix + proto.name
            node.input[:] = [_renamed(i, input_name, previous, prefix) for i in proto.input]
            if "frame_name" in node.attr:
                node.attr["frame_name"].s = prefix.encode() + node.attr["frame_name"].s
            if "_class" in node.attr:
                del node.attr["_class"]
        previous = prefix + output_name
    return out


def _renamed(text: str, input_name: str, previous: str, prefix: str) -> str:
    control = text.startswith("^")
    name = text[1:] if control else text
    base = name.split(":")[0]
    renamed = previous + name[len(base):] if base == input_name else prefix + name
    return ("^" if control else "") + renamed


def time_partition(graph: Any) -> dict[str, Any]:
    """Index, place, report and cut ``graph``; seconds per step and counts."""
    from scopefusion.core.graph.index import GraphIndex, no_gc
    from scopefusion.core.graph.vocabulary import NON_OUTPUT_SINKS
    from scopefusion.core.partition import SupportedOps, build_report, partition_request, place
    from scopefusion.core.partition.boundary import default_graph_outputs
    from scopefusion.core.partition.mixed import MixedRun

    request = partition_request(mix_compile_mode=True)
    supported = SupportedOps.build()
    supported.why_not("Const")  # the op registry's first lookup imports TensorFlow's op modules
    with no_gc():
        t0 = time.perf_counter()
        index = GraphIndex(graph)
        t1 = time.perf_counter()
        placement = place(index, supported, request)
        t2 = time.perf_counter()
        report = build_report(placement, default_graph_outputs(index, NON_OUTPUT_SINKS))
        t3 = time.perf_counter()
        run = MixedRun(request, supported, {})
        run.placement = placement
        run.finish(graph, [], None, segments=False)
        t4 = time.perf_counter()
    return {"nodes": len(index), "segments": len(report.segments), "host": len(report.host),
            "index": t1 - t0, "place": t2 - t1, "report": t3 - t2, "cut": t4 - t3, "total": t4 - t0}


def check(block: Any, input_name: str, output_name: str) -> str:
    """The cut TensorFlow-runnable graph of a 3-block chain computes what the chain computes."""
    import scopefusion

    graph = chain(block, input_name, output_name, 3 * (len(block.node) - 1))
    result = scopefusion.fuse(graph, emit="tf", mix_compile_mode=True)
    feeds = {"x": np.random.default_rng(0).normal(size=(2, HIDDEN)).astype(np.float32)}
    outcome = scopefusion.verify(graph, result.graph_def, fused_ops={}, feeds=feeds)
    outcome.assert_ok()
    return (f"check: {len(graph.node)} nodes, {len(result.partition.report.segments)} segments, "
            f"{result.report.fused_count()} fused op(s); the cut graph matches the original")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50000,100000,200000", help="node counts (comma-separated)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per size; the best is shown")
    parser.add_argument("--check", action="store_true", help="verify a small instance first")
    args = parser.parse_args(argv)
    block, input_name, output_name = build_block()
    print(f"block: {len(block.node)} nodes (TF1 graph mode, tf_slim, two while loops)")
    if args.check:
        print(check(block, input_name, output_name))
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        graph = chain(block, input_name, output_name, size)
        runs = [time_partition(graph) for _ in range(max(1, args.repeats))]
        rows.append(min(runs, key=lambda r: r["total"]))
    print("| nodes | segments | host nodes | index | place | report | cut | total | us/node |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['nodes']:,} | {r['segments']:,} | {r['host']:,} | {r['index']:.3f} | {r['place']:.3f} | "
              f"{r['report']:.3f} | {r['cut']:.3f} | {r['total']:.3f} s | {1e6 * r['total'] / r['nodes']:.2f} |")
    first, last = rows[0], rows[-1]
    growth = (last["total"] / last["nodes"]) / (first["total"] / first["nodes"])
    print(f"per-node time, largest vs smallest graph: {growth:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
