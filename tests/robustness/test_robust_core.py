"""Bad graphs and misbehaving passes, at the core: each case was found by a fuzzer or a
new user; every one gets a clear error or refusal, and the output graph stays valid."""
from __future__ import annotations

import signal
import time

import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2

import scopefusion
from scopefusion import (
    FusedOp, FusionScopesResult, GraphValidationError, OpPattern, PassError, PatternFusionBasePass, ScopeBasePass,
    ScopeGraph, ScopePattern, op,
)
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.scope.scope_graph import strip_index_suffix
from scopefusion.testing import PassTester, graph_from_function

SPEC = tf.TensorSpec([2, 3], tf.float32, "x")


def _node(graph, name, op_type, inputs=(), dtype=1):
    node = graph.node.add(name=name, op=op_type)
    node.input.extend(inputs)
    node.attr["T" if op_type != "Placeholder" else "dtype"].type = dtype
    return node


# ------------------------------------------------------------------ bad graphs
def test_a_node_thousands_of_scopes_deep_is_indexed_without_recursion():
    graph = graph_pb2.GraphDef()
    _node(graph, "x", "Placeholder")
    deep = "/".join(f"s{k}" for k in range(3000)) + "/relu"
    _node(graph, deep, "Relu", ["x"])
    scopes = ScopeGraph(graph)
    assert scopes.scope_of(deep).depth == 3000
    result = scopefusion.fuse(graph)
    assert result.report.nodes_after == 2


@pytest.mark.parametrize("text", ["x:\u00b2", "x:" + "7" * 5000, "x:-1", "x:1e3"])
def test_an_input_with_a_port_that_is_no_number_names_no_node(text):
    graph = graph_pb2.GraphDef()
    _node(graph, "x", "Placeholder")
    _node(graph, "y", "Relu", [text])
    with pytest.raises(GraphValidationError, match="inputs that name no node"):
        GraphIndex(graph)


def test_a_scope_suffix_of_thousands_of_digits_is_kept_or_dropped_without_converting_it():
    assert strip_index_suffix("block_" + "9" * 5000) == "block"
    assert strip_index_suffix("block_" + "0" * 5000) == "block_" + "0" * 5000
    assert strip_index_suffix("block_\u00b2") == "block_\u00b2"


def test_a_splat_constant_of_billions_of_elements_is_never_expanded():
    graph = graph_pb2.GraphDef()
    _node(graph, "x", "Placeholder")
    axes = graph.node.add(name="LayerNorm/moments/reduction_indices", op="Const")
    axes.attr["dtype"].type = 3
    tensor = axes.attr["value"].tensor
    tensor.dtype = 3
    tensor.tensor_shape.dim.add(size=2_000_000_000)
    tensor.int_val.append(-1)
    mean = _node(graph, "LayerNorm/moments/mean", "Mean", ["x", axes.name])
    mean.attr["keep_dims"].b = True
    started = time.perf_counter()
    view = scopefusion.GraphView(graph)
    assert view.const_value(axes.name) is None  # not read: it would take gigabytes
    assert view.static_shape((1, 0)) == [2_000_000_000]  # its declared shape is still known
    scopefusion.fuse(graph)
    assert time.perf_counter() - started < 30  # generous bound: it took minutes and gigabytes before


# ------------------------------------------------------------------ inner graphs and names
class InnerGraphPass(ScopeBasePass):
    """blk (x * 2) -> an inner graph that each test spoils in one way."""

    general = False
    spoil = ""

    def define_patterns(self):
        return [[[ScopePattern("Blk").add_scope_feature(suffix="blk")]]]

    def generate_fusion_result(self, scopes, result: FusionScopesResult):
        scope = scopes[0]
        mul = scope.nodes_by_op("Mul")[0].name
        result.set_type("Relu2")
        result.insert_inputs(scope.suffix_of(mul), [0, None])
        result.insert_outputs(scope.suffix_of(mul), [0])
        t = {"T": 1}
        spoil = self.spoil
        first_input = ["second"] if spoil == "cycle" else [result.fused_input(0)]
        result.add_inner_node("first", "NoSuchOp" if spoil == "unknown op" else "Relu", first_input,
                              {} if spoil == "missing attr" else t)
        second_inputs = ["first:3"] if spoil == "port" else ["first"]
        if spoil == "arity":
            second_inputs.append(result.fused_input(0))
        result.add_inner_node("bad name!" if spoil == "name" else "second", "Relu", second_inputs, t)
        result.set_inner_output(0, "bad name!" if spoil == "name" else "second")
        if spoil == "result name":
            result.set_name("blk:0\n")


def _blk_graph():
    def fn(x):
        with tf.name_scope("blk"):
            y = x * 2.0
        return tf.nn.relu(y)
    return graph_from_function(fn, SPEC)


@pytest.mark.parametrize("spoil,needle", [
    ("cycle", "the inner graph has a cycle"),
    ("unknown op", "'NoSuchOp', which is neither a declared fused op nor a TensorFlow op"),
    ("port", "has 1 output(s)"),
    ("missing attr", "lacks required attribute(s) T"),
    ("arity", "has 2 data input(s), its op takes 1"),
    ("name", "does not make a valid node name"),
    ("result name", "is not a valid node name"),
])
def test_a_spoilt_inner_graph_is_refused_with_the_reason(spoil, needle):
    cls = type(f"Spoilt{spoil.title().replace(' ', '')}", (InnerGraphPass,), {"spoil": spoil})
    graph = _blk_graph()
    tester = PassTester().with_passes([cls])
    result = tester.run(graph, enable=cls.__name__)
    (refusal,) = result.report.pass_report(cls.__name__).refused
    assert needle in refusal.reason
    GraphIndex(result.fused_graph_def)
    tester.assert_verified(graph, result)


def test_the_unspoilt_inner_graph_applies():
    graph = _blk_graph()
    tester = PassTester().with_passes([InnerGraphPass])
    result = tester.run(graph, enable="InnerGraphPass")
    assert result.report.pass_report("InnerGraphPass").refused == []
    assert {"blk/first", "blk/second"} <= {n.name for n in result.fused_graph_def.node}


@pytest.mark.parametrize("name", ["relu:0", "^relu", "relu\nx", "a//b", "trailing/", "_under", "a b"])
def test_a_graph_pass_naming_its_fused_node_badly_is_refused(name):
    class Named(PatternFusionBasePass):
        def define_patterns(self):
            return [OpPattern("R", op("Relu", op("Relu", "$x"), label="r"))]

        def fusion(self, match):
            return FusedOp("Relu", inputs=["x"], attrs={"T": 1}, name=name)

    graph = graph_from_function(lambda x: tf.nn.relu(tf.nn.relu(x)), SPEC)
    result = PassTester().with_passes([Named]).run(graph)
    (refusal,) = result.report.pass_report("Named").refused
    assert "is not a valid node name" in refusal.reason
    GraphIndex(result.fused_graph_def)


# ------------------------------------------------------------------ misbehaving passes
class Exiting(PatternFusionBasePass):
    def define_patterns(self):
        return [OpPattern("R", op("Relu", "$x"))]

    def fusion(self, match):
        raise SystemExit(3)


class Interrupted(Exiting):
    def fusion(self, match):
        raise KeyboardInterrupt


class Slow(Exiting):
    def fusion(self, match):
        time.sleep(30)


def test_a_pass_calling_sys_exit_is_contained_and_named():
    graph = graph_from_function(lambda x: tf.nn.relu(x), SPEC)
    tester = PassTester().with_passes([Exiting])
    result = tester.run(graph, strict=False)
    assert result.report.pass_report("Exiting").error == "pass Exiting (test-passes local) raised SystemExit: 3"
    with pytest.raises(PassError, match="raised SystemExit"):
        tester.run(graph)


class CtrlC(Exiting):
    def fusion(self, match):
        signal.raise_signal(signal.SIGINT)  # a real interrupt, as Ctrl-C sends it
        time.sleep(5)


def test_a_keyboard_interrupt_still_interrupts():
    graph = graph_from_function(lambda x: tf.nn.relu(x), SPEC)
    with pytest.raises(KeyboardInterrupt):
        PassTester().with_passes([CtrlC]).run(graph, strict=False)


def test_a_keyboard_interrupt_a_pass_raises_itself_is_contained_like_sys_exit():
    graph = graph_from_function(lambda x: tf.nn.relu(x), SPEC)
    result = PassTester().with_passes([Interrupted]).run(graph, strict=False)
    assert result.report.pass_report("Interrupted").error == (
        "pass Interrupted (test-passes local) raised KeyboardInterrupt: (no message)")
    assert "Relu" in [n.op for n in result.fused_graph_def.node]


def test_a_pass_past_its_time_limit_is_stopped_and_reported():
    graph = graph_from_function(lambda x: tf.nn.relu(x), SPEC)
    started = time.perf_counter()
    result = PassTester().with_passes([Slow]).run(graph, strict=False, pass_timeout=0.5)
    assert time.perf_counter() - started < 10
    assert result.report.pass_report("Slow").error == "pass Slow (test-passes local) ran longer than the limit of 0.5 s"
    assert "Relu" in [n.op for n in result.fused_graph_def.node]
    with pytest.raises(scopefusion.OptionError, match="pass_timeout"):
        scopefusion.fuse(graph, pass_timeout=0)


# ------------------------------------------------------------------ passes that change what they read
class Mutating(PatternFusionBasePass):
    """Reads a node, changes it, then fails: the change must not stay."""

    mode = "raise"

    def define_patterns(self):
        return [OpPattern("R", op("Relu", "$x", label="relu"))]

    def fusion(self, match):
        node = match.node("relu")
        node.attr["T"].type = 2  # to float64: a graph TensorFlow would reject
        node.input.append("^x")
        if self.mode == "raise":
            raise ValueError("oops")
        return self.refuse("changed my mind")


class MutatingScopePass(ScopeBasePass):
    def define_patterns(self):
        return [[[ScopePattern("Blk").add_scope_feature(suffix="blk")]]]

    def generate_fusion_result(self, scopes, result):
        scopes[0].nodes_by_op("Mul")[0].op = "Sub"
        result.reject("never")


@pytest.mark.parametrize("mode", ["raise", "refuse"])
def test_a_graph_pass_that_changes_what_it_reads_is_undone_and_named(mode):
    cls = type(f"Mutating{mode.title()}", (Mutating,), {"mode": mode})
    graph = graph_from_function(lambda x: tf.nn.relu(x), SPEC)
    before = graph.SerializeToString()
    result = PassTester().with_passes([cls]).run(graph, strict=False)
    error = result.report.pass_report(cls.__name__).error
    assert error is not None and "changed node(s) 'Relu', which passes may only read" in error
    assert "the changes were undone" in error
    (relu,) = [n for n in result.fused_graph_def.node if n.name == "Relu"]
    assert relu.attr["T"].type == 1 and list(relu.input) == ["x"]
    assert graph.SerializeToString() == before  # the caller's graph was never touched
    PassTester().assert_verified(graph, result)


def test_a_scope_pass_that_changes_what_it_reads_is_undone_and_named():
    graph = _blk_graph()
    tester = PassTester().with_passes([MutatingScopePass])
    result = tester.run(graph, strict=False)
    error = result.report.pass_report("MutatingScopePass").error
    assert error is not None and "changed node(s) 'blk/mul'" in error
    assert [n.op for n in result.fused_graph_def.node if n.name == "blk/mul"] == ["Mul"]
    with pytest.raises(PassError, match="changed node"):
        tester.run(graph)


def test_the_command_line_takes_a_pass_time_limit(tmp_path, capsys):
    from scopefusion.cli import main

    assert main(["run", "--pass-timeout", "0", "-o", str(tmp_path / "o.pb")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "scopefusion: error: --pass-timeout must be a positive number of seconds, not 0.0"
    assert "No model given" not in "\n".join(err)  # refused before any work
    assert main(["run", "--pass-timeout", "60", "-o", str(tmp_path / "o.pb")]) == 0


def test_a_cycle_through_next_iteration_that_is_no_loop_back_edge_is_refused():
    """Only NextIteration -> Merge closes a loop; any other cycle through a NextIteration is a cycle."""
    graph = graph_pb2.GraphDef()
    _node(graph, "x", "Placeholder")
    _node(graph, "relu", "Relu", ["x", "^next"])
    _node(graph, "next", "NextIteration", ["relu"])
    with pytest.raises(GraphValidationError, match="cycle"):
        GraphIndex(graph)
