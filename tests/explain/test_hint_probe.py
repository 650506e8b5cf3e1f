"""Which passes left out of a run are tried for hints: only those that may fuse something in the
fused graph (a scope pass's ``may_fuse``, a graph pass's pattern roots); when none may, the fused
graph is neither copied nor fused again.  That a kept pass still gives its hint on real graphs is
tested beside each pass (instance norm, detection, RNN cells and loops)."""
from __future__ import annotations

import pytest
from tests.models import loop_models as lm
from tests.models import rnn_models as rm
from tests.helpers.pass_checks import REGISTRY

import scopefusion
from scopefusion.explain import hints as hints_module
from scopefusion import ScopeBasePass, ScopePattern
from scopefusion.builtin_passes.scope.clip_boxes import ScopeClipBoxesPass
from scopefusion.builtin_passes.scope.decode_bbox import ScopeDecodeBboxV2Pass
from scopefusion.builtin_passes.scope.instance_norm import ScopeInstanceNormPass
from scopefusion.builtin_passes.scope.rnn_cells.passes import ScopeBasicLSTMCellPass, ScopeGRUCellPass
from scopefusion.builtin_passes.scope.rnn_loops.passes import ScopeDynamicRNNPass
from scopefusion.core.fusion.options import FusionOptions
from scopefusion.core.graph_fusion.switch import FusionSwitch
from scopefusion.core.scope.patterns import pattern_sets_may_match


class _TwoBatches(ScopeBasePass):
    """A first batch labels scopes holding a Mean (or, alternatively, an Exp with a Neg); the
    second matches scopes holding two of those labels, by label alone."""

    general = False

    def define_patterns(self):
        first = [ScopePattern("m").add_node_op_type_feature("Mean", 0, 1),
                 ScopePattern("m").add_node_op_type_feature("Exp", 1).add_node_op_type_feature("Neg", 0, 1)]
        second = [ScopePattern("pair").add_scope_feature(sub_type="m", num=2)]
        return [[first, second]]

    def generate_fusion_result(self, scopes, result):
        result.reject("only a test")


class _Absent(_TwoBatches):
    """A pattern that asks for an op type to be absent needs nothing present."""

    def define_patterns(self):
        return [[[ScopePattern("x").add_node_op_type_feature("Softmax", -1)
                  .add_node_attr_feature("Cast", "Truncate", False)]]]


class _Groups(_TwoBatches):
    """Groups scopes of its own choosing: always tried."""

    def last_match_scopes_and_ops(self, scope_graph):
        return []


def test_a_pattern_set_may_match_only_when_every_batch_has_a_pattern_whose_op_types_occur():
    sets = _TwoBatches().define_patterns()
    assert pattern_sets_may_match(sets, {"Mean", "Add"})
    assert pattern_sets_may_match(sets, {"Exp", "Neg"})
    assert not pattern_sets_may_match(sets, {"Exp", "Add"})  # the second alternative needs a Neg too
    assert not pattern_sets_may_match(sets, set())
    assert not pattern_sets_may_match([], {"Mean"})
    assert _TwoBatches().may_fuse({"Mean"}) and not _TwoBatches().may_fuse({"Add"})
    # "absent" asks for nothing; an attribute feature asks for its op type
    assert _Absent().may_fuse({"Cast"}) and not _Absent().may_fuse({"Softmax"})
    assert _Groups().may_fuse(set())


def test_built_in_scope_passes_say_what_they_need():
    assert ScopeDecodeBboxV2Pass().may_fuse({"Exp", "Unpack", "Transpose", "Pack", "Mul"})
    assert not ScopeDecodeBboxV2Pass().may_fuse({"Unpack", "Transpose", "Pack", "Mul"})
    assert not ScopeClipBoxesPass().may_fuse({"Minimum", "Unpack", "ConcatV2"})
    assert ScopeInstanceNormPass().may_fuse({"Mean", "SquaredDifference"})
    assert not ScopeInstanceNormPass().may_fuse({"Mean", "Sub", "Square"})
    for cell in (ScopeBasicLSTMCellPass(), ScopeGRUCellPass()):
        assert cell.may_fuse({"MatMul", "Split"}) and not cell.may_fuse({"MatMulBiasAdd", "Split"})
    loop = ScopeDynamicRNNPass()
    assert loop.may_fuse({"While"}) and loop.may_fuse({"StatelessWhile"}) and loop.may_fuse({"Enter", "Exit"})
    assert not loop.may_fuse({"Enter", "TensorListGetItem"})


def test_a_run_whose_left_out_passes_cannot_fuse_anything_fuses_no_copy(bert_encoder, monkeypatch):
    """The BERT-style encoder fused: no Exp, MatMul, Mean, loop ... is left for any pass left out."""
    unprobed = scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY)
    assert unprobed.report.fused_count("LayerNorm") == 7

    def no_pipeline(*args, **kwargs):
        raise AssertionError("the passes left out were run")

    monkeypatch.setattr(hints_module, "FusionPipeline", no_pipeline)
    again = scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY)
    assert again.report.hints == unprobed.report.hints == []
    assert [(n, r.hint) for n, r in _notes(again.report)] == [(n, r.hint) for n, r in _notes(unprobed.report)]
    # every pass left out is tried when the op types are not given: that path still runs the pipeline
    with pytest.raises(AssertionError, match="were run"):
        hints_module.probe(again.graph_def, REGISTRY, FusionOptions(), FusionSwitch.default())


def test_passes_that_may_fuse_are_the_only_ones_tried():
    options, switch = FusionOptions(), FusionSwitch.default()
    scope, graph = hints_module.passes_to_probe(REGISTRY, options, switch, {"Enter", "Exit", "MatMulBiasAdd"})
    assert [s.name for s in scope] == ["ScopeDynamicRNNPass"] and graph == []
    scope, _ = hints_module.passes_to_probe(REGISTRY, options, switch, {"While", "MatMulBiasAdd"})
    assert [s.name for s in scope] == ["ScopeBatchMultiClassNMSPass", "ScopeDynamicRNNPass"]  # a TF2 NMS loop
    scope, _ = hints_module.passes_to_probe(REGISTRY, options, switch, {"Exp", "Unpack", "Transpose", "Pack"})
    assert [s.name for s in scope] == ["ScopeDecodeBboxV2Pass"]
    # a graph pass switched off is kept when its patterns' roots occur (GELU's are Mul, the epilogue's
    # activations), and a UB pass always when a graph-fusion stage runs before it (a Gelu it would make)
    off = FusionSwitch.from_text("GeluFusionPass:off\nEpilogueFusionPass:off")
    probed = {frozenset(ops): hints_module.passes_to_probe(REGISTRY, options, off, ops)
              for ops in ({"Erf", "Mul"}, {"Relu"}, {"Erfc"}, {"Mean", "SquaredDifference"})}
    named = {tuple(sorted(ops)): ([s.name for s in scope], [g.name for g in graph])
             for ops, (scope, graph) in probed.items()}
    assert named == {
        ("Erf", "Mul"): ([], ["GeluFusionPass", "EpilogueFusionPass"]),
        ("Relu",): ([], ["EpilogueFusionPass"]),
        ("Erfc",): ([], []),
        ("Mean", "SquaredDifference"): (["ScopeInstanceNormPass"], ["GeluFusionPass", "EpilogueFusionPass"]),
    }


def test_a_pass_whose_answer_fails_is_tried():
    class Broken(_TwoBatches):
        def define_patterns(self):
            raise RuntimeError("broken")

    from scopefusion.core.fusion.pass_spec import PassSpec

    assert hints_module._may_fuse(PassSpec(Broken), set())
    assert hints_module._may_fuse(PassSpec(_Groups), set())
    assert not hints_module._may_fuse(PassSpec(_TwoBatches), {"Add"})


def _notes(report):
    return [(p.name, r) for p in report.passes for r in (*p.refused, *p.near_misses)]


def test_the_op_types_asked_about_are_the_fused_graphs_and_its_functions():
    """A loop body's ops count: a functional loop's cells are in its body, not the graph."""
    m = lm.dynamic_rnn(rm.basic_lstm())
    ops = hints_module._op_types(m.graph_def)
    assert {"MatMul", "Split", "Sigmoid"} <= ops and ops & {"While", "StatelessWhile"}
    assert "Sigmoid" not in {n.op for n in m.graph_def.node}


def test_a_pass_whose_may_fuse_denies_what_it_fused_is_warned_about(bert_encoder):
    """ScopeLayerNormPass with a may_fuse() that says no: the run still fuses (may_fuse only
    decides what hints try) and warns, naming the pass."""
    from scopefusion.builtin_passes.scope.layer_norm import ScopeLayerNormPass
    from scopefusion.testing import registry_with

    class Denying(ScopeLayerNormPass):
        name = "ScopeLayerNormPass"

        def may_fuse(self, op_types):
            return False

    registry = registry_with([Denying], [])
    result = scopefusion.fuse(bert_encoder.graph_def, registry=registry, hints=False)
    assert result.report.fused_count("LayerNorm") == 7
    assert any(w.startswith("pass ScopeLayerNormPass (") and "its may_fuse() is wrong" in w
               for w in result.report.warnings)
    plain = scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY, hints=False)
    assert not any("may_fuse" in w for w in plain.report.warnings)


def test_a_may_fuse_that_raises_costs_the_pass_nothing_but_a_warning(bert_encoder):
    from scopefusion.builtin_passes.scope.layer_norm import ScopeLayerNormPass
    from scopefusion.testing import registry_with

    class Raising(ScopeLayerNormPass):
        name = "ScopeLayerNormPass"

        def may_fuse(self, op_types):
            raise KeyError("oops")

    result = scopefusion.fuse(bert_encoder.graph_def, registry=registry_with([Raising], []), hints=False)
    assert result.report.fused_count("LayerNorm") == 7 and result.report.pass_report("ScopeLayerNormPass").error is None
    assert any("its may_fuse() raised KeyError: 'oops'; hints try it always" in w for w in result.report.warnings)
