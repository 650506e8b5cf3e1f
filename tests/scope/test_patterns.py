"""Sections 2 and 3: pattern features and the batch matching rules."""
from __future__ import annotations

import pytest
from tests.helpers.graph_helpers import make_graph

from scopefusion import NodeAttrFeature, NodeOpTypeFeature, ScopeFeature, ScopeGraph, ScopePattern
from scopefusion.core.scope.matcher import match_pattern_set, search


def _attr(**kw):
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

    return AttrValue(**kw)


def _graph():
    return make_graph([
        ("x", "Placeholder", []),
        ("enc/blk/mom/mean", "Mean", ["x", "x"], {"keep_dims": _attr(b=True)}),
        ("enc/blk/mom/var", "Mean", ["x", "x"], {"keep_dims": _attr(b=False)}),
        ("enc/blk/bn/rs", "Rsqrt", ["enc/blk/mom/var"], {"eps": _attr(f=1e-12)}),
        ("enc/blk/bn/add", "AddV2", ["x", "enc/blk/bn/rs"], {"name_attr": _attr(s=b"abc")}),
        ("enc/blk_1/mom/mean", "Mean", ["x", "x"]),
        ("enc/blk_1/mom/var", "Mean", ["x", "x"]),
        ("enc/blk_1/bn/rs", "Rsqrt", ["enc/blk_1/mom/var"]),
        ("enc/other/mul", "Mul", ["x", "x"]),
        ("head/mom/mean", "Mean", ["x", "x"]),
        ("head/mom/var", "Mean", ["x", "x"]),
        ("head/mom/ret", "_Retval", ["head/mom/var"]),
    ])


@pytest.fixture()
def sg():
    return ScopeGraph(_graph())


def test_op_type_feature_counting_rule(sg):
    blk = sg.scope("enc/blk")
    assert NodeOpTypeFeature("Mean", 2).match(blk)
    assert not NodeOpTypeFeature("Mean", 1).match(blk)
    assert NodeOpTypeFeature("Conv2D", -1).match(blk)  # absent
    assert not NodeOpTypeFeature("Mean", -1).match(blk)
    assert NodeOpTypeFeature("Mean", 0, 1).match(blk)  # present
    assert not NodeOpTypeFeature("Conv2D", 0, 1).match(blk)
    assert NodeOpTypeFeature("Mean", 0, 2).match(blk)  # 2 % 2 == 0
    assert not NodeOpTypeFeature("Mean", 1, 2).match(blk)
    assert NodeOpTypeFeature("Mean", 4).match(sg.scope("enc"))  # descendants count
    with pytest.raises(ValueError):
        NodeOpTypeFeature("Mean", 3, 2)


def test_attr_feature_looks_at_direct_nodes_only(sg):
    bn = sg.scope("enc/blk/bn")
    assert NodeAttrFeature("Rsqrt", "eps", 1e-12 * (1 + 1e-9)).match(bn)  # float tolerance
    assert not NodeAttrFeature("Rsqrt", "eps", 1e-11).match(bn)
    assert NodeAttrFeature("AddV2", "name_attr", "abc").match(bn)
    assert not NodeAttrFeature("AddV2", "name_attr", "abd").match(bn)
    assert not NodeAttrFeature("Rsqrt", "eps", 1e-12).match(sg.scope("enc/blk"))  # not direct
    mom = sg.scope("enc/blk/mom")
    assert NodeAttrFeature("Mean", "keep_dims", True).match(mom)
    assert NodeAttrFeature("Mean", "keep_dims", False).match(mom)  # "some node"
    assert not NodeAttrFeature("Mean", "keep_dims", 1).match(mom)  # bool is not int


def test_scope_feature_suffix_mask_and_labels(sg):
    blk1 = sg.scope("enc/blk_1")
    assert ScopeFeature(suffix="blk").match(blk1)  # last name drops _1
    assert not ScopeFeature(suffix="blk_1").match(blk1)
    assert ScopeFeature(sub_scope_mask="mo").match(blk1)
    assert not ScopeFeature(sub_scope_mask="zz").match(blk1)
    assert ScopeFeature(sub_type="moments", num=0).match(blk1)
    sg.tree.set_label(sg.scope("enc/blk_1/mom"), "moments")
    assert ScopeFeature(sub_type="moments", num=1).match(blk1)
    assert ScopeFeature(sub_type="moments", num=1).match(sg.scope("enc"))
    assert not ScopeFeature(sub_type="moments", num=1).match(sg.scope("enc/blk"))


def test_scope_feature_at_least(sg):
    enc = sg.scope("enc")
    two = ScopeFeature(sub_type="moments", num=2, at_least=True)
    sg.tree.set_label(sg.scope("enc/blk_1/mom"), "moments")
    assert not two.match(enc)
    assert two.explain(enc) == "at least 2 'moments' sub-scope(s) wanted, 1 found"
    sg.tree.set_label(sg.scope("enc/blk/mom"), "moments")
    assert two.match(enc) and ScopeFeature(sub_type="moments", num=1, at_least=True).match(enc)
    assert not ScopeFeature(sub_type="moments", num=1).match(enc)  # exactly 1: the reference's rule


def test_scope_with_return_node_never_matches(sg):
    pattern = ScopePattern("m").add_node_op_type_feature("Mean", 2)
    assert [s.name for s in search(sg.tree, pattern)] == ["enc/blk", "enc/blk_1"]
    assert pattern.match(sg.scope("enc/blk/mom"))
    assert not pattern.match(sg.scope("head"))
    assert not pattern.match(sg.scope("head/mom"))


def test_outermost_match_wins_and_parallel_matches_are_kept(sg):
    pattern = ScopePattern("mean").add_node_op_type_feature("Mean", 0, 1)
    # the root (holding a _Retval) cannot match, so the search descends
    found = [s.name for s in search(sg.tree, pattern)]
    assert found == ["enc"]
    two = ScopePattern("two").add_node_op_type_feature("Mean", 2)
    # blk and blk_1 match, so their "mom" sub-scopes (also 2 Means) are not visited
    assert [s.name for s in search(sg.tree, two)] == ["enc/blk", "enc/blk_1"]
    inner = ScopePattern("inner").add_node_op_type_feature("Mean", 2).add_scope_feature(suffix="mom")
    assert [s.name for s in search(sg.tree, inner)] == ["enc/blk/mom", "enc/blk_1/mom"]


def test_batches_label_inner_scopes_and_roll_back_the_rest(sg):
    moments = ScopePattern("moments").add_node_op_type_feature("Mean", 2).add_scope_feature(suffix="mom")
    block = ScopePattern("block").add_scope_feature("moments", 1).add_node_op_type_feature("Rsqrt", 1)
    final = match_pattern_set(sg.tree, [[moments], [block]])
    assert [s.name for s in final] == ["enc/blk", "enc/blk_1"]
    assert sg.scope("enc/blk").sub_type == "block"
    assert sg.scope("enc/blk/mom").sub_type == "moments"  # inside a final match: kept
    assert sg.scope("head/mom").sub_type is None  # holds a _Retval: never labelled


def test_earlier_labels_outside_final_matches_are_rolled_back():
    sg = ScopeGraph(make_graph([
        ("x", "Placeholder", []),
        ("a/mom/m1", "Mean", ["x", "x"]),
        ("a/mom/m2", "Mean", ["x", "x"]),
        ("a/rs", "Rsqrt", ["a/mom/m1"]),
        ("b/mom/m1", "Mean", ["x", "x"]),
        ("b/mom/m2", "Mean", ["x", "x"]),
    ]))
    moments = ScopePattern("moments").add_node_op_type_feature("Mean", 2).add_scope_feature(suffix="mom")
    block = ScopePattern("block").add_scope_feature("moments", 1).add_node_op_type_feature("Rsqrt", 1)
    final = match_pattern_set(sg.tree, [[moments], [block]])
    assert [s.name for s in final] == ["a"]
    assert sg.scope("a/mom").sub_type == "moments"
    assert sg.scope("b/mom").sub_type is None  # labelled by batch 1, then rolled back


def test_a_batch_matching_nothing_ends_the_set_with_no_result(sg):
    moments = ScopePattern("moments").add_node_op_type_feature("Mean", 2)
    nothing = ScopePattern("never").add_node_op_type_feature("Conv2D", 0, 1)
    assert match_pattern_set(sg.tree, [[moments], [nothing]]) == []
    assert all(s.sub_type is None for s in sg.scopes())  # everything rolled back
    assert match_pattern_set(sg.tree, [[nothing], [moments]]) == []


def test_attribute_values_compare_by_the_attr_kind():
    """Float attrs compare with a tolerance; int, bool and string attrs exactly, even against a float."""
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

    from scopefusion.core.graph.attrs import attr_equals

    assert attr_equals(AttrValue(f=1e-12), 1.0000001e-12)
    assert attr_equals(AttrValue(f=0.5), 0.5) and not attr_equals(AttrValue(f=0.5), 0.6)
    assert attr_equals(AttrValue(i=100_000_000), 100_000_000)
    assert attr_equals(AttrValue(i=100_000_000), 100_000_000.0)
    assert not attr_equals(AttrValue(i=100_000_000), 100_000_500.0)
    assert not attr_equals(AttrValue(i=3), 3.5)
    assert attr_equals(AttrValue(b=True), True) and not attr_equals(AttrValue(b=True), 1)
    assert attr_equals(AttrValue(s=b"NHWC"), "NHWC")


def test_an_attribute_feature_may_accept_a_set_of_values():
    """A set holds when the attribute equals any of its members (e.g. every float dtype)."""
    from scopefusion import ScopeGraph
    from scopefusion.core.scope.patterns import NodeAttrFeature

    graph = make_graph([("x", "Placeholder", []), ("blk/r", "Rsqrt", ["x"])])  # T = DT_FLOAT (1)
    blk = ScopeGraph(graph).scope("blk")
    assert NodeAttrFeature("Rsqrt", "T", {1, 2, 14, 19}).match(blk)
    assert NodeAttrFeature("Rsqrt", "T", frozenset({1})).match(blk)
    assert not NodeAttrFeature("Rsqrt", "T", {2, 19}).match(blk)
    assert NodeAttrFeature("Rsqrt", "T", {19, 2}).explain(blk) == (
        "Rsqrt directly in the scope with T = float64 or float16 wanted; found T = float32")
    root = ScopeGraph(graph).scope("blk").parent  # the Rsqrt lies in a sub-scope of the root
    assert NodeAttrFeature("Rsqrt", "T", {1, 19}).explain(root) == (
        "Rsqrt directly in the scope with T = float32 or float16 wanted; none lies directly in it "
        "(1 in its sub-scopes)")
    assert hash(NodeAttrFeature("Rsqrt", "T", {1, 2}))  # frozen and hashable, like every feature
