"""A stage after a rewrite indexes the graph from the previous index and what the rewrite told
(``reindex``), reading only the changed and new nodes: on real graphs, through every stage and
function body, that index equals one built from scratch; a rewrite that tells less than it did
is caught."""
from __future__ import annotations

import pytest
import loop_models as lm
import rnn_models as rm
from pass_checks import REGISTRY

import scopefusion
import scopefusion.core.fusion.pipeline as pipeline_module
from scopefusion import GraphIndex
from scopefusion.core.errors import GraphValidationError
from scopefusion.core.fusion.rewrite import apply_plans
from scopefusion.core.graph.reindex import reindex


def _same(updated: GraphIndex, graph_def) -> None:
    fresh = GraphIndex(graph_def)
    assert updated.names == fresh.names and updated.ops == fresh.ops and updated.index == fresh.index
    assert updated.inputs == fresh.inputs
    assert len(updated.nodes) == len(graph_def.node) and all(a is b for a, b in zip(updated.nodes, graph_def.node))
    assert updated.topological_order() == fresh.topological_order()
    assert updated.consumers == fresh.consumers


@pytest.fixture
def checked(monkeypatch):
    """Every reindex of a run compared with a fresh index; the count of reindexes."""
    calls: list[int] = []

    def checking(old, dropped, changed, inserted, **kw):
        updated = reindex(old, dropped, changed, inserted, **kw)
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


def test_keras_hub_bert(keras_hub_bert, checked):
    result = scopefusion.fuse(keras_hub_bert.graph_def, registry=REGISTRY, hints=False)
    assert result.report.fused_count("LayerNorm") == 5
    assert len(checked) >= 1


def test_keras_mobilenet_v2(keras_mobilenet_v2, checked):
    result = scopefusion.fuse(keras_mobilenet_v2.graph_def, registry=REGISTRY, hints=False)
    assert result.report.fused
    assert len(checked) >= 1


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
