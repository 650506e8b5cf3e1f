"""Pass manager: enabling, safety checks, conflicts, failing passes, output names."""
from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.scale_shift import (
    PAIR, SCALE_SHIFT, BrokenPass, PairPass, ScaleShiftPass, TwoScopesPass, WholeModelPass, build_graph,
)

from scopefusion import ScopePattern, OptionError, PassError
from scopefusion.core.fusion.options import FusionOptions
from scopefusion.core.fusion.pass_spec import PassSpec
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.scope.pass_manager import ScopePassManager
from scopefusion.core.verify.execute import run_graph_def
from scopefusion.core.verify.tf_form import to_tf_runnable

OPS = {"ScaleShift": SCALE_SHIFT, "Pair": PAIR}


def _run(passes, graph, **options):
    from tensorflow.core.framework import graph_pb2

    copy = graph_pb2.GraphDef()
    copy.CopyFrom(graph)
    manager = ScopePassManager([PassSpec(p) for p in passes], OPS, FusionOptions(**options))
    return manager.run(copy)


def _assert_same(original, fused, feeds, fetches):
    a = run_graph_def(original, feeds, fetches)
    b = run_graph_def(to_tf_runnable(fused, OPS), feeds, fetches)
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape
        assert np.max(np.abs(x - y)) <= 1e-5


def test_parallel_scopes_fused_and_outputs_still_fetchable():
    graph, feeds, fetches = build_graph("plain")
    out = _run([ScaleShiftPass], graph)
    fused = [n for n in out.graph_def.node if n.op == "ScaleShift"]
    assert [n.name for n in fused] == ["model/blk", "model/blk_1"]
    assert fused[1].input[0] == "model/blk"
    assert fused[0].attr["scale"].f == 2.0 and fused[1].attr["shift"].f == 3.0
    assert out.report.pass_report("ScaleShiftPass").matched_scopes == ["model/blk", "model/blk_1"]
    GraphIndex(out.graph_def)  # valid
    _assert_same(graph, out.graph_def, feeds, fetches)


def test_graph_output_inside_a_fused_scope_keeps_its_name():
    graph, feeds, fetches = build_graph("tail")
    out = _run([ScaleShiftPass], graph)
    alias = [n for n in out.graph_def.node if n.name == fetches[0].split(":")[0]]
    assert alias and alias[0].op == "Identity" and alias[0].input[0] == "blk"
    _assert_same(graph, out.graph_def, feeds, fetches)


def test_unmapped_outside_consumer_is_refused_and_graph_unchanged():
    graph, feeds, fetches = build_graph("leak")
    out = _run([ScaleShiftPass], graph)
    refused = out.report.refused
    assert len(refused) == 1 and "feeds outside node 'out'" in refused[0].reason
    assert "blk/mul" in refused[0].reason
    assert out.report.fused == []
    assert [n.name for n in out.graph_def.node] == [n.name for n in graph.node]
    GraphIndex(out.graph_def)


def test_non_convex_scope_is_refused():
    graph, feeds, fetches = build_graph("nonconvex")
    # every edge is mapped, so only the path blk/mul -> outside -> blk/add stops it
    out = _run([PairPass], graph)
    refused = out.report.refused
    assert len(refused) == 1 and "not convex" in refused[0].reason and "cycle" in refused[0].reason
    assert "'blk/mul' reaches 'blk/add'" in refused[0].reason
    assert out.report.fused == []
    GraphIndex(out.graph_def)
    _assert_same(graph, out.graph_def, feeds, fetches)


def test_two_convex_results_that_would_close_a_cycle_together():
    graph, feeds, fetches = build_graph("crossed")
    out = _run([PairPass], graph)
    assert [f.name for f in out.report.fused] == ["blk"]
    assert out.report.refused == []
    dropped = out.report.dropped
    assert len(dropped) == 1 and dropped[0].name == "blk_1"
    assert "together with 'blk' would create a cycle" in dropped[0].reason and dropped[0].winner == "blk (PairPass)"
    GraphIndex(out.graph_def)
    _assert_same(graph, out.graph_def, feeds, fetches)


def test_non_general_pass_only_runs_when_enabled_and_containment_wins():
    graph, feeds, fetches = build_graph("plain")
    passes = [ScaleShiftPass, WholeModelPass]
    out = _run(passes, graph)
    assert [p.name for p in out.report.passes] == ["ScaleShiftPass"]
    out = _run(passes, graph, enable_scope_fusion_passes=" WholeModelPass ,, ")
    assert [p.name for p in out.report.passes] == ["ScaleShiftPass", "WholeModelPass"]
    # the model scope strictly contains both blk results: it subsumes them
    assert [f.name for f in out.report.fused] == ["model"]
    dropped = out.report.pass_report("ScaleShiftPass").dropped
    assert len(dropped) == 2 and all("subsumed by 'model'" in r.reason for r in dropped)
    assert {r.winner for r in dropped} == {"model (WholeModelPass)"}
    _assert_same(graph, out.graph_def, feeds, fetches)


def test_partial_overlap_earlier_registered_pass_wins():
    graph, feeds, fetches = build_graph("plain")
    out = _run([TwoScopesPass, ScaleShiftPass], graph, enable_scope_fusion_passes="TwoScopesPass")
    # TwoScopesPass groups both blk scopes into one result, which strictly contains
    # each single-scope result of ScaleShiftPass.
    assert [f.name for f in out.report.fused] == ["model/blk"]
    shift = out.report.pass_report("ScaleShiftPass")
    assert shift.refused == [] and len(shift.dropped) == 2 and shift.matches == 2
    assert {r.winner for r in shift.dropped} == {"model/blk (TwoScopesPass)"}


def test_enable_list_errors_and_order():
    with pytest.raises(OptionError, match="did you mean 'WholeModelPass'"):
        ScopePassManager([ScaleShiftPass, WholeModelPass], OPS,
                         FusionOptions(enable_scope_fusion_passes="WholeModelPas"))
    a = ScopePassManager([ScaleShiftPass, WholeModelPass, TwoScopesPass], OPS,
                         FusionOptions(enable_scope_fusion_passes="TwoScopesPass,WholeModelPass"))
    assert [s.name for s in a.enabled] == ["ScaleShiftPass", "WholeModelPass", "TwoScopesPass"]


def test_pass_that_raises_is_skipped_by_default_and_fatal_when_strict():
    graph, feeds, fetches = build_graph("plain")
    out = _run([BrokenPass, ScaleShiftPass], graph)
    broken = out.report.pass_report("BrokenPass")
    assert broken.error and "BrokenPass" in broken.error and "boom" in broken.error
    assert out.report.fused_count("ScaleShift") == 2
    with pytest.raises(PassError, match="pass BrokenPass .* raised RuntimeError: boom"):
        _run([BrokenPass, ScaleShiftPass], graph, strict=True)


def test_undeclared_fused_op_is_refused():
    graph, _, _ = build_graph("plain")
    manager = ScopePassManager([ScaleShiftPass], {}, FusionOptions())
    out = manager.run(graph)
    assert out.report.fused == []
    assert all("not declared" in r.reason for r in out.report.refused)


def test_explicit_outputs_must_exist():
    graph, _, _ = build_graph("plain")
    with pytest.raises(OptionError, match="nope:0"):
        _run([ScaleShiftPass], graph, outputs=["nope:0"])


def test_inner_graph_result_replaces_a_scope_with_several_nodes():
    from tests.helpers.scale_shift import InnerGraphPass

    graph, feeds, fetches = build_graph("plain")
    out = _run([InnerGraphPass], graph)
    names = [n.name for n in out.graph_def.node]
    assert "model/blk/scaled" in names and "model/blk_1/shifted" in names
    second = next(n for n in out.graph_def.node if n.name == "model/blk_1/scaled")
    assert list(second.input) == ["model/blk/shifted", "model/blk_1/scale"]
    assert [f.inner_nodes for f in out.report.fused] == [4, 4]
    GraphIndex(out.graph_def)
    a = run_graph_def(graph, feeds, fetches)
    b = run_graph_def(out.graph_def, feeds, fetches)
    assert np.max(np.abs(a[0] - b[0])) <= 1e-6


def test_candidates_and_near_misses_are_reported():
    graph, _, _ = build_graph("near")
    out = _run([ScaleShiftPass], graph)
    pr = out.report.pass_report("ScaleShiftPass")
    assert pr.matched_scopes == [] and pr.fused == []
    assert pr.candidates == 2  # the root and blk; "out" lies in the root, no other scope
    assert pr.near_miss_count == 1
    (miss,) = pr.near_misses
    assert miss.name == "blk"
    assert miss.reason == "pattern ScaleShift: exactly 1 AddV2 node(s) wanted, 0 found"


class TwoPatternSetsPass(ScaleShiftPass):
    """blk scopes by two pattern sets: the second misses every blk by one feature."""

    name = "TwoPatternSetsPass"

    def define_patterns(self):
        strict = (ScopePattern("ScaleShift").add_scope_feature(suffix="blk")
                  .add_node_op_type_feature("Mul", 1).add_node_op_type_feature("AddV2", 2))
        return super().define_patterns() + [[[strict]]]


def test_near_misses_exclude_matches_their_ancestors_and_inner_scopes():
    """A scope another pattern set of the pass matched is no near miss of it,
    and each missed scope is reported once, however many patterns it missed."""
    graph, _, _ = build_graph("plain")
    out = _run([TwoPatternSetsPass], graph)
    pr = out.report.pass_report("TwoPatternSetsPass")
    assert pr.matched_scopes == ["model/blk", "model/blk_1"]
    assert pr.near_miss_count == 0 and pr.near_misses == []
    # the same pass on a graph whose blk has no AddV2: one near miss, once
    near, _, _ = build_graph("near")
    pr = _run([TwoPatternSetsPass], near).report.pass_report("TwoPatternSetsPass")
    assert pr.matched_scopes == []
    assert [(m.name, m.reason) for m in pr.near_misses] == [
        ("blk", "pattern ScaleShift: exactly 1 AddV2 node(s) wanted, 0 found")]
    assert pr.near_miss_count == 1
    assert pr.candidates == 2  # distinct scopes tested: the root and blk


def test_a_near_miss_about_ops_is_shown_before_one_about_the_name():
    """A scope that misses one pattern by its name and another by an op count is
    reported with the op count: that is what the user can act on."""

    class NamedAndCountedPass(ScaleShiftPass):
        name = "NamedAndCountedPass"

        def define_patterns(self):
            named = (ScopePattern("ByName").add_scope_feature(suffix="blk")
                     .add_node_op_type_feature("Mul", 1).add_node_op_type_feature("AddV2", 1))
            counted = (ScopePattern("ByOps").add_node_op_type_feature("Mul", 1)
                       .add_node_op_type_feature("AddV2", 2))
            return [[[named]], [[counted]]]

    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        with tf.name_scope("other"):
            y = x * 2.0 + 1.0
        tf.identity(y, name="out")
    pr = _run([NamedAndCountedPass], graph.as_graph_def()).report.pass_report("NamedAndCountedPass")
    assert pr.matched_scopes == []
    assert [(m.name, m.reason) for m in pr.near_misses] == [
        ("other", "pattern ByOps: exactly 2 AddV2 node(s) wanted, 1 found")]


def test_kept_nodes_do_not_collide_with_the_inlined_reference():
    """Grappler inlines a fused call as <node>/<body node>; a kept blk/mul/y
    must not meet the reference's own mul/y there (TensorFlow aborts on it)."""
    graph, feeds, fetches = build_graph("shared_const")
    out = _run([ScaleShiftPass], graph)
    assert [f.name for f in out.report.fused] == ["blk"]
    assert "blk/mul/y" in {n.name for n in out.graph_def.node}
    _assert_same(graph, out.graph_def, feeds, fetches)
