"""The op-pattern language (op, const, var, one_of, ANY, OpPattern), its matcher and the FusionPattern builder,
on one small real TensorFlow graph."""
from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

from scopefusion import (
    ANY,
    FusionPattern,
    FusionPatternError,
    GraphView,
    MatchFailure,
    OpPattern,
    PatternDefinitionError,
    PatternMatcher,
    const,
    one_of,
    op,
    var,
)
from scopefusion.core.graph.matching import find_matches, match_at


def _model(x, y):
    import tensorflow as tf

    e, lg, sq = tf.math.exp(x, name="e"), tf.math.log(y, name="l"), tf.math.sqrt(y, name="sq")
    sub, mul = tf.subtract(e, lg, name="sub"), tf.multiply(e, lg, name="mul")
    xy = tf.multiply(x, y, name="xy")
    two = tf.constant(2.0, name="two")  # read through Identity reads and by two more consumers
    out = [
        tf.raw_ops.AddV2(x=e, y=lg, name="addv2"), tf.raw_ops.Add(x=e, y=lg, name="add"),
        tf.maximum(e, lg, name="max"), tf.minimum(e, lg, name="min"),
        tf.add_n([e, lg, sq], name="addn"),
        tf.math.exp(tf.unstack(x, name="unstack")[1], name="ub"),  # reads output 1 of a multi-output op
        tf.add(e, e, name="ee"),  # one node read twice
        tf.add(tf.math.exp(x, name="ea"), tf.math.exp(x, name="eb"), name="twin"),  # two equal nodes
        tf.add(e, tf.math.exp(y, name="ey"), name="e_ey"),
        tf.multiply(x, tf.identity(x, name="x_read"), name="xx"),
        tf.subtract(xy, y, name="xy_y"),
        tf.subtract(x, sub, name="rsub"),
        tf.add(sub, mul, name="sub_mul"),
        tf.nn.leaky_relu(x, alpha=0.2, name="lrelu"),
        tf.reduce_sum(x, axis=1, keepdims=True, name="sum"),
        tf.multiply(x, tf.identity(tf.identity(two, name="two_id"), name="two_read"), name="m_read"),  # a chain
        tf.add(tf.multiply(x, two, name="xs"), tf.multiply(y, two, name="ys"), name="shared"),
        tf.add(tf.multiply(x, 2.0, name="xc"), tf.multiply(y, 2.0, name="yc"), name="separate"),  # two Consts
        tf.multiply(x, tf.constant([2.0], name="two_1"), name="m_vec1"),
        tf.multiply(x, tf.constant([2.0, 2.0, 2.0], name="two_3"), name="m_vec3"),
        tf.multiply(x, tf.constant(2.002, name="near_two"), name="m_near"),
        tf.multiply(x, tf.constant(1 / 3, name="third32"), name="m32"),
        tf.multiply(tf.cast(x, tf.float16, name="x16"), tf.constant(1 / 3, tf.float16, name="third16"), name="m16"),
        tf.multiply(tf.cast(x, tf.bfloat16), tf.constant(1 / 3, tf.bfloat16, name="third_bf"), name="mbf"),
        tf.add(tf.multiply(e, two, name="e2"), lg, name="trail"),
    ]
    return out


@functools.cache
def _graph():
    import tensorflow as tf

    from scopefusion.testing import graph_from_function

    spec = [tf.TensorSpec([2, 3], tf.float32, "x"), tf.TensorSpec([2, 3], tf.float32, "y")]
    return graph_from_function(_model, *spec)


@functools.cache
def _view() -> GraphView:
    return GraphView(_graph())


def at(name: str) -> int:
    return _view().index.index[name]


def names(indices) -> set[str]:
    return {_view().index.names[i] for i in indices}


def match(expr, name: str, **kw):
    pattern = expr if isinstance(expr, OpPattern) else OpPattern("p", expr)
    return PatternMatcher(_view(), **kw).match_pattern(pattern, at(name))


def fails(expr, name: str, **kw) -> MatchFailure:
    with pytest.raises(MatchFailure) as info:
        match(expr, name, **kw)
    return info.value


EXP, LOG, SQRT = op("Exp", ANY), op("Log", ANY), op("Sqrt", ANY)


def test_the_graph_has_the_structures_the_tests_rely_on():
    v = _view()
    assert v.input_names("ub") == ["unstack:1"] and v.op_of("unstack") == "Unpack"
    assert v.input_names("ee") == ["e", "e"] and v.input_names("xx") == ["x", "x_read"]
    assert v.input_names("m_read") == ["x", "two_read"] and v.input_names("two_read") == ["two_id"]
    assert v.op_of("two_read") == v.op_of("two_id") == "Identity" and v.input_names("two_id") == ["two"]
    assert v.input_names("xs")[1] == v.input_names("ys")[1] == "two"
    assert v.input_names("xc")[1] != v.input_names("yc")[1]
    assert [v.op_of(n) for n in ("add", "addv2", "addn")] == ["Add", "AddV2", "AddN"]
    assert str(v.const_value("third16").dtype) == "float16" and str(v.const_value("third_bf").dtype) == "bfloat16"


# ----------------------------------------------------------------------------- op types, arity, ports

def test_types_with_alternatives_and_any_type():
    add = op(("Add", "AddV2"), EXP, LOG)
    assert match(add, "add").root_name == "add" and match(add, "addv2").root_name == "addv2"
    assert str(fails(add, "sub")) == "'sub' is Sub, expected Add/AddV2"
    m = match(op("AddN", op(any_inputs=True, label="a"), op((), ANY, label="b"), op((), "$y")), "addn")
    assert (m.name("a"), m.name("b"), m.tensor_name("y")) == ("e", "l", "y")
    assert str(fails(op("Exp", op((), ANY)), "e")) == "input 0 of 'e': 'x' has 0 inputs, expected 1"


def test_exact_arity_extra_inputs_and_any_inputs():
    assert str(fails(op("AddN", EXP, LOG), "addn")) == "'addn' has 3 inputs, expected 2"
    assert match(op("AddN", EXP, LOG, extra_inputs=True), "addn").members == {at("addn"), at("e"), at("l")}
    assert str(fails(op("AddN"), "addn")) == "'addn' has 3 inputs, expected 0"  # no inputs listed: none
    assert match(op("AddN", any_inputs=True), "addn").members == {at("addn")}
    assert "has 2 inputs, expected 3" in str(fails(op("Mul", EXP, LOG, SQRT), "mul"))


def test_port_matches_output_one_of_a_multi_output_op():
    m = match(op("Exp", op("Unpack", ANY, port=1, label="u")), "ub")
    assert m.name("u") == "unstack"
    assert match(op("Exp", "$t"), "ub").tensor_name("t") == "unstack:1"
    assert str(fails(op("Exp", op("Unpack", ANY)), "ub")) == (
        "input 0 of 'ub': 'unstack' output 1 is used where output 0 is expected")
    assert "output 1 is used where output 2" in str(fails(op("Exp", op("Unpack", ANY, port=2)), "ub"))


@pytest.mark.parametrize("node", ["mul", "add", "addv2", "max", "min"])
def test_commutative_ops_match_in_either_order(node):
    t = _view().op_of(node)
    assert match(op(t, EXP, LOG), node).members == {at(node), at("e"), at("l")}
    assert match(op(t, LOG, EXP), node).members == {at(node), at("e"), at("l")}
    assert str(fails(op(t, LOG, EXP, commutative=False), node)) == f"input 0 of '{node}': 'e' is Exp, expected Log"


def test_other_ops_keep_their_order_unless_told():
    assert "'e' is Exp, expected Log" in str(fails(op("Sub", LOG, EXP), "sub"))
    assert match(op("Sub", LOG, EXP, commutative=True), "sub").root_name == "sub"
    assert not op(("AddV2", "Sub"), LOG, EXP).commutative  # every type must be commutative
    assert not op("Mul", ANY, ANY, ANY).commutative


def test_unordered_inputs_in_a_permuted_order():
    pattern = op("AddN", SQRT, EXP, LOG)
    assert "'e' is Exp, expected Sqrt" in str(fails(pattern, "addn"))
    m = match(op("AddN", op("Sqrt", "$y", label="s"), EXP, op("Log", "$y"), unordered=True), "addn")
    assert m.name("s") == "sq" and m.members == {at(n) for n in ("addn", "e", "l", "sq")}
    assert "expected Sqrt" in str(fails(op("AddN", SQRT, SQRT, LOG, unordered=True), "addn"))


def test_commutative_choice_is_revisited_when_a_later_input_fails():
    # x*y - y has the form a*b - a (a = y, b = x): the second order of the Mul must be tried
    # when the first one's bindings make Sub's input 1 fail
    m = match(op("Sub", op("Mul", "$a", "$b"), "$a"), "xy_y")
    assert (m.tensor_name("a"), m.tensor_name("b")) == ("y", "x")


# ----------------------------------------------------------------------------- constants

@pytest.mark.parametrize("expr, node, ok", [
    (const(2.0), "m_read", True),  # through the Identity read
    (const(2.0), "m_vec1", True),  # [1] counts as a scalar
    (const([2.0]), "xs", True),
    (const(2.0), "m_vec3", False),
    (const([2.0, 2.0, 2.0]), "m_vec3", True),
    (const(2.0), "m_near", False),  # float32: 1e-3 relative off is another value
    (const(2.0, rtol=1e-2), "m_near", True),
    (const(2.0, atol=0.01), "m_near", True),
    (const(1 / 3), "m32", True),
    (const(1 / 3), "m16", True),  # float16 rounds 1/3 to 0.33325
    (const(1 / 3, rtol=1e-6), "m16", False),
    (const(0.334), "m16", False),
    (const(1 / 3), "mbf", True),  # bfloat16 rounds it to 0.33398 (2e-3 off: beyond float16's tolerance)
    (const(1 / 3, rtol=1e-3), "mbf", False),
    (const(0.34), "mbf", False),
    (const(where=lambda v: v > 1), "m_read", True),
    (const(where=lambda v: v < 0), "m_read", False),
])
def test_constant_values(expr, node, ok):
    pattern = op("Mul", ANY, expr)
    if ok:
        assert match(pattern, node).root_name == node
    else:  # refused for its value or shape, not for being no constant
        why = str(fails(pattern, node))
        assert why.startswith(f"input 1 of '{node}': ") and "' is not a constant" not in why


def test_constant_failure_messages():
    assert "'two_3' has shape [3], expected []" in str(fails(op("Mul", "$x", const(2.0)), "m_vec3"))
    assert "'near_two' is 2.00" in str(fails(op("Mul", "$x", const(2.0)), "m_near"))
    assert "expected the constant 2.0" in str(fails(op("Mul", "$x", const(2.0)), "m_near"))
    assert "'two_read' is 2.0, which is not negative" in str(
        fails(op("Mul", "$x", const(where=lambda v: v < 0, description="negative")), "m_read"))
    assert "'x' is not a constant, expected the constant 2.0" in str(fails(op("Mul", const(2.0), const(2.0)), "m_read"))


def test_constant_label_binds_the_const_node_and_captures_its_value():
    m = match(op("Mul", "$x", const(2.0, label="k")), "m_read")
    assert m.name("k") == "two" and m.node("k").op == "Const" and float(m.consts["k"]) == 2.0
    assert names(m.members) == {"m_read", "two_read", "two_id", "two"}
    m16 = match(op("Mul", ANY, const(label="k")), "m16")
    assert str(m16.consts["k"].dtype) == "float16" and m16.name("k") == "third16"


def test_a_constant_label_met_twice_is_one_node():
    pattern = op("AddV2", op("Mul", "$a", const(2.0, label="k")), op("Mul", "$b", const(2.0, label="k")))
    m = match(pattern, "shared")
    assert m.name("k") == "two" and (m.tensor_name("a"), m.tensor_name("b")) == ("x", "y")
    assert "label 'k' is bound to 'xc/y', but here it would be 'yc/y'" in str(fails(pattern, "separate"))


def test_a_constant_label_met_twice_and_undone_keeps_the_trail_straight():
    # the second meeting of k (the same node) happens in a branch that fails: undoing that branch must keep
    # the first binding of k (and its value)
    second = one_of(op("Mul", const(2.0, label="k"), op("Sqrt", ANY)), op("Mul", ANY, ANY))
    m = match(op("AddV2", op("Mul", ANY, const(2.0, label="k")), second), "shared")
    assert m.name("k") == "two" and set(m.consts) == {"k"} and float(m.consts["k"]) == 2.0


def test_a_constant_label_met_twice_then_undone_ends_in_a_match_failure():
    pattern = op("AddV2", op("Mul", const(2.0, label="k"), "$a"), op("Mul", const(2.0, label="k"), "$a"))
    assert "of 'ys'" in str(fails(pattern, "shared"))  # y is not $a (x)


# ----------------------------------------------------------------------------- variables and definitions

@pytest.mark.parametrize("x", ["$x", var("x")])
def test_a_variable_binds_the_first_tensor_and_is_the_same_tensor_later(x):
    m = match(op("Mul", x, x), "xx")  # x, then x through the Identity x_read
    assert m.tensor_name("x") == "x" and m.tensor("x") == (at("x"), 0)
    assert str(fails(op("Mul", x, x), "xy")) == "input 1 of 'xy': 'y' is not $x ('x')"


def test_definitions_of_variables():
    defs = {"e": op("Exp", "$src"), "l": op("Log", ANY, label="log")}
    m = match(OpPattern("p", op("Mul", "$e", "$l"), defs=defs), "mul")
    assert m.tensor_name("src") == "x" and m.name("log") == "l" and at("e") in m.members
    assert "'x' is Placeholder, expected Exp" in str(fails(OpPattern("p", op("Mul", "$e", "$l"), defs=defs), "xy"))
    matcher = PatternMatcher(_view(), defs=defs)
    matcher.match((at("sub"), 0), op("Sub", "$e", "$l"))
    assert matcher.tensors["src"] == (at("x"), 0) and matcher.nodes == {"log": at("l")}
    assert OpPattern("p", op("Mul", "$e", "$l"), defs=defs).op_count() == 3


def test_a_defined_variable_is_read_where_it_stands_and_each_failure_names_its_own_input():
    defs = {"e": op("Exp", "$src"), "l": op("Log", ANY, label="log")}
    m = match(OpPattern("p", op("Mul", "$e", "$l"), defs=defs), "mul")
    assert {(_view().index.names[node], slot): name for (node, slot), name in m.reads.items()} == {
        ("mul", 0): "e", ("mul", 1): "l", ("e", 0): "src"}  # each where the pattern reads it, $e's not its Exp's
    # after a definition matched, the next input failing is named as the input it is
    why = fails(OpPattern("p", op("Mul", "$e", SQRT), defs=defs), "mul")
    assert str(why) == "input 1 of 'mul': 'l' is Log, expected Sqrt"
    # a matcher that matched once names no input when the next match fails at its root
    matcher = PatternMatcher(_view(), defs=defs)
    matcher.match((at("mul"), 0), op("Mul", "$e", "$l"))
    with pytest.raises(MatchFailure) as info:
        matcher.match((at("xy"), 0), EXP)
    assert str(info.value) == "'xy' is Mul, expected Exp"


# ----------------------------------------------------------------------------- labels

def test_a_label_met_twice_must_be_the_same_node():
    pattern = op("AddV2", op("Exp", "$x", label="e"), op("Exp", "$x", label="e"))
    assert match(pattern, "ee").members == {at("ee"), at("e")}
    assert match(op("AddV2", op("Exp", "$x"), op("Exp", "$x")), "twin").root_name == "twin"  # unlabelled: fine
    assert "label 'e' is bound to 'ea', but here it would be 'eb'" in str(fails(pattern, "twin"))


def test_a_label_met_again_through_another_consumer_is_not_matched_again():
    exp = op("Exp", "$x", label="e")
    m = match(op("AddV2", op("Sub", exp, ANY), op("Mul", exp, ANY)), "sub_mul")
    assert m.name("e") == "e" and m.members == {at(n) for n in ("sub_mul", "sub", "mul", "e")}


def test_a_label_on_two_different_expressions_must_satisfy_both():
    first = op("Sub", op("Exp", "$x", label="e"), ANY)
    m = match(op("AddV2", first, op("Mul", op("Exp", op("Placeholder"), label="e"), ANY)), "sub_mul")
    assert m.name("e") == "e"
    why = fails(op("AddV2", first, op("Mul", op("Exp", op("NoSuchOp"), label="e"), ANY)), "sub_mul")
    assert "expected NoSuchOp" in str(why)


# ----------------------------------------------------------------------------- attributes and dtypes

def small(alpha):
    return alpha < 0.1


@pytest.mark.parametrize("node, attrs, ok", [
    ("lrelu", {"alpha": 0.2}, True),  # a float32 0.2 is 0.2 within the float tolerance
    ("lrelu", {"alpha": 0.25}, False),
    ("lrelu", {"alpha": lambda a: 0.1 < a < 0.3}, True),
    ("lrelu", {"alpha": small}, False),
    ("sum", {"keep_dims": True}, True),
    ("sum", {"keep_dims": False}, False),
    ("sum", {"keep_dims": 1}, False),  # a bool is not an int
])
def test_attribute_predicates(node, attrs, ok):
    pattern = op(_view().op_of(node), extra_inputs=True, **attrs)
    if ok:
        assert match(pattern, node).root_name == node
    else:
        assert str(fails(pattern, node)).startswith(f"'{node}' has {next(iter(attrs))}=")


def test_attribute_failure_messages():
    assert str(fails(op("LeakyRelu", ANY, alpha=small), "lrelu")).endswith("expected small")
    assert str(fails(op("LeakyRelu", ANY, alpha=0.25), "lrelu")).startswith("'lrelu' has alpha=0.2")
    assert str(fails(op("Exp", ANY, alpha=0.2), "e")) == "'e' has no attribute 'alpha'"
    assert match(op("Exp", op("Unpack", ANY, num=2, axis=0, port=1)), "ub").root_name == "ub"


@pytest.mark.parametrize("node, dtype, ok", [
    ("m16", "float16", True), ("m16", "half", True), ("m16", 19, True), ("mbf", {"float16", "bfloat16"}, True),
    ("m16", {"float16", 14}, True), ("m16", "float32", False), ("m32", 1, True), ("m32", ("bfloat16",), False),
])
def test_dtype_predicates(node, dtype, ok):
    pattern = op("Mul", ANY, ANY, dtype=dtype)
    if ok:
        assert match(pattern, node).root_name == node
    else:
        assert str(fails(pattern, node)).startswith(f"'{node}' has dtype ")


def test_dtype_failure_names_dtypes():
    assert str(fails(op("Mul", ANY, ANY, dtype="float32"), "m16")) == "'m16' has dtype float16, expected float32"
    why = fails(op("Mul", ANY, ANY, dtype={19, 14}), "m32")
    assert str(why) == "'m32' has dtype float32, expected bfloat16, float16"
    assert match(op("Mul", op("Placeholder", dtype="float32"), ANY), "xy").root_name == "xy"  # the dtype attr
    assert "'x16' has dtype no dtype attribute" in str(fails(op("Mul", op("Cast", ANY, dtype="float16"), ANY), "m16"))


# ----------------------------------------------------------------------------- alternatives and failures

def test_one_of_takes_the_first_alternative_that_matches():
    m = match(one_of(op("AddV2", ANY, ANY, label="first"), op("AddV2", EXP, LOG, label="second")), "addv2")
    assert set(m.nodes) == {"first"}
    m = match(op("Mul", one_of(op("Sqrt", ANY), op("Exp", ANY, label="exp")), ANY), "mul")
    assert m.name("exp") == "e"


def test_the_failure_says_where_and_why():
    assert str(fails(op("Sub", ANY, op(("Add", "AddV2"), ANY, ANY)), "rsub")) == (
        "input 1 of 'rsub': 'sub' is Sub, expected Add/AddV2")
    why = fails(one_of(op("Mul", ANY, ANY), op("Sub", ANY, ANY)), "sub_mul")
    assert str(why) == "'sub_mul' matches none of the expected forms ('sub_mul' is AddV2, expected Mul)"


def test_the_failure_that_got_furthest_is_reported():
    shallow = op("AddV2", op("Sqrt", ANY), ANY)
    deep = op("AddV2", op("Mul", op("Exp", "$x", label="e"), const(2.0, label="k")), op("Sqrt", ANY))
    why = fails(one_of(shallow, deep, op("Sub", ANY, ANY)), "trail")
    assert str(why) == "input 1 of 'trail': 'l' is Log, expected Sqrt" and why.progress == 3
    # of a commutative op's two orders, the second got further here
    why = fails(op("AddV2", op("Log", op("Sqrt", ANY)), op("Mul", EXP, ANY)), "trail")
    assert str(why) == "input 0 of 'l': 'y' is Placeholder, expected Sqrt" and why.progress == 2


def test_a_failed_alternative_leaves_no_stale_bindings():
    failing = op("AddV2", op("Mul", op("Exp", "$x", label="e"), const(2.0, label="k"), label="m"), op("Sqrt", ANY),
                 label="top")
    working = op("AddV2", op("Mul", ANY, ANY, label="m2"), op("Log", "$y", label="log"))
    m = match(one_of(failing, working), "trail")
    assert m.nodes == {"m2": at("e2"), "log": at("l")}
    assert m.tensors == {"y": (at("y"), 0)} and m.consts == {}
    assert m.members == {at("trail"), at("e2"), at("l")}
    m = match(op("Mul", op((), ANY, label="first"), op("Exp", ANY)), "mul")  # order 1 binds first=e, then fails
    assert m.nodes == {"first": at("l")} and m.members == {at("mul"), at("l"), at("e")}


def test_inside_restricts_matching_to_a_node_set():
    pattern = OpPattern("p", op("Mul", EXP, LOG))
    assert match(pattern, "mul", inside={at("mul"), at("e"), at("l")}).root_name == "mul"
    assert str(fails(pattern, "mul", inside={at("mul"), at("l")})) == (
        "input 0 of 'mul': 'e' lies outside the allowed nodes, expected Exp")
    with pytest.raises(MatchFailure, match="'x_read' lies outside"):  # an Identity outside is not seen through
        match_at(_view(), OpPattern("p", op("Mul", op("Placeholder"), op("Placeholder"))), at("xx"),
                 inside={at("xx"), at("x")})



def test_an_expression_matched_by_matchers_of_different_settings_answers_for_each():
    """An expression keeps what it compiled to, and that holds no matcher's state: the same
    objects match, or not, as each matcher's allowed nodes and definitions say, in any order."""
    pattern = OpPattern("p", op("Mul", EXP, "$l"))
    wide, narrow = PatternMatcher(_view()), PatternMatcher(_view(), inside={at("mul"), at("l")})
    for _ in range(2):
        assert wide.match_pattern(pattern, at("mul")).tensor("l") == (at("l"), 0)
        with pytest.raises(MatchFailure, match="'e' lies outside the allowed nodes"):
            narrow.match_pattern(pattern, at("mul"))
    expr = op("Mul", "$a", "$b")
    as_log = PatternMatcher(_view(), defs={"a": EXP, "b": op("Log", ANY, label="log")})
    as_exp = PatternMatcher(_view(), defs={"a": EXP, "b": EXP})
    for _ in range(2):
        as_log.reset()
        as_log.match((at("mul"), 0), expr)
        assert as_log.nodes == {"log": at("l")}
        as_exp.reset()
        with pytest.raises(MatchFailure, match="'l' is Log, expected Exp"):
            as_exp.match((at("mul"), 0), expr)


def test_constants_of_equal_content_are_decoded_once_into_one_read_only_value():
    from scopefusion.core.graph.constants import tensor_value

    view = GraphView(_graph())
    index = view.index
    consts = [i for i in range(len(index)) if index.ops[i] == "Const"]
    for i in consts:  # each as decoding it alone gives
        value, alone = view.const_value_of(i), tensor_value(index.nodes[i].attr["value"].tensor)
        assert value.dtype == alone.dtype and value.shape == alone.shape and (value == alone).all()
        assert not value.flags.writeable
    xc, yc = (index.data_input(at(n), 1)[0] for n in ("xc", "yc"))  # two Const nodes of 2.0
    assert xc != yc and view.const_value_of(xc) is view.const_value_of(yc)
    assert view.const_value_of(at("two_1")) is not view.const_value_of(xc)  # [2.0] is no scalar 2.0
    assert view.const_value_of(at("two_read")) is view.const_value_of(at("two"))  # Identity reads share it


# ----------------------------------------------------------------------------- OpPattern

@pytest.mark.parametrize("make, message", [
    (lambda: OpPattern("", op("Exp", ANY)), "a pattern needs a name"),
    (lambda: OpPattern("p", op((), ANY)), "the root must be an op() with op types"),
    (lambda: OpPattern("p", const(1.0)), "the root must be an op() with op types"),
    (lambda: OpPattern("p", one_of(EXP, op((), ANY))), "the root must be an op() with op types"),
    (lambda: OpPattern("p", one_of(op("Unpack", ANY, port=1), op("Unpack", ANY))), "read different ports"),
    (lambda: OpPattern("p", op("Exp", ANY, label="e"), outputs=("f",)),
     "output 'f' is no label of the pattern (labels: e)"),
    (lambda: OpPattern("p", EXP, defs={"x": "y"}), "definition of $x: a string must name a variable"),
    (lambda: op("Mul", 3, ANY), "input 0 of Mul: 3 is not a pattern expression"),
    (lambda: op("Mul", ANY, "x"), "input 1 of Mul: a string must name a variable as '$name', got 'x'"),
    (lambda: op("Mul", ANY, "$"), "a string must name a variable"),
    (lambda: op("Mul", ANY, ANY, ANY, commutative=True), "Mul: commutative needs exactly two inputs"),
    (lambda: op("Mul", ANY, ANY, dtype="float33"), "unknown dtype 'float33'"),
    (lambda: op(("Mul", "")), "op types must be non-empty strings"),
    (lambda: op("Exp", ANY, any_inputs=True), "exclude each other"),
    (lambda: op("Exp", port=-1), "port must be >= 0"),
    (lambda: var(""), "a variable needs a name"),
    (lambda: one_of(), "needs at least one option"),
    (lambda: one_of(EXP, 5.0), "option 1 of one_of(): 5.0 is not a pattern expression"),
])
def test_definition_errors(make, message):
    with pytest.raises(PatternDefinitionError) as info:
        make()
    assert message in str(info.value)


def test_root_types_labels_and_op_count():
    p = OpPattern("p", one_of(op(("Add", "AddV2"), ANY, ANY), one_of(op("AddV2", EXP, LOG), op("Sub", ANY, ANY))))
    assert p.root_types == ("Add", "AddV2", "Sub") and p.root_port == 0 and p.root_label is None
    assert OpPattern("p", one_of(op("Mul", EXP, LOG), EXP)).op_count() == 1
    assert OpPattern("p", op("Mul", op("Exp", op("Log", ANY)), LOG)).op_count() == 4
    twice = OpPattern("p", op("AddV2", op("Exp", ANY, label="e"), op("Exp", ANY, label="e")), outputs=("e",))
    assert twice.op_count() == 2 and twice.labels() == {"e"}
    assert OpPattern("p", one_of(op("Mul", ANY, ANY, label="r"), op("AddV2", ANY, ANY, label="r"))).root_label == "r"


def test_find_matches_tries_only_root_types_in_graph_order():
    pattern = OpPattern("exp_of_input", op("Exp", op("Placeholder", label="src"), label="exp"))
    failures: list[tuple[int, MatchFailure]] = []
    found = find_matches(_view(), pattern, on_failure=lambda i, why: failures.append((i, why)))
    exps = [n.name for n in _graph().node if n.op == "Exp"]
    assert len(found) + len(failures) == len(exps) == 5
    assert [m.root_name for m in found] == [n for n in exps if n != "ub"]
    assert [(names([i]), str(why)) for i, why in failures] == [
        ({"ub"}, "input 0 of 'ub': 'unstack' is Unpack, expected Placeholder")]
    assert [m.name("src") for m in found] == ["x", "x", "x", "y"]
    both = find_matches(_view(), OpPattern("el", one_of(EXP, LOG)))
    roots = [m.root for m in both]
    assert roots == sorted(roots) and names(roots) == {"e", "l", "ea", "eb", "ey", "ub"}


def test_pattern_match_accessors():
    m = match(OpPattern("scaled", op("Mul", "$x", const(2.0, label="k"), label="m"), outputs=("m",)), "m_read")
    assert (m.name("m"), m.root_name, m.node("m").name) == ("m_read", "m_read", "m_read")
    assert m.tensor("x") == (at("x"), 0) and m.tensor("m") == (at("m_read"), 0)
    assert m.tensor_name("x") == "x" and m.output_labels() == ("m",)
    assert names(m.members) == {"m_read", "two_read", "two_id", "two"}
    ident = match(op("Mul", op("Placeholder"), op("Placeholder")), "xx")
    assert names(ident.members) == {"xx", "x", "x_read"}


# ----------------------------------------------------------------------------- FusionPattern

def _exp_log(target: str = "Mul", ordered: bool = False, inputs=("log", "exp")) -> OpPattern:
    return (FusionPattern("ExpLog").add_op_desc("exp", ["Exp"]).add_op_desc("log", ["Log"])
            .add_op_desc("out", [target]).set_inputs("out", list(inputs), ordered=ordered).set_output("out").build())


def test_fusion_pattern_matches_inputs_at_any_position_and_extra_inputs():
    m = match(_exp_log(), "mul")
    assert (m.name("exp"), m.name("log"), m.name("out")) == ("e", "l", "mul")
    assert match(_exp_log("Sub"), "sub").name("log") == "l"  # not commutative, still any position
    assert match(_exp_log("AddN"), "addn").members == {at("addn"), at("e"), at("l")}  # sq is extra
    assert match(_exp_log("Sub", ordered=True, inputs=("exp", "log")), "sub").root_name == "sub"
    assert "'e' is Exp, expected Log" in str(fails(_exp_log("Sub", ordered=True), "sub"))


def test_fusion_pattern_dtype_and_attrs():
    built = FusionPattern("L").add_op_desc("r", ["LeakyRelu"], dtype="float32", alpha=0.2).set_output("r").build()
    assert match(built, "lrelu").name("r") == "lrelu"
    built = FusionPattern("L").add_op_desc("r", ["LeakyRelu"], alpha=0.3).set_output("r").build()
    assert "expected 0.3" in str(fails(built, "lrelu"))


def test_fusion_pattern_id_reached_twice_is_one_node():
    twice = FusionPattern("T").add_op_desc("exp", ["Exp"]).add_op_desc("sum", ["AddV2"])
    twice = twice.set_inputs("sum", ["exp", "exp"]).set_output("sum").build()
    assert match(twice, "ee").name("exp") == "e"
    assert "label 'exp' is bound to 'ea', but here it would be 'eb'" in str(fails(twice, "twin"))
    src = (FusionPattern("S").add_op_desc("src", ["Placeholder"]).add_op_desc("a", ["Exp"]).add_op_desc("b", ["Exp"])
           .add_op_desc("sum", ["AddV2"]).set_inputs("a", ["src"]).set_inputs("b", ["src"])
           .set_inputs("sum", ["a", "b"]).set_output("sum").build())
    assert match(src, "twin").name("src") == "x"
    assert "label 'src' is bound to 'x', but here it would be 'y'" in str(fails(src, "e_ey"))


def _fp(*descs: str) -> FusionPattern:
    p = FusionPattern("F")
    for d in descs:
        p.add_op_desc(d, ["Mul"])
    return p


@pytest.mark.parametrize("make, message", [
    (lambda: FusionPattern(""), "a FusionPattern needs a name"),
    (lambda: _fp().add_op_desc("", ["Mul"]), "op desc id must be a non-empty string"),
    (lambda: _fp("a").add_op_desc("a", ["Exp"]), "op desc 'a' is defined twice"),
    (lambda: _fp("a").set_inputs("z", ["a"]), "set_inputs names op desc 'z', which is not defined (defined: a)"),
    (lambda: _fp("a").set_inputs("a", ["b"]), "set_inputs('a') names op desc 'b', which is not defined"),
    (lambda: _fp("a").set_output("z"), "set_output names op desc 'z', which is not defined"),
    (lambda: _fp("a", "b").set_inputs("a", ["b"]).set_inputs("a", ["b"]), "set_inputs is called twice for 'a'"),
    (lambda: _fp("a").build(), "no output is set"),
    (lambda: _fp("a", "b").set_output("a").set_output("b").build(), "several outputs are set (a, b)"),
    (lambda: FusionPattern("F").add_op_desc("a").set_output("a").build(), "the output 'a' needs op types"),
    (lambda: _fp("a", "b").set_inputs("a", ["b"]).set_inputs("b", ["a"]).set_output("a").build(),
     "the inputs form a cycle: a -> b -> a"),
    (lambda: _fp("a").set_inputs("a", ["a"]).set_output("a").build(), "the inputs form a cycle: a -> a"),
    (lambda: _fp("a", "b", "c").set_inputs("a", ["b"]).set_output("a").build(),
     "op desc(s) c are not connected to the output 'a'"),
])
def test_fusion_pattern_errors_when_defined(make, message):
    with pytest.raises(FusionPatternError) as info:
        make()
    assert message in str(info.value) and "FusionPattern" in str(info.value)
    assert isinstance(info.value, PatternDefinitionError)


def test_the_required_op_types_are_the_same_in_every_run():
    """Where each alternative could name one of several equally small groups, the first by name
    is taken, whatever order the set of groups comes in (string hashes change from run to run)."""
    script = (
        "from scopefusion import OpPattern, one_of, op\n"
        "root = one_of(op('Out', op('C'), op('A'), op('B')), op('Out', op('F'), op('E'), op('D')))\n"
        "print(sorted(sorted(g) for g in OpPattern('p', root).required_types()))\n")
    answers = set()
    for seed in ("0", "1", "2", "3", "4", "5"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        answers.add(run.stdout.strip())
    assert answers == {"[['A', 'D'], ['Out']]"}
