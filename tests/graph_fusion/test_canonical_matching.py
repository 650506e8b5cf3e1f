"""Canonical matching in the op-pattern language: a pattern written in one spelling matches the
others, on one small real TensorFlow graph.

* constants through any chain that computes one (Identity, Squeeze, Reshape, ExpandDims, Cast,
  Fill, Pack, arithmetic), folded once in numpy;
* associative and commutative chains (Mul, Add/AddV2, Maximum, Minimum) in any grouping and
  order, and a chain member read from outside;
* each declared equivalence, and near misses that still say where the graph departs.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from scopefusion import ANY, GraphView, MatchFailure, OpPattern, PatternMatcher, const, op
from scopefusion.core.graph.canonical import direct_view
from scopefusion.core.graph.chains import CHAIN_SPLITS, MAX_CHAIN_LEAVES, chain_cuts, searched_cuts
from scopefusion.core.graph.matching import find_matches


def _model(x, y):
    import tensorflow as tf

    c = tf.constant(0.044715, name="c")
    half = tf.constant(0.5, name="half")
    out = {
        # products of the same four factors in several groupings and orders
        "c_first": tf.multiply(tf.multiply(tf.multiply(c, x), x), x, name="c_first"),
        "nested": tf.multiply(tf.multiply(x, tf.multiply(x, x)), c, name="nested"),
        "c_middle": tf.multiply(tf.multiply(tf.multiply(x, c), x), x, name="c_middle"),
        "pow3": tf.multiply(c, tf.pow(x, 3.0), name="pow3"),
        "square_x": tf.multiply(c, tf.multiply(x, tf.square(x)), name="square_x"),
        "c_x_x": tf.multiply(tf.multiply(c, x), x, name="c_x_x"),  # one x fewer
        "c_x_y_x": tf.multiply(tf.multiply(tf.multiply(c, x), y), x, name="c_x_y_x"),  # y is no x
        # sums, maxima and minima
        "sum_left": tf.raw_ops.AddV2(x=tf.raw_ops.AddV2(x=x, y=y), y=half, name="sum_left"),
        "sum_right": tf.raw_ops.Add(x=half, y=tf.raw_ops.AddV2(x=y, y=x), name="sum_right"),
        "max3": tf.maximum(tf.maximum(x, half), y, name="max3"),
        "min3": tf.minimum(y, tf.minimum(half, x), name="min3"),
        "max_min": tf.maximum(tf.minimum(x, half), y, name="max_min"),  # a Minimum is no Maximum operand
        # a chain member read from outside the chain
        "shared_square": tf.multiply(tf.multiply(tf.multiply(x, x, name="xx_shared"), x), c, name="shared_square"),
        "reads_square": tf.add(tf.identity(tf.constant(1.0)), tf.multiply(x, x, name="xx_shared_2"),
                               name="reads_square"),
        # constants through chains
        "squeezed": tf.multiply(x, tf.squeeze(tf.identity(tf.constant([[2.0]]), name="read2"), name="sq2"),
                                name="squeezed"),
        "reshaped": tf.multiply(x, tf.reshape(tf.constant([2.0, 2.0, 2.0]), [1, 3], name="rs2"), name="reshaped"),
        "expanded": tf.multiply(x, tf.expand_dims(tf.constant(2.0), 0, name="ed2"), name="expanded"),
        "cast": tf.multiply(x, tf.cast(tf.constant(2, tf.int32), tf.float32, name="cast2"), name="cast"),
        "filled": tf.multiply(x, tf.fill([3], 2.0, name="fill2"), name="filled"),
        "packed": tf.multiply(x, tf.stack([tf.constant(2.0), tf.constant(2.0), tf.constant(2.0)], name="pack2"),
                              name="packed"),
        "arith": tf.multiply(x, tf.sqrt(tf.constant(8.0)) / tf.sqrt(tf.constant(2.0)), name="arith"),
        "not_const": tf.multiply(x, tf.squeeze(tf.reduce_mean(y, keepdims=True), name="sq_y"), name="not_const"),
        # declared equivalences
        "bias_add": tf.nn.bias_add(x, tf.constant([1.0, 2.0, 3.0]), name="bias_add"),
        "vector_add": tf.raw_ops.AddV2(x=x, y=tf.constant([1.0, 2.0, 3.0]), name="vector_add"),
        "sub": tf.subtract(x, y, name="sub"),
        "add_neg": tf.raw_ops.AddV2(x=x, y=tf.negative(y, name="neg_y"), name="add_neg"),
        "div_sqrt": tf.divide(x, tf.sqrt(y, name="sqrt_y"), name="div_sqrt"),
        "mul_rsqrt": tf.multiply(x, tf.math.rsqrt(y, name="rsqrt_y"), name="mul_rsqrt"),
        "pow2": tf.pow(x, 2.0, name="pow2"),
        "square": tf.square(x, name="x_squared"),
        "x_times_x": tf.multiply(x, x, name="x_times_x"),
        "pow_half": tf.pow(y, 0.5, name="pow_half"),
        "pow_minus_half": tf.pow(y, -0.5, name="pow_minus_half"),
        "one_over": tf.divide(1.0, y, name="one_over"),
        "recip_sqrt": tf.math.reciprocal(tf.sqrt(y), name="recip_sqrt"),
        "sqrt_tiny": tf.sqrt(tf.maximum(y, 1e-12), name="sqrt_tiny"),
        "sqrt_clipped": tf.sqrt(tf.maximum(tf.add(y, 1e-5), 0.0), name="sqrt_clipped"),
        "sqrt_large": tf.sqrt(tf.maximum(y, 0.5), name="sqrt_large"),
        "sum_over_n": tf.divide(tf.reduce_sum(x, 1, keepdims=True), 3.0, name="sum_over_n"),
        "sum_over_2": tf.divide(tf.reduce_sum(x, 1, keepdims=True), 2.0, name="sum_over_2"),
        "squared_difference": tf.math.squared_difference(x, y, name="squared_difference"),
        # a product divided by a constant (params-flow's gelu_exact: x * erfc(-x / sqrt(2)) / 2)
        "over_two": tf.divide(tf.multiply(x, y), tf.constant(2.0, name="two"), name="over_two"),
        "over_three": tf.divide(tf.multiply(x, y), 3.0, name="over_three"),
        "square_of_sub": tf.square(tf.subtract(x, y), name="square_of_sub"),
    }
    return [out[k] for k in sorted(out)]


@functools.cache
def _view() -> GraphView:
    import tensorflow as tf

    from scopefusion.testing import graph_from_function

    spec = [tf.TensorSpec([2, 3], tf.float32, "x"), tf.TensorSpec([2, 3], tf.float32, "y")]
    return GraphView(graph_from_function(_model, *spec))


def at(name: str) -> int:
    return _view().index.index[name]


def match(expr, name: str):
    return PatternMatcher(_view()).match_pattern(OpPattern("p", expr), at(name))


def fails(expr, name: str) -> MatchFailure:
    with pytest.raises(MatchFailure) as info:
        match(expr, name)
    return info.value


C = const(0.044715, label="c")
CUBE = op("Mul", C, "$x", "$x", "$x")


# ------------------------------------------------------------------ associative chains

@pytest.mark.parametrize("name", ["c_first", "nested", "c_middle", "pow3", "square_x"])
def test_one_product_matches_every_grouping_order_and_power(name):
    m = match(CUBE, name)
    assert m.tensor_name("x") == "x"
    assert float(m.consts["c"]) == pytest.approx(0.044715)
    assert at(name) in m.members


def test_the_pattern_may_nest_its_own_product_in_any_grouping_too():
    nested = op("Mul", op("Mul", "$x", op("Mul", "$x", "$x")), C)
    for name in ("c_first", "nested", "pow3"):
        assert match(nested, name).tensor_name("x") == "x"


def test_a_product_of_other_factors_is_no_match_and_the_miss_says_where():
    why = fails(CUBE, "c_x_x")
    assert "'c_x_x' has 2 inputs, expected 4" in str(why) and "this chain has 3" in str(why)
    why = fails(CUBE, "c_x_y_x")  # four factors, one of them y
    assert "is not $x" in str(why) and "'y'" in str(why)


def test_sums_maxima_and_minima_are_chains_of_their_own_family():
    total = op(("Add", "AddV2"), "$a", "$b", const(0.5))
    for name in ("sum_left", "sum_right"):
        m = match(total, name)
        assert {m.tensor_name("a"), m.tensor_name("b")} == {"x", "y"}
    assert {match(op("Maximum", "$a", "$b", const(0.5)), "max3").tensor_name(k) for k in "ab"} == {"x", "y"}
    assert {match(op("Minimum", "$a", "$b", const(0.5)), "min3").tensor_name(k) for k in "ab"} == {"x", "y"}
    assert "has 2 inputs, expected 3" in str(fails(op("Maximum", "$a", "$b", const(0.5)), "max_min"))


def test_a_chain_member_read_from_outside_is_a_member_the_readers_of_which_stay_known():
    m = match(CUBE, "shared_square")
    inner = at("xx_shared")
    assert inner in m.members  # matched as part of the chain ...
    readers = [m.view.index.names[c] for c, port, _ in m.view.index.consumers[inner] if c not in m.members]
    assert readers == []  # ... this one is read inside only
    # a square read by another consumer: the fusion engine refuses to remove it (see
    # test_canonical_forms.test_gelu_whose_square_is_read_elsewhere_is_not_fused)
    assert at("xx_shared_2") in match(op("AddV2", ANY, op("Mul", "$x", "$x")), "reads_square").members


def test_chain_cutting_is_bounded():
    assert MAX_CHAIN_LEAVES <= 8
    eight = op("Mul", *(["$x"] * MAX_CHAIN_LEAVES))
    assert "has 2 inputs" in str(fails(eight, "c_first"))


def _cuts_told_both_ways(inside: frozenset[int] | None) -> int:
    """Every chain of the test graph (each Mul, Add, AddV2, Maximum, Minimum and each node a chain
    splits through, as a root), cut into 1 to MAX_CHAIN_LEAVES + 1 operands: the cuts
    :func:`chain_cuts` gives (a chain cut as far as it goes told without a search) are those the
    general search gives, in the same order; returns how many cuts there were."""
    view = _view()
    matcher = PatternMatcher(view, inside=inside)
    total = 0
    for node, op_type in enumerate(view.index.ops):
        for family, splits in CHAIN_SPLITS.items():
            if op_type not in splits:
                continue
            root = direct_view(matcher, node)
            for count in range(1, MAX_CHAIN_LEAVES + 2):
                told = list(chain_cuts(matcher, root, family, count))
                assert told == list(chain_cuts(matcher, root, family, count))  # asked again (kept)
                assert told == list(searched_cuts(matcher, root, family, count)), (view.index.names[node], count)
                total += len(told)
    return total


def test_a_chain_cut_as_far_as_it_goes_is_told_without_a_search_and_the_same():
    assert _cuts_told_both_ways(None) > 20
    everything = frozenset(range(len(_view().index)))
    assert _cuts_told_both_ways(everything) > 20  # not kept: the matcher may not use every node


# ------------------------------------------------------------------ constants through chains

@pytest.mark.parametrize("name", ["squeezed", "reshaped", "expanded", "cast", "filled", "packed", "arith"])
def test_a_constant_computed_from_constants_is_a_constant(name):
    m = match(op("Mul", "$x", const(where=lambda v: bool(np.allclose(v, 2.0)), label="two")), name)
    assert np.allclose(m.consts["two"], 2.0)
    assert len(m.members) >= 3  # the chain that computes it belongs to the match


def test_folded_constants_are_computed_once_per_node():
    view = _view()
    first = view.folded_constant(at("sq2"))
    assert first is not None and view.folded_constant(at("sq2")) is first
    assert [view.index.names[i] for i in first[1]][:2] == ["sq2", "read2"]


def test_a_tensor_computed_from_the_input_is_no_constant():
    why = fails(op("Mul", "$x", const(2.0)), "not_const")
    assert "'sq_y' is not a constant" in str(why)


# ------------------------------------------------------------------ declared equivalences

def test_bias_add_is_an_add_of_a_vector_on_the_last_axis():
    assert match(op("AddV2", "$x", const(label="b")), "bias_add").tensor_name("x") == "x"
    assert match(op("BiasAdd", "$x", "$b"), "vector_add").tensor_name("x") == "x"
    assert "'sub' is Sub, expected BiasAdd" in str(fails(op("BiasAdd", "$x", "$b"), "sub"))


def test_sub_is_an_add_of_the_negation():
    m = match(op("AddV2", "$a", op("Neg", "$b")), "sub")
    assert (m.tensor_name("a"), m.tensor_name("b")) == ("x", "y")
    m = match(op("Sub", "$a", "$b"), "add_neg")
    assert (m.tensor_name("a"), m.tensor_name("b")) == ("x", "y")
    assert at("neg_y") in m.members


def test_division_by_a_square_root_is_a_product_with_the_reciprocal_root():
    m = match(op("Mul", "$a", op("Rsqrt", "$b", label="r")), "div_sqrt")
    assert (m.tensor_name("a"), m.tensor_name("b")) == ("x", "y") and m.name("r") == "sqrt_y"
    m = match(op("RealDiv", "$a", op("Sqrt", "$b")), "mul_rsqrt")
    assert (m.tensor_name("a"), m.tensor_name("b")) == ("x", "y")


@pytest.mark.parametrize("name", ["pow2", "x_squared", "x_times_x"])
def test_pow_2_square_and_a_product_with_itself_are_one(name):
    assert match(op("Square", "$x"), name).tensor_name("x") == "x"
    assert match(op("Mul", "$x", "$x"), name).tensor_name("x") == "x"


def test_powers_are_roots_and_reciprocals():
    assert match(op("Sqrt", "$v"), "pow_half").tensor_name("v") == "y"
    assert match(op("Rsqrt", "$v"), "pow_minus_half").tensor_name("v") == "y"
    assert match(op("Rsqrt", "$v"), "recip_sqrt").tensor_name("v") == "y"
    assert match(op("Reciprocal", "$v"), "one_over").tensor_name("v") == "y"
    assert match(op("Reciprocal", op("Sqrt", "$v")), "rsqrt_y").tensor_name("v") == "y"


def test_a_square_root_of_a_tiny_floor_is_an_epsilon_form():
    root = op("Sqrt", op(("Add", "AddV2"), "$v", const(label="eps")))
    m = match(root, "sqrt_tiny")
    assert m.tensor_name("v") == "y" and float(m.consts["eps"]) == pytest.approx(1e-12)
    m = match(root, "sqrt_clipped")  # max(v + eps, 0): the clip of a square root's domain
    assert float(m.consts["eps"]) == pytest.approx(1e-5)
    why = fails(root, "sqrt_large")  # max(v, 0.5) is no epsilon
    assert "'sqrt_large/Maximum' is Maximum, expected Add/AddV2" in str(why) or "Maximum" in str(why)


def test_a_sum_divided_by_the_count_is_a_mean():
    mean = op("Mean", "$x", const(label="axes"), keep_dims=True)
    m = match(mean, "sum_over_n")
    assert m.tensor_name("x") == "x" and int(m.consts["axes"]) == 1
    assert "is RealDiv, expected Mean" in str(fails(mean, "sum_over_2"))


def test_squared_difference_is_the_square_of_a_difference():
    m = match(op("Square", op("Sub", "$a", "$b")), "squared_difference")
    assert (m.tensor_name("a"), m.tensor_name("b")) == ("x", "y")
    m = match(op("SquaredDifference", "$a", "$b"), "square_of_sub")
    assert (m.tensor_name("a"), m.tensor_name("b")) == ("x", "y")


def _found(expr, name: str):
    """The match of ``expr`` rooted at ``name`` as a pass finds it (roots spelt otherwise too), or
    the failure there."""
    failures = {}
    matches = find_matches(_view(), OpPattern("p", expr), lambda root, why: failures.setdefault(root, why))
    found = [m for m in matches if m.root == at(name)]
    return found[0] if found else failures[at(name)]


def test_a_division_by_a_constant_is_a_product_with_its_reciprocal_constant():
    """In a product, ``a / 2`` is ``a * Reciprocal(2)``: that reciprocal, which no node computes,
    is the constant 0.5 (a pattern's ``const(0.5)`` matches it) and the 2 belongs to the match."""
    half_product = op("Mul", const(0.5, label="half"), "$a", "$b")
    m = _found(half_product, "over_two")
    assert (m.tensor_name("a"), m.tensor_name("b")) == ("x", "y") and float(m.consts["half"]) == 0.5
    assert {at("two"), at("over_two")} <= m.members
    assert isinstance(_found(half_product, "over_three"), MatchFailure)  # 1/3 is no 0.5
    assert float(_found(op("Mul", const(label="c"), "$a", "$b"), "over_three").consts["c"]) == pytest.approx(1 / 3)


def test_a_virtual_operation_is_no_tensor_a_variable_can_bind():
    # x - y seen as x + (-y): the -y has no tensor of its own
    assert str(fails(op("AddV2", "$a", "$b"), "sub")) == "'sub' is Sub, expected Add/AddV2"
