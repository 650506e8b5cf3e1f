"""One way to refuse a match: ``fail(reason, *nodes)`` raises ``Refused`` from any check of a
graph pass or a scope pass, and both engines report it with the reason and the nodes named.
The older spellings (``NotFused``, ``self.refuse``, ``result.reject``) still refuse, and say
that they are the older spelling."""
from __future__ import annotations

import json
import warnings

import pytest
import tensorflow as tf

import scopefusion
from scopefusion import (
    AttrDef, FusedOp, FusedOpDef, FusionScopesResult, NotFused, OpPattern, PatternFusionBasePass, Refused,
    ScopeBasePass, ScopePattern, TensorArg, fail, op,
)
from scopefusion.core.fusion.report import Refusal
from scopefusion.core.fusion.places import Place, PlaceNode
from scopefusion.report.html.drawings import highlighted
from scopefusion.testing import PassTester, graph_from_function

T = (AttrDef("T", "type"),)
RELU_SQUARE = FusedOpDef("ReluSquare", inputs=(TensorArg("x", type_attr="T"),),
                         outputs=(TensorArg("y", type_attr="T"),), attrs=T,
                         reference=lambda x, *, T: (tf.square(tf.nn.relu(x)),))
SCALE_SHIFT = FusedOpDef("ScaleShift", inputs=(TensorArg("x", type_attr="T"),),
                         outputs=(TensorArg("y", type_attr="T"),),
                         attrs=(AttrDef("scale", "float"), AttrDef("shift", "float"), *T),
                         reference=lambda x, *, scale, shift, T: (x * scale + shift,))
SPEC = tf.TensorSpec([2, 4], tf.float32, "x")


def _two_blocks(x):
    return tf.square(tf.nn.relu(x)) + tf.square(tf.nn.relu(x * 3.0))


def _two_scopes(x):
    with tf.name_scope("blk"):
        a = x * 2.0 + 1.0
    with tf.name_scope("blk"):  # blk_1: shifted by a tensor, not a constant
        b = a * 3.0 + tf.reduce_sum(x)
    return b


@pytest.fixture(scope="module")
def two_blocks():
    return graph_from_function(_two_blocks, SPEC)


@pytest.fixture(scope="module")
def two_scopes():
    return graph_from_function(_two_scopes, SPEC)


def _older_spelling_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)
            and "older spelling" in str(w.message)]


# --------------------------------------------------------------------- graph passes
def _second_block_only(match):
    """A check a few calls below fusion(): the second block is refused, naming its nodes."""
    if match.name("square") != "Square":
        fail(f"{match.name('square')!r} is the second block", match.node("relu"), match.name("square"))


class ReluSquarePass(PatternFusionBasePass):
    """Square(Relu(x)) -> ReluSquare, the first block only."""

    def define_patterns(self):
        return [OpPattern("ReluSquare", op("Square", op("Relu", "$x", label="relu"), label="square"))]

    def fusion(self, match):
        _second_block_only(match)
        return FusedOp("ReluSquare", inputs=["x"], attrs={"T": match.node("square").attr["T"].type})


def test_a_graph_pass_refuses_from_any_check_through_fail_naming_the_nodes(two_blocks):
    tester = PassTester().with_passes([ReluSquarePass], [RELU_SQUARE])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tester.run(two_blocks, keep_places=True)
    assert _older_spelling_warnings(caught) == []
    pr = result.report.pass_report("ReluSquarePass")
    assert (pr.match_times, pr.effect_times) == (2, 1)
    (refusal,) = pr.refused
    assert refusal.reason == "rejected by the pass: 'Square_1' is the second block"
    assert (refusal.name, refusal.scopes, refusal.nodes) == ("Square_1", ["Square_1"], ["Relu_1", "Square_1"])
    assert {"Relu_1", "Square_1"} <= {m.name for m in refusal.place.members}
    assert highlighted(refusal) == {"Relu_1", "Square_1"}
    entry = json.loads(result.report.to_json())["passes"]
    (mine,) = [p for p in entry if p["name"] == "ReluSquarePass"]
    assert mine["refused"][0]["nodes"] == ["Relu_1", "Square_1"]
    tester.assert_verified(two_blocks, result)


def test_a_refusal_naming_no_node_leaves_nodes_out_of_the_json_report(two_blocks):
    class Never(ReluSquarePass):
        def fusion(self, match):
            fail("never")

    result = PassTester().with_passes([Never], [RELU_SQUARE]).run(two_blocks)
    refused = result.report.pass_report("Never").refused
    assert [(r.reason, r.nodes) for r in refused] == [("rejected by the pass: never", [])] * 2
    (mine,) = [p for p in json.loads(result.report.to_json())["passes"] if p["name"] == "Never"]
    assert [sorted(r) for r in mine["refused"]] == [["function", "hint", "name", "reason", "scopes", "winner"]] * 2


# --------------------------------------------------------------------- scope passes
class ScaleShiftPass(ScopeBasePass):
    """blk scopes computing x * a + b with constants a, b -> ScaleShift."""

    def define_patterns(self):
        return [[[ScopePattern("ScaleShift").add_scope_feature(suffix="blk")
                  .add_node_op_type_feature("Mul", 1).add_node_op_type_feature("AddV2", 1)]]]

    def generate_fusion_result(self, scopes, result: FusionScopesResult) -> None:
        scope = scopes[0]
        sg = scope.graph
        mul, add = scope.nodes_by_op("Mul")[0], scope.nodes_by_op("AddV2")[0]
        scale, shift = _constants(sg, mul, add)
        result.set_type("ScaleShift")
        result.set_attr("scale", scale)
        result.set_attr("shift", shift)
        result.set_attr("T", mul.attr["T"].type)
        result.insert_inputs(scope.suffix_of(mul.name), [0, None])
        result.insert_outputs(scope.suffix_of(add.name), [0])


def _constants(sg, mul, add) -> tuple[float, float]:
    scale = sg.const_value(sg.producer(mul.name, 1)[0])
    shift = sg.const_value(sg.producer(add.name, 1)[0])
    if scale is None or shift is None:
        fail("scale or shift is not a constant", add)  # a NodeDef is named by its name
    return float(scale), float(shift)


def test_a_scope_pass_refuses_from_a_check_through_fail_naming_the_nodes(two_scopes):
    tester = PassTester().with_passes([ScaleShiftPass], [SCALE_SHIFT])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tester.run(two_scopes, keep_places=True)
    assert _older_spelling_warnings(caught) == []
    pr = result.report.pass_report("ScaleShiftPass")
    assert [f.name for f in pr.fused] == ["blk"]
    (refusal,) = pr.refused
    assert (refusal.name, refusal.reason, refusal.nodes) == (
        "blk_1", "rejected by the pass: scale or shift is not a constant", ["blk_1/add"])
    assert highlighted(refusal) == {"blk_1/add"}
    assert tester.assert_not_matched(result, "blk_1") == "ScaleShiftPass: rejected by the pass: scale or shift " \
                                                          "is not a constant"
    tester.assert_verified(two_scopes, result)


def test_a_refusal_of_the_engine_s_own_checks_names_its_node(two_scopes):
    """The pipeline's checks refuse the same way: a back end that runs only some nodes."""
    from scopefusion.api import build_pipeline
    from scopefusion.core.fusion.options import FusionOptions
    from scopefusion.core.graph_fusion.switch import FusionSwitch

    registry = PassTester().with_passes([ScaleShiftPass], [SCALE_SHIFT]).registry
    options = FusionOptions(fusible_nodes=frozenset(n.name for n in two_scopes.node if n.name != "blk/mul"))
    graph = type(two_scopes)()
    graph.CopyFrom(two_scopes)  # the pipeline fuses the graph it is given in place
    report = build_pipeline(registry, options, FusionSwitch.default()).run(graph).report
    refused = {r.name: r for r in report.pass_report("ScaleShiftPass").refused}
    assert refused["blk"].reason == "'blk/mul' lie outside the nodes the back end runs"
    assert refused["blk"].nodes == ["blk/mul"]


# --------------------------------------------------------------------- the older spellings
class OlderGraphPass(ReluSquarePass):
    def fusion(self, match):
        if match.name("square") == "Square":
            return NotFused("returned NotFused")
        return self.refuse("returned self.refuse")


class OlderScopePass(ScaleShiftPass):
    def generate_fusion_result(self, scopes, result):
        result.reject(f"{scopes[0].name} rejected")


def test_the_older_spellings_still_refuse_and_warn_once_per_pass(two_blocks, two_scopes):
    tester = PassTester().with_passes([OlderGraphPass, OlderScopePass], [RELU_SQUARE, SCALE_SHIFT])
    with pytest.warns(DeprecationWarning, match="older spelling") as caught:
        graph_result = tester.run(two_blocks)
        scope_result = tester.run(two_scopes)
    said = _older_spelling_warnings(caught)
    assert said == [
        "pass OlderGraphPass refuses a match through fusion() returning NotFused, the older spelling: raise "
        "Refused instead, most simply through scopefusion.fail(reason, *nodes)",
        "pass OlderScopePass refuses a match through result.reject(), the older spelling: raise Refused "
        "instead, most simply through scopefusion.fail(reason, *nodes)",
    ]
    assert sorted(r.reason for r in graph_result.report.pass_report("OlderGraphPass").refused) == [
        "rejected by the pass: returned NotFused", "rejected by the pass: returned self.refuse"]
    assert sorted(r.reason for r in scope_result.report.pass_report("OlderScopePass").refused) == [
        "rejected by the pass: blk rejected", "rejected by the pass: blk_1 rejected"]
    assert graph_result.report.fused == scope_result.report.fused == []


def test_a_subclass_of_a_pass_that_refuses_by_raising_sees_nothing_after_super(two_scopes):
    """A pass extending another one: a refusal raised in super() ends the result there."""
    class Extended(ScaleShiftPass):
        seen: list[str] = []

        def generate_fusion_result(self, scopes, result):
            super().generate_fusion_result(scopes, result)
            Extended.seen.append(scopes[0].name)

    result = PassTester().with_passes([Extended], [SCALE_SHIFT]).run(two_scopes)
    assert Extended.seen == ["blk"]
    assert [r.name for r in result.report.pass_report("Extended").refused] == ["blk_1"]


# --------------------------------------------------------------------- the type itself
def test_fail_raises_refused_with_the_reason_the_nodes_and_a_kind():
    node = tf.compat.v1.NodeDef(name="a/b", op="Relu")
    with pytest.raises(Refused) as info:
        fail("not this", "x", node, kind="other")
    why = info.value
    assert (str(why), why.reason, why.nodes, why.kind) == ("not this", "not this", ("x", "a/b"), "other")
    assert scopefusion.fail is fail and scopefusion.Refused is Refused
    assert {"fail", "Refused"} <= set(scopefusion.__all__)
    from scopefusion.core.fusion.candidate import Refused as from_candidate

    assert from_candidate is Refused  # the older import path of the same type


@pytest.mark.parametrize("args, message", [
    ((3,), "a refusal's reason is a str, not int (3)"),
    (("why", 7), "a refusal names nodes by name or NodeDef, not int (7)"),
    (("why", None), "a refusal names nodes by name or NodeDef, not NoneType (None)"),
])
def test_fail_with_something_else_than_names_is_a_clear_error(args, message):
    with pytest.raises(TypeError) as info:
        fail(*args)
    assert str(info.value) == message


def test_the_html_drawing_highlights_the_nodes_a_refusal_names():
    place = Place(members=[PlaceNode("a", "Mul"), PlaceNode("b", "AddV2")], member_count=2,
                  consumers=[PlaceNode("c", "Relu", ["b"])], consumer_count=1)
    assert highlighted(Refusal("s", "no quote", ["s"], place=place, nodes=["b", "elsewhere"])) == {"b"}
    assert highlighted(Refusal("s", "'a' is quoted", ["s"], place=place, nodes=["c"])) == {"a", "c"}
    assert highlighted(Refusal("s", "no quote", ["s"], place=place)) == set()
