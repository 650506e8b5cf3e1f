"""Plans that would feed each other once contracted: the whole graph is sorted only where plans'
spans overlap.  On real graphs, and on plans that do close a cycle, the answer is the whole-graph
sort's, and most stages never sort the whole graph."""
from __future__ import annotations

import pytest
from tests.models import loop_models as lm
from tests.models import rnn_models as rm
from tests.helpers.pass_checks import REGISTRY
from tests.helpers.scale_shift import PAIR, PairPass, build_graph

import scopefusion
import scopefusion.core.fusion.conflicts as conflicts_module
from scopefusion.core.fusion.options import FusionOptions
from scopefusion.core.fusion.pass_spec import PassSpec
from scopefusion.core.scope.pass_manager import ScopePassManager
from scopefusion.core.fusion import cycles


@pytest.fixture
def compared(monkeypatch):
    """Every question a run asks, answered both ways and compared (each plan's border nodes too,
    against the graph); per question, whether the spans alone settled it."""
    answers: list[bool] = []

    def both(index, plans):
        for plan in plans:  # what the plan checks noted, against the graph
            assert plan.removed_set == set(plan.removed)
            assert plan.border == [d for d in plan.removed if any(
                n not in plan.removed_set for n in [*(p for p, _ in index.inputs[d]),
                                                    *(c for c, _, _ in index.consumers[d])])]
        fast = cycles.plans_on_cycle(index, plans)
        full = cycles._plans_on_cycle(index, plans)
        assert [id(p) for p in fast] == [id(p) for p in full]
        answers.append(cycles._no_cycle_possible(index, plans))
        return fast

    monkeypatch.setattr(conflicts_module, "plans_on_cycle", both)
    return answers


def test_real_graphs_are_settled_by_the_spans(bert_encoder, keras_hub_bert, keras_mobilenet_v2, compared):
    for model in (bert_encoder, keras_hub_bert, keras_mobilenet_v2):
        result = scopefusion.fuse(model.graph_def, registry=REGISTRY, hints=False)
        assert result.report.fused and not any(p.dropped for p in result.report.passes)
    assert len(compared) >= 5 and all(compared)


@pytest.mark.parametrize("build,settled", [
    (lambda: lm.bidirectional(rm.basic_lstm(), control_flow_v1=True), False),
    (lambda: lm.dynamic_rnn(rm.multi(rm.lstm(), rm.gru())), True),
], ids=["TF1 loops", "MultiRNNCell in a loop body"])
def test_loops_are_answered_alike(build, settled, compared):
    """Two TF1 loops, each plan taking a loop's back edge (NextIteration, Merge): the whole graph is
    sorted.  Two cells in a functional loop's body: their spans settle it."""
    result = scopefusion.fuse(build().graph_def, registry=REGISTRY, hints=False,
                              enable_scope_fusion_passes="ScopeBasicLSTMCellPass,ScopeGRUCellPass,ScopeDynamicRNNPass")
    assert result.report.fused and not any(p.dropped for p in result.report.passes)
    assert compared and set(compared) == {settled}


def test_two_plans_closing_a_cycle_are_found(compared):
    graph, _, _ = build_graph("crossed")
    manager = ScopePassManager([PassSpec(PairPass)], {"Pair": PAIR}, FusionOptions())
    out = manager.run(graph)
    assert [d.name for d in out.report.dropped] == ["blk_1"] and "would create a cycle" in out.report.dropped[0].reason
    assert compared[0] is False  # the two plans' spans overlap: sorted, and the cycle found
