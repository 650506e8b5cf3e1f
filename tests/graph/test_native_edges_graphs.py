"""On real frozen graphs (a BERT encoder; a TF1 loop with ports, control edges and a back edge; the
benchmark's four generated graphs, built from real tf_slim, tf_keras and keras-hub layers), the C
extensions ``native/_edges.c``, ``_tables.c`` and ``_order.c`` give every index table the pure-Python
path gives, and a whole fusion run writes the same bytes on both paths, each re-index after a rewrite
the same."""
from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

import pytest
from tests.helpers.native_paths import assert_same_on_both_paths
from tests.helpers.pass_checks import REGISTRY
from tests.models import loop_models as lm
from tests.models import rnn_models as rm

import scopefusion
import scopefusion.core.fusion.pipeline as pipeline_module
from scopefusion.core.graph.index import GraphIndex

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _generated(kind: str):
    """The benchmark's ``kind`` graph at two blocks."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from bench_graphs import make_generator
    finally:
        sys.path.remove(str(BENCHMARKS))
    generator = make_generator(kind, hidden=16, heads=4, batch=2, seq=8, seed=0)
    return generator.build(2).graph_def


@pytest.fixture(scope="module", params=["bert", "tf1_loop", "gen:bert", "gen:transformer", "gen:dense-gelu",
                                        "gen:ln-blocks"])
def graph_def(request, bert_encoder):
    if request.param == "bert":
        return bert_encoder.graph_def
    if request.param == "tf1_loop":
        return lm.dynamic_rnn(rm.gru(), control_flow_v1=True).graph_def
    return _generated(request.param.partition(":")[2])


def _tables(graph_def) -> tuple:
    index = GraphIndex(graph_def)
    sinks_from_inputs = index.sinks()
    return (index.inputs, sinks_from_inputs, index.consumers, index.sinks(), index.topological_order(),
            index._by_op_table(), index.position)


def test_index_tables_are_the_same(graph_def):
    inputs, _, consumers, _, order, by_op, _ = assert_same_on_both_paths(lambda: _tables(graph_def))
    assert len(order) == len(graph_def.node) and sum(map(len, by_op.values())) == len(order)
    assert sum(map(len, inputs)) == sum(map(len, consumers)) > 0
    if any(node.op == "Merge" for node in graph_def.node):  # the loop: ports past 0, control edges, a back edge
        assert {-1, 1} <= {port for ins in inputs for _, port in ins}


def _fused_and_reindexed(graph_def) -> tuple:
    """A whole fusion run's output bytes, and every table of each index its stages built by
    re-indexing after a rewrite."""
    seen: list[tuple] = []
    real = pipeline_module.reindex

    def recording(old, *args, **kwargs):
        new = real(old, *args, **kwargs)
        seen.append((new.names, new.ops, new.inputs, new.index, new.consumers, new.topological_order(),
                     new.sinks(), new._by_op_table()))
        return new

    with mock.patch.object(pipeline_module, "reindex", recording):
        result = scopefusion.fuse(graph_def, registry=REGISTRY, hints=False)
    return result.fused_graph_def.SerializeToString(deterministic=True), result.report.fused_count(), seen


def test_a_fusion_run_and_its_reindexes_are_the_same(graph_def):
    """The whole pipeline (an index, then a re-index after each rewriting stage) on both paths."""
    fused, count, reindexed = assert_same_on_both_paths(lambda: _fused_and_reindexed(graph_def))
    assert count > 0 and reindexed
