"""A stage after a rewrite indexes the graph from the previous index and what the rewrite told
(``reindex``), reading only the changed and new nodes: on real graphs, through every stage and
function body, that index equals one built from scratch; a rewrite that tells less than it did
is caught."""
from __future__ import annotations

from collections import Counter, deque

import numpy as np
import pytest
from tests.models import loop_models as lm
from tests.models import rnn_models as rm
from tests.helpers.pass_checks import REGISTRY
from tests.helpers.freeze import freeze_graph
from tests.passes.rnn.test_rnn_loops import assert_verifies

import scopefusion
import scopefusion.core.fusion.pipeline as pipeline_module
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.errors import GraphValidationError
from scopefusion.core.fusion.rewrite import apply_plans
from scopefusion.core.graph.reindex import layout_of, reindex


def _kahn(index: GraphIndex) -> list[int]:
    """Kahn's order written out plainly (first in, first out from the nodes of indegree 0 in graph
    order; a loop's NextIteration -> Merge data edge left out), for the index's own to equal."""
    merge, back = {"Merge", "RefMerge"}, {"NextIteration", "RefNextIteration"}
    indegree = [0] * len(index)
    succ: list[list[int]] = [[] for _ in range(len(index))]
    for c, ins in enumerate(index.inputs):
        for p, port in ins:
            if not (index.ops[c] in merge and port != -1 and index.ops[p] in back):
                indegree[c] += 1
                succ[p].append(c)
    queue = deque(i for i, d in enumerate(indegree) if d == 0)
    order = []
    while queue:
        order.append(queue.popleft())
        for c in succ[order[-1]]:
            indegree[c] -= 1
            if indegree[c] == 0:
                queue.append(c)
    assert len(order) == len(index)
    return order


def _same(updated: GraphIndex, graph_def) -> None:
    fresh = GraphIndex(graph_def)
    assert fresh.topological_order() == _kahn(fresh)
    assert updated.names == fresh.names and updated.ops == fresh.ops and updated.index == fresh.index
    assert updated.inputs == fresh.inputs
    assert len(updated.nodes) == len(graph_def.node)
    assert all(a is b for a, b in zip(updated.nodes, graph_def.node, strict=True))
    assert updated.topological_order() == fresh.topological_order()
    assert updated.consumers == fresh.consumers
    ids = updated.node_ids()  # one int object per node, the name table's, held by every edge and the order
    assert list(ids) == list(range(len(updated)))
    assert all(p is ids[p] for ins in updated.inputs for p, _ in ins)
    assert all(c is ids[c] for cs in updated.consumers for c, _, _ in cs)
    assert all(i is ids[i] for i in updated.topological_order())
    unread = GraphIndex(graph_def, validate=False)  # no consumers yet: the sinks read off the inputs
    assert "consumers" not in vars(unread) and unread.sinks() == fresh.sinks() == updated.sinks()
    if updated._colocated is not None:  # carried over: every node with colocation constraints (a superset)
        assert set(fresh.colocated_nodes()) <= set(updated.colocated_nodes())


def _counted(result) -> None:
    """The op counts after the run, worked out from the last index and rewrite, are the fused
    graph's own, in the order its nodes first show each op type."""
    recount = Counter(node.op for node in result.fused_graph_def.node)
    assert list(result.report.op_counts_after.items()) == list(recount.items())


@pytest.fixture
def checked(monkeypatch):
    """Every reindex of a run compared with a fresh index; the count of reindexes."""
    calls: list[int] = []

    def checking(old, dropped, changed, inserted, **kw):
        assert kw["layout"] == layout_of(len(old.nodes), dropped, inserted)  # the rewrite's own is the same
        consumers, order, by_op = old.consumers, old.topological_order(), dict(old._by_op_table())
        updated = reindex(old, dropped, changed, inserted, **kw)
        assert kw["release_old"] and "consumers" not in vars(old) and old._order is None and old._by_op is None
        # the old index let go of its tables; asked again, it builds them as they were
        assert old.consumers == consumers and old.topological_order() == order and old._by_op_table() == by_op
        _same(updated, old.graph_def)
        calls.append(len(dropped))
        return updated

    monkeypatch.setattr(pipeline_module, "reindex", checking)
    return calls


def test_bert_style_encoder(bert_encoder, checked):
    # layer norms (the graph's output among them: an alias), then dense layers and GELU, then epilogues
    result = scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY, hints=False)
    assert result.report.fused_count("LayerNorm") == 7 and result.report.fused_count("MatMulBiasAddActivation") > 0
    assert len(checked) == 2 and all(checked)
    _counted(result)


def test_keras_hub_bert(keras_hub_bert, checked):
    result = scopefusion.fuse(keras_hub_bert.graph_def, registry=REGISTRY, hints=False)
    assert result.report.fused_count("LayerNorm") == 5
    assert len(checked) >= 1
    _counted(result)


def test_keras_mobilenet_v2(keras_mobilenet_v2, checked):
    result = scopefusion.fuse(keras_mobilenet_v2.graph_def, registry=REGISTRY, hints=False)
    assert result.report.fused
    assert len(checked) >= 1
    _counted(result)


def test_an_output_made_an_alias_by_the_last_stage_is_counted_as_one(checked):
    """With graph fusion switched off the scope stage is the last: the layer norm ending the graph
    is its output, so the rewrite keeps the output's name on an Identity reading the fused node, and
    the op counts after the run say so."""
    import tensorflow as tf
    import tf_slim

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [2, 8], name="x")
        return {x: np.ones([2, 8], np.float32)}, [tf_slim.layers.layer_norm(x, begin_norm_axis=-1)]

    frozen, _, outputs = freeze_graph(build)
    output = outputs[0].split(":")[0]
    switch = scopefusion.FusionSwitch.from_text(
        '{"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}}')
    result = scopefusion.fuse(frozen, registry=REGISTRY, hints=False, fusion_switch_file=switch)
    assert result.report.fused_count("LayerNorm") == 1 and not checked  # no stage after the scope stage
    ops = {n.name: n.op for n in result.fused_graph_def.node}
    assert ops[output] == "Identity" and {n.op for n in frozen.node if n.name == output} != {"Identity"}
    _counted(result)


@pytest.mark.parametrize("build", [
    lambda: lm.dynamic_rnn(rm.basic_lstm()),
    lambda: lm.dynamic_rnn(rm.gru(), control_flow_v1=True),
    lambda: lm.keras("tf_keras", "LSTM", layers=2),
], ids=["dynamic_rnn", "TF1 loop", "tf_keras LSTM"])
def test_recurrent_loops(build, checked):
    """Cells fused in loop bodies (functions) and in TF1 frames, then whole loops."""
    m = build()
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, hints=False,
                              enable_scope_fusion_passes="ScopeBasicLSTMCellPass,ScopeGRUCellPass,ScopeDynamicRNNPass")
    assert result.report.fused_count("DynamicRNN") + result.report.fused_count("DynamicGRUV2") >= 1
    assert checked
    _counted(result)
    assert_verifies(m, result.fused_graph_def)


def test_a_rewrite_that_does_not_tell_a_rewired_reader_is_caught(bert_encoder, monkeypatch):
    told: list = []

    def forgetful(index, plans):
        summary = apply_plans(index, plans)
        if summary.changed and not told:
            told.append(summary.changed.pop())
        return summary

    monkeypatch.setattr(pipeline_module, "apply_plans", forgetful)
    with pytest.raises(GraphValidationError, match="inputs that name no node in the graph"):
        scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY, hints=False)
    assert told


def test_colocation_with_a_fused_node_is_forgotten(checked):
    """A TF1 ``cond`` colocates its ``Switch`` nodes with the tensors they switch: here a tf_slim layer
    norm's output, which the scope stage fuses away.  The constraint is dropped (TensorFlow refuses a
    graph colocating a node with one that is gone), and the graph stage, on the index the scope stage's
    rewrite updated, fuses the dense layer in the branch."""
    frozen = lm.layer_norm_in_cond()
    constraints = [v.decode() for n in frozen.node if "_class" in n.attr for v in n.attr["_class"].list.s]
    assert "loc:@LayerNorm/batchnorm/add_1" in constraints
    result = scopefusion.fuse(frozen, registry=REGISTRY, hints=False)
    assert result.report.fused_count("LayerNorm") == 1 and result.report.fused_count("MatMulBiasAdd") == 1
    assert len(checked) == 2  # the graph and UB stages indexed what the stage before them rewrote
    names = {n.name for n in result.fused_graph_def.node}
    left = [v.decode() for n in result.fused_graph_def.node if "_class" in n.attr for v in n.attr["_class"].list.s]
    assert all(v.removeprefix("loc:@") in names for v in left)
    for taken in (True, False):
        scopefusion.verify(frozen, result.fused_graph_def, fused_ops=REGISTRY.fused_ops,
                           feeds={"x:0": np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8),
                                  "pred:0": np.array(taken)}).assert_ok()
