"""Safety rules at the edges: the root scope, loops, results refused before
conflicts, tensors read twice, attribute values, names, labels between passes."""
from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.graph_helpers import make_graph
from tests.helpers.scale_shift import PAIR, SCALE_SHIFT, ScaleShiftPass, build_graph

from scopefusion import FusionScopesResult, ScopeBasePass, ScopePattern
from scopefusion.core.fusion.options import FusionOptions
from scopefusion.core.fusion.pass_spec import PassSpec
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.scope.pass_manager import ScopePassManager
from scopefusion.core.verify.execute import run_graph_def
from scopefusion.core.scope.scope_graph import strip_index_suffix
from scopefusion.core.verify.tf_form import to_tf_runnable

OPS = {"ScaleShift": SCALE_SHIFT, "Pair": PAIR}


def _run(passes, graph, **options):
    from tensorflow.core.framework import graph_pb2

    copy = graph_pb2.GraphDef()
    copy.CopyFrom(graph)
    return ScopePassManager([PassSpec(p) for p in passes], OPS, FusionOptions(**options)).run(copy)


def _same_outputs(original, fused, feeds, fetches):
    a = run_graph_def(original, feeds, fetches)
    b = run_graph_def(to_tf_runnable(fused, OPS), feeds, fetches)
    assert all(np.allclose(x, y, atol=1e-6) for x, y in zip(a, b, strict=True))


def _const(name, value=2.0):
    from tensorflow.core.framework.attr_value_pb2 import AttrValue
    from tensorflow.python.framework import tensor_util

    return (name, "Const", [], {"value": AttrValue(tensor=tensor_util.make_tensor_proto(np.float32(value))),
                                "dtype": AttrValue(type=1)})


class AnyScaleShift(ScaleShiftPass):
    """A pattern with no name feature: the root scope holds the same op counts."""

    name = "AnyScaleShift"

    def define_patterns(self):
        return [[[ScopePattern("ScaleShift").add_node_op_type_feature("Mul", 1)
                  .add_node_op_type_feature("AddV2", 1)]]]


FEEDS = {"x:0": np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)}


def _tf1_graph(build):
    """A real TF graph: ``build(x)`` on a [2, 3] float placeholder ``x``, returning the
    output tensor; gives ``(graph_def, feeds, [output name])``."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        out = build(tf.compat.v1.placeholder(tf.float32, [2, 3], name="x"))
    return graph.as_graph_def(), FEEDS, [out.name]


def _single_block_graph():
    import tensorflow as tf

    def build(x):
        with tf.name_scope("blk"):
            y = x * 2.0 + 1.0
        return tf.nn.relu(y, name="out")

    return _tf1_graph(build)


def test_the_root_scope_never_matches():
    """The root holds the whole graph: a pattern it satisfies matches the scope below instead."""
    graph, feeds, fetches = _single_block_graph()
    out = _run([AnyScaleShift], graph)
    pr = out.report.pass_report("AnyScaleShift")
    assert pr.matched_scopes == ["blk"]
    assert [n.name for n in out.graph_def.node if n.op == "ScaleShift"] == ["blk"]
    assert "" not in {n.name for n in out.graph_def.node}
    _same_outputs(graph, out.graph_def, feeds, fetches)


def test_a_fused_next_iteration_would_close_the_loop_and_is_refused():
    """merge -> body/mul -> body/next (NextIteration) -> merge: fusing body turns the back
    edge into an ordinary one, a cycle through merge."""

    class BodyPass(ScopeBasePass):
        name = "BodyPass"

        def define_patterns(self):
            return [[[ScopePattern("Body").add_scope_feature(suffix="body").add_node_op_type_feature("Mul", 1)]]]

        def generate_fusion_result(self, scopes, result: FusionScopesResult):
            result.set_type("ScaleShift")
            result.set_attr("scale", 2.0)
            result.set_attr("shift", 0.0)
            result.set_attr("T", 1)
            result.insert_inputs("mul", [0, None])
            result.insert_outputs("next", [0])

    graph = make_graph([("x", "Placeholder", [], {}), ("enter", "Enter", ["x"]),
                        ("merge", "Merge", ["enter", "body/next"]), _const("body/c"),
                        ("body/mul", "Mul", ["merge", "body/c"]), ("body/next", "NextIteration", ["body/mul"]),
                        ("out", "Exit", ["merge"])])
    GraphIndex(graph)  # the loop's back edge is no cycle
    for full in (False, True):
        out = _run([BodyPass], graph, validate_output=full)
        (refusal,) = out.report.refused
        assert refusal.name == "body" and refusal.reason.startswith("not convex")
        assert out.report.fused == []
        GraphIndex(out.graph_def)


class ModelPass(ScaleShiftPass):
    """The whole ``model`` scope as a Pair(x, outside) -> (tail, blk/add): every edge mapped,
    but not convex in the graph below."""

    name = "ModelPass"

    def define_patterns(self):
        return [[[ScopePattern("Model").add_scope_feature(suffix="model")]]]

    def generate_fusion_result(self, scopes, result):
        scope = scopes[0]
        result.set_type("Pair")
        result.set_attr("T", 1)
        result.insert_inputs(scope.nodes_by_op("Mul")[0].name, [0, None])
        result.insert_inputs("tail", [1])
        result.insert_outputs("tail", [0])
        result.insert_outputs(scope.nodes_by_op("AddV2")[0].name, [1])


def test_a_refused_container_does_not_push_aside_what_it_contains():
    """model/blk fuses on its own; model is not convex (model/blk -> outside -> model/tail).
    The container is refused first, so it cannot subsume model/blk."""
    import tensorflow as tf

    def build(x):
        with tf.name_scope("model"), tf.name_scope("blk"):
            y = x * 2.0 + 1.0
        r = tf.nn.relu(y, name="outside")
        with tf.name_scope("model/"):
            t = tf.nn.relu6(r, name="tail")
        return tf.identity(t, name="out")

    graph_def, feeds, fetches = _tf1_graph(build)
    result = _run([ScaleShiftPass, ModelPass], graph_def)
    assert [f.name for f in result.report.fused] == ["model/blk"]
    (refusal,) = result.report.refused
    assert refusal.name == "model" and refusal.reason.startswith("not convex")
    _same_outputs(graph_def, result.graph_def, feeds, fetches)


def test_an_input_read_by_several_inner_nodes_is_mapped_once():
    """blk computes x * 2 + x: x is fused input 0, read by two inner nodes; one map entry is enough."""
    import tensorflow as tf

    class TwiceReadPass(ScaleShiftPass):
        name = "TwiceReadPass"

        def generate_fusion_result(self, scopes, result):
            scope = scopes[0]
            result.set_type("ScaleShift")
            result.set_attr("scale", 3.0)
            result.set_attr("shift", 0.0)
            result.set_attr("T", 1)
            result.insert_inputs(scope.nodes_by_op("Mul")[0].name, [0, None])  # only the Mul's read
            result.insert_outputs(scope.nodes_by_op("AddV2")[0].name, [0])

    def build(x):
        with tf.name_scope("blk"):
            y = tf.add(x * 2.0, x)
        return tf.nn.relu(y, name="out")

    graph_def, feeds, fetches = _tf1_graph(build)
    result = _run([TwiceReadPass], graph_def)
    assert result.report.refused == []
    assert [f.name for f in result.report.fused] == ["blk"]
    _same_outputs(graph_def, result.graph_def, feeds, fetches)


class BadAttrPass(ScaleShiftPass):
    """Sets the float attribute ``scale`` of its second result to a string."""

    name = "BadAttrPass"

    def generate_fusion_result(self, scopes, result):
        super().generate_fusion_result(scopes, result)
        if scopes[0].name.endswith("_1"):
            result.set_attr("scale", "small")


def test_an_attribute_value_of_the_wrong_type_refuses_that_result_only():
    """The spoilt result is refused before conflicts, so the later pass's equal result fuses."""
    graph, feeds, fetches = build_graph("plain")  # model/blk and model/blk_1
    copy = type(graph)()
    copy.CopyFrom(graph)
    manager = ScopePassManager([PassSpec(BadAttrPass), PassSpec(ScaleShiftPass)], OPS, FusionOptions())
    out = manager.run(copy)
    bad, good = out.report.pass_report("BadAttrPass"), out.report.pass_report("ScaleShiftPass")
    assert bad.error is None and good.error is None
    assert [f.name for f in bad.fused] == ["model/blk"] and [f.name for f in good.fused] == ["model/blk_1"]
    (refusal,) = bad.refused
    assert refusal.name == "model/blk_1"
    assert refusal.reason == ("attribute 'scale' = 'small' cannot be written as float: "
                              "could not convert string to float: 'small'")
    GraphIndex(copy)  # the graph handed to run() is valid
    _same_outputs(graph, out.graph_def, feeds, fetches)


def _inner_graph_pass(output_node: str):
    """blk -> an inner graph of two Relus, ``scaled`` then ``add``; ``output_node`` is the
    one that gives the fused output."""
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

    class InnerPass(ScaleShiftPass):
        name = "InnerPass"

        def generate_fusion_result(self, scopes, result):
            scope = scopes[0]
            result.set_type("ReluGraph")
            result.insert_inputs(scope.nodes_by_op("Mul")[0].name, [0, None])
            result.insert_outputs(scope.nodes_by_op("AddV2")[0].name, [0])
            result.add_inner_node("scaled", "Relu", [result.fused_input(0)], {"T": AttrValue(type=1)})
            result.add_inner_node("add", "Relu", ["scaled"], {"T": AttrValue(type=1)})
            result.set_inner_output(0, f"{output_node}:0")

    return InnerPass


def test_a_new_node_may_not_take_the_name_of_an_aliased_graph_output():
    """blk/add is a graph output inside the result and stays fetchable under its name: an
    inner-graph node called ``add`` (-> blk/add) that is not that output would clash."""
    graph, _, fetches = build_graph("tail")
    assert fetches == ["blk/add:0"]
    out = _run([_inner_graph_pass("scaled")], graph)
    (refusal,) = out.report.refused
    assert "new node name 'blk/add' is the name of a graph output" in refusal.reason
    assert out.report.nodes_after == out.report.nodes_before
    GraphIndex(out.graph_def)


def test_a_new_node_that_is_the_graph_output_of_its_name_needs_no_alias():
    """The inner node ``add`` (-> blk/add) gives the fused output that graph output blk/add:0
    maps to: the name stays fetchable through the new node itself."""
    graph, feeds, fetches = build_graph("tail")
    out = _run([_inner_graph_pass("add")], graph)
    assert out.report.refused == [] and [f.name for f in out.report.fused] == ["blk"]
    nodes = {n.name: n for n in out.graph_def.node}
    assert nodes["blk/add"].op == "Relu" and list(nodes["blk/add"].input) == ["blk/scaled"]
    GraphIndex(out.graph_def)
    (value,) = run_graph_def(out.graph_def, feeds, fetches)
    np.testing.assert_allclose(value, np.maximum(feeds["x:0"], 0.0))


def test_labels_of_one_pass_are_not_seen_by_the_next():
    """Pass A labels a scope 'Blk' and raises; pass B counts 'Blk' labels below 'model'
    and must see only its own."""

    class CountingPass(ScaleShiftPass):
        name = "CountingPass"

        def define_patterns(self):
            return [[[ScopePattern("Blk").add_scope_feature(suffix="blk")],
                     [ScopePattern("Model").add_scope_feature(sub_type="Blk", num=1, suffix="model")]]]

        def generate_fusion_result(self, scopes, result):
            result.reject("counting only")

    class LabellingPass(ScaleShiftPass):
        name = "LabellingPass"

        def define_patterns(self):
            return [[[ScopePattern("Blk").add_scope_feature(suffix="other")]]]

        def generate_fusion_result(self, scopes, result):
            raise RuntimeError("boom")

    import tensorflow as tf

    def build(x):
        with tf.name_scope("model"):
            with tf.name_scope("blk"):
                y = x * 2.0 + 1.0
            with tf.name_scope("other"):
                return tf.nn.relu(y, name="r")

    graph_def, _, _ = _tf1_graph(build)
    alone = _run([CountingPass], graph_def).report.pass_report("CountingPass")
    both = _run([LabellingPass, CountingPass], graph_def).report
    assert alone.matched_scopes == ["model"]
    assert both.pass_report("LabellingPass").error.endswith("raised RuntimeError: boom")
    assert both.pass_report("CountingPass").matched_scopes == ["model"]


def test_the_reason_for_a_dropped_result_names_the_result_that_blocks_it():
    from types import SimpleNamespace

    from scopefusion.core.fusion.conflicts import resolve_conflicts

    def plan(name, pass_name, order, members):
        return SimpleNamespace(name=name, label=name, pass_name=pass_name, order=order, members=frozenset(members))

    inner = plan("a/blk", "P1", 0, {1, 2})          # inside "a"
    other = plan("b", "P2", 1_000_000, {3, 9})      # overlaps "a" in part
    outer = plan("a", "P3", 2_000_000, {1, 2, 3, 4})
    dropped = []
    accepted = resolve_conflicts([inner, other, outer], lambda p, why: dropped.append((p.name, why)))
    assert [p.name for p in accepted] == ["a/blk", "b"]
    assert dropped == [("a", "overlaps 'b' of pass P2, which comes first in the run order")]


def test_badly_nested_patterns_are_a_clear_pass_error():
    class FlatPass(ScaleShiftPass):
        name = "FlatPass"

        def define_patterns(self):
            return [[ScopePattern("ScaleShift").add_scope_feature(suffix="blk")]]  # one level short

    graph, _, _ = build_graph("plain")
    out = _run([FlatPass, ScaleShiftPass], graph)
    error = out.report.pass_report("FlatPass").error
    assert "define_patterns() must return a list of pattern sets" in error
    assert "batch 0 of pattern set 0 is a ScopePattern" in error
    assert len(out.report.fused) == 2  # the other pass still applies
    with pytest.raises(Exception, match="define_patterns"):
        _run([FlatPass], graph, strict=True)


@pytest.mark.parametrize("component,last", [
    ("LayerNorm_1", "LayerNorm"), ("x_0", "x_0"), ("x_01", "x"), ("x_\u00b2", "x_\u00b2"), ("_3", "_3"), ("a_", "a_"),
])
def test_index_suffix_rule(component, last):
    assert strip_index_suffix(component) == last


def test_a_pass_raising_a_scopefusion_error_is_skipped_like_any_other():
    from scopefusion import OptionError

    class OptionRaisingPass(ScaleShiftPass):
        name = "OptionRaisingPass"

        def generate_fusion_result(self, scopes, result):
            raise OptionError("pass-internal")

    graph, _, _ = build_graph("plain")
    out = _run([OptionRaisingPass, AnyScaleShift], graph)
    error = out.report.pass_report("OptionRaisingPass").error
    assert error == "pass OptionRaisingPass (built-in) raised OptionError: pass-internal"
    assert [f.name for f in out.report.fused] == ["model/blk", "model/blk_1"]
    with pytest.raises(Exception, match="OptionRaisingPass .* raised OptionError: pass-internal"):
        _run([OptionRaisingPass], graph, strict=True)


def test_a_failing_reference_implementation_names_who_declared_it():
    import types

    import scopefusion
    from scopefusion import AttrDef, FusedOpDef, TensorArg, hookimpl
    from scopefusion.plugins.registry import load_registry

    def exploding(x, *, scale, shift, T):
        raise ValueError("reference exploded")

    module = types.ModuleType("sf_exploding")
    op = FusedOpDef("ScaleShift", inputs=(TensorArg("x", type_attr="T"),), outputs=(TensorArg("y", type_attr="T"),),
                    attrs=(AttrDef("scale", "float"), AttrDef("shift", "float"), AttrDef("T", "type")),
                    reference=exploding)
    module.scopefusion_scope_passes = hookimpl(lambda: [ScaleShiftPass])
    module.scopefusion_fused_ops = hookimpl(lambda: [op])
    registry = load_registry(autoload=False, plugins=[("sf_exploding", module)])
    assert registry.fused_ops["ScaleShift"].origin == "sf_exploding local"
    graph, _, _ = build_graph("plain")
    with pytest.raises(scopefusion.ScopeFusionError) as info:
        scopefusion.fuse(graph, registry=registry, emit="tf")
    message = str(info.value)
    assert "reference implementation of ScaleShift failed: reference exploded" in message
    assert "declared by sf_exploding local" in message


@pytest.mark.parametrize("scale,reason", [
    (1.7, "attribute 'scale' = 1.7 cannot be written as int: not a whole number"),
    ("attr-value", "cannot be written as int: an AttrValue holding 'f'"),
])
def test_an_int_attribute_refuses_fractions_and_attr_values_of_another_kind(scale, reason):
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

    from scopefusion import AttrDef, FusedOpDef, TensorArg

    int_scale = FusedOpDef("IntScale", inputs=(TensorArg("x", type_attr="T"),),
                           outputs=(TensorArg("y", type_attr="T"),),
                           attrs=(AttrDef("scale", "int"), AttrDef("T", "type")), reference=lambda x, *, scale, T: (x,))
    value = AttrValue(f=2.0) if scale == "attr-value" else scale

    class IntScalePass(ScaleShiftPass):
        name = "IntScalePass"

        def generate_fusion_result(self, scopes, result):
            scope = scopes[0]
            result.set_type("IntScale")
            result.set_attr("scale", value)
            result.set_attr("T", 1)
            result.insert_inputs(scope.nodes_by_op("Mul")[0].name, [0, None])
            result.insert_outputs(scope.nodes_by_op("AddV2")[0].name, [0])

    graph, _, _ = build_graph("tail")
    out = ScopePassManager([PassSpec(IntScalePass)], {"IntScale": int_scale}, FusionOptions()).run(graph)
    (refusal,) = out.report.refused
    assert reason in refusal.reason
