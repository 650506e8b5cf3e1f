"""Patterns written as the TensorFlow function that computes them (``pattern_from_function``):
arguments become variables, constants checked constants (or named ones the match reads back),
Identity reads go, the result is matched canonically like a hand-written pattern; tracing happens
once, lazily, and is kept per process and on disk; bad functions get one error naming them."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import tensorflow as tf

import scopefusion
from scopefusion import (FunctionPattern, FusedOp, FusedOpDef, OpPattern, PatternDefinitionError,
                         PatternFusionBasePass, TensorArg, AttrDef, hookimpl, pattern_from_function)
from scopefusion.core.graph import function_trace
from scopefusion.core.graph.matching import MatchFailure, PatternMatcher, find_matches
from scopefusion.core.graph.pattern import Const, Op, Var, walk
from scopefusion.plugins.registry import load_registry
from scopefusion.testing import PassTester, graph_from_function

ROOT = Path(__file__).resolve().parents[2]
X = tf.TensorSpec([2, 6], tf.float32, "x")


def gelu_tanh(x):
    return 0.5 * x * (1.0 + tf.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def scaled_sigmoid(x, beta):
    return x * tf.sigmoid(beta * x)


def _matches(pattern, fn, *specs):
    view = scopefusion.GraphView(graph_from_function(fn, *(specs or (X,))))
    return find_matches(view, pattern if isinstance(pattern, OpPattern) else pattern.pattern())


# ------------------------------------------------------------------ the traced expression


def test_arguments_become_variables_and_constants_checked_constants():
    traced = pattern_from_function(gelu_tanh)
    expr = traced.expr
    assert isinstance(expr, Op) and expr.types == ("Mul",)
    parts = walk(expr)
    assert {e.name for e in parts if isinstance(e, Var)} == {"x"}
    values = sorted(round(e.value, 6) for e in parts if isinstance(e, Const))
    assert values == [0.044715, 0.5, 0.797885, 1.0]
    ops = sorted(t for e in parts if isinstance(e, Op) for t in e.types)
    assert "Pow" not in ops and "Identity" not in ops  # x ** 3 is the product x * x * x
    assert traced.pattern().name == "gelu_tanh" and traced.pattern("G").root is expr


def test_the_traced_pattern_matches_every_spelling_the_hand_written_one_does():
    traced = pattern_from_function(gelu_tanh)
    spellings = {
        "as written": gelu_tanh,
        "tf.nn.gelu": lambda x: tf.nn.gelu(x, approximate=True),
        "regrouped": lambda x: x * (tf.tanh((x * x * x * 0.044715 + x) * math.sqrt(2 / math.pi)) + 1.0) * 0.5,
        "square": lambda x: 0.5 * x * (1.0 + tf.tanh(0.7978845608 * (x + 0.044715 * (x * tf.square(x))))),
    }
    for name, fn in spellings.items():
        (match,) = _matches(traced, fn)
        assert match.tensor_name("x") == "x", name


def test_a_changed_constant_is_a_near_miss_naming_it():
    traced = pattern_from_function(gelu_tanh).pattern()
    view = scopefusion.GraphView(graph_from_function(
        lambda x: 0.5 * x * (1.0 + tf.tanh(0.7978845608 * (x + 0.05 * x ** 3))), X))
    failures = []
    assert find_matches(view, traced, lambda root, why: failures.append(str(why))) == []
    assert any("expected 0.044715" in f for f in failures), failures


def test_tolerance_widens_every_traced_constant():
    def rough(x):
        return 0.5 * x * (1.0 + tf.tanh(0.7978845608 * (x + 0.0447 * x ** 3)))

    assert _matches(pattern_from_function(gelu_tanh), rough) == []
    assert len(_matches(pattern_from_function(gelu_tanh, rtol=1e-3), rough)) == 1


def test_named_constants_are_read_back_and_checked():
    quick_gelu = lambda x: x * tf.sigmoid(1.702 * x)  # noqa: E731
    (match,) = _matches(pattern_from_function(scaled_sigmoid, constants={"beta": None}), quick_gelu)
    assert float(match.consts["beta"]) == pytest.approx(1.702)
    assert _matches(pattern_from_function(scaled_sigmoid, constants={"beta": 1.0}), quick_gelu) == []
    wanted = pattern_from_function(scaled_sigmoid, constants={"beta": lambda v: 1.5 < float(v) < 2.0})
    assert len(_matches(wanted, quick_gelu)) == 1


def test_matching_is_canonical_commutative_bias_add_and_identity_reads():
    def affine(x, b):
        return tf.identity(tf.nn.bias_add(x, b) * 2.0)

    traced = pattern_from_function(affine)
    assert "Identity" not in {t for e in walk(traced.expr) if isinstance(e, Op) for t in e.types}
    bias = tf.TensorSpec([6], tf.float32, "b")
    (match,) = _matches(traced, lambda x, b: 2.0 * (b + x), X, bias)  # an Add, operands swapped
    assert {match.tensor_name("x"), match.tensor_name("b")} == {"x", "b"}  # a sum: either way round
    assert _matches(traced, lambda x, b: 2.0 * (b - x), X, bias) == []


def test_an_op_read_twice_is_one_node_of_the_match():
    def centred_square(x):
        t = x - 1.0
        return t * t * x

    traced = pattern_from_function(centred_square)
    assert len(_matches(traced, centred_square)) == 1
    # the same value computed by two nodes is another graph: the pattern's t is one node
    assert _matches(traced, lambda x: (x - 1.0) * tf.identity(x - 1.0) * x) == []


def test_input_specs_set_dtypes():
    traced = pattern_from_function(scaled_sigmoid, "float16", constants={"beta": None})
    assert traced.specs == [(None, "float16"), ((), "float32")]
    half = tf.TensorSpec([2, 6], tf.float16, "x")
    assert pattern_from_function(gelu_tanh, half).specs == [((2, 6), "float16")]
    (match,) = _matches(pattern_from_function(gelu_tanh, half),
                        lambda x: tf.nn.gelu(x, approximate=True), half)
    assert match.tensor_name("x") == "x"


# ------------------------------------------------------------------ errors


def _cannot_be_traced(x):
    return x.no_such_attribute


def _random(x):
    return x * tf.random.uniform(tf.shape(x))


def _nothing():
    return tf.constant(1.0)


def _only_constant(beta):
    return beta * 2.0


def _identity(x):
    return tf.identity(x)


def _two(x):
    return x + 1.0, x * 2.0


VARIABLE = tf.Variable(2.0)


def _reads_a_variable(x):
    return x * VARIABLE


@pytest.mark.parametrize("fn, constants, message", [
    (_cannot_be_traced, None, r"pattern function _cannot_be_traced: .*could not be traced: AttributeError"),
    (_random, None, r"pattern function _random: uses RandomUniform .* no meaning in a pattern"),
    (_identity, None, r"pattern function _identity: its result is no op of its inputs"),
    (_two, None, r"pattern function _two: .*must return one tensor"),
    (_reads_a_variable, None, r"pattern function _reads_a_variable: .*reads 1 tensor\(s\) from outside"),
])
def test_a_function_that_makes_no_pattern_is_refused_naming_it(fn, constants, message):
    traced = pattern_from_function(fn, constants=constants)
    with pytest.raises(PatternDefinitionError, match=message):
        traced.pattern()


@pytest.mark.parametrize("fn, kwargs, message", [
    (_nothing, {}, r"pattern function _nothing has no inputs"),
    (_only_constant, {"constants": {"beta": None}}, r"pattern function _only_constant has no inputs"),
    (gelu_tanh, {"constants": {"y": None}}, r"constants names no argument: y \(arguments: x\)"),
    (lambda *xs: xs[0], {}, r"every argument must be positional, not xs"),
    ("gelu", {}, r"pattern_from_function needs a function, got 'gelu'"),
    (gelu_tanh, {"input_specs": ("float32", "float32")}, r"gelu_tanh: 2 input specs for 1 arguments"),
    (gelu_tanh, {"input_specs": ("complex", )}, r"gelu_tanh: argument x: .*complex"),
])
def test_definition_errors_come_at_once(fn, kwargs, message):
    specs = kwargs.pop("input_specs", ())
    with pytest.raises(PatternDefinitionError, match=message):
        pattern_from_function(fn, *specs, **kwargs)


# ------------------------------------------------------------------ tracing once


def test_the_pattern_is_made_once_and_usable_as_a_decorator(monkeypatch, tmp_path):
    monkeypatch.setenv("SCOPEFUSION_CACHE_DIR", str(tmp_path))
    calls = []
    real = function_trace.trace_here
    monkeypatch.setattr(function_trace, "trace_here", lambda fn, specs: calls.append(fn) or real(fn, specs))

    @pattern_from_function(constants={"beta": None})
    def swish(x, beta):
        return x * tf.sigmoid(beta * x)

    assert isinstance(swish, FunctionPattern) and calls == []  # nothing traced yet
    assert swish(tf.constant(1.0), tf.constant(1.0)).numpy() == pytest.approx(1 / (1 + math.exp(-1)))
    first = swish.expr
    assert swish.expr is first and len(calls) == 1
    assert pattern_from_function(swish.function, constants={"beta": None}) is swish
    # a later process: the trace is read from the disk cache
    function_trace._TRACED.clear()
    again = FunctionPattern(swish.function, swish.specs, swish.constants, None, 0.0)
    assert again.expr == first and len(calls) == 1
    assert [p.suffix for p in (tmp_path / "patterns").iterdir()] == [".json"]


def test_without_tensorflow_loaded_a_child_process_traces_and_the_disk_keeps_it(tmp_path):
    code = ("import sys\n"
            "from scopefusion.builtin_passes.graph.gelu import gelu_tanh, tanh_forms\n"
            "forms = tanh_forms()\n"
            "assert forms[0] is gelu_tanh.expr and 'tensorflow' not in sys.modules\n"
            "print(sorted(e.types[0] for e in __import__('scopefusion').core.graph.pattern.walk(forms[0]) "
            "if hasattr(e, 'types') and e.types))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SCOPEFUSION_CACHE_DIR": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "3"}
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout and "Tanh" in runs[0].stdout
    assert len(list((tmp_path / "patterns").iterdir())) == 2  # gelu_tanh and gelu_fast


def test_it_is_part_of_the_public_op_pattern_language():
    assert "pattern_from_function" in scopefusion.__all__ and "FunctionPattern" in scopefusion.__all__
    assert scopefusion.pattern_from_function is pattern_from_function


# ------------------------------------------------------------------ in a plugin


def _mish_reference(x, *, T):
    return (x * tf.tanh(tf.math.softplus(x)),)


MISH = FusedOpDef("Mish", inputs=(TensorArg("x", type_attr="T"),), outputs=(TensorArg("y", type_attr="T"),),
                  attrs=(AttrDef("T", "type"),), same_shape={0: 0}, reference=_mish_reference,
                  description="x * tanh(softplus(x))")


def mish(x):
    return x * tf.tanh(tf.math.softplus(x))


class MishFusionPass(PatternFusionBasePass):
    """Mish, written as the function that computes it."""

    def define_patterns(self):
        return [pattern_from_function(mish).pattern("Mish")]

    def fusion(self, match):
        return FusedOp("Mish", inputs=["x"], attrs={"T": match.view.lend(match.root).attr["T"].type})


@hookimpl
def scopefusion_graph_passes():
    return [MishFusionPass]


@hookimpl
def scopefusion_fused_ops():
    return [MISH]


def _plugin() -> types.ModuleType:
    """A plugin module, as a package's entry point names one."""
    module = types.ModuleType("mish_plugin")
    module.scopefusion_graph_passes = scopefusion_graph_passes
    module.scopefusion_fused_ops = scopefusion_fused_ops
    return module


def _keras_mish_graph():
    import keras

    keras.utils.set_random_seed(0)
    dense = keras.layers.Dense(6, activation="mish")
    return graph_from_function(lambda x: dense(x), X)


def _tf_keras_mish_graph():
    import tf_keras

    return graph_from_function(lambda x: tf_keras.activations.mish(x * 2.0) + 1.0, X)


@pytest.mark.parametrize("build", [_keras_mish_graph, _tf_keras_mish_graph])
def test_a_plugin_pass_made_of_a_function_fuses_real_mish_and_verifies(build):
    graph = build()
    registry = load_registry(autoload=False, plugins=[("mish", _plugin())], strict=True)
    assert registry.get("MishFusionPass").origin == "mish local"
    result = scopefusion.fuse(graph, registry=registry)
    helper = PassTester(registry)
    helper.assert_fused(result, "Mish", 1)
    assert "Softplus" not in {n.op for n in result.fused_graph_def.node}
    helper.assert_verified(graph, result)


def test_the_plugin_pass_leaves_a_look_alike():
    graph = graph_from_function(lambda x: x * tf.tanh(tf.nn.relu(x)), X)
    registry = load_registry(autoload=False, plugins=[("mish", _plugin())])
    result = scopefusion.fuse(graph, registry=registry)
    assert result.report.fused_count("Mish") == 0
    matcher = PatternMatcher(scopefusion.GraphView(graph))
    root = next(i for i, op in enumerate(matcher.index.ops) if op == "Mul")
    with pytest.raises(MatchFailure, match="is Relu, expected Softplus"):
        matcher.match_pattern(pattern_from_function(mish).pattern(), root)
