"""MatMulBiasAddFusionPass on the matmul + bias forms real code produces (built by
``activation_models``, frozen, random weights and biases).

Fused into one ``MatMulBiasAdd(a, b, bias)`` each, with the ``transpose_a`` /
``transpose_b`` of the MatMul, and verified numerically against the original:

* ``tf.matmul(a, w) + b`` (``AddV2``, either operand order), ``tf.compat.v1.add``,
  TF 1.x's ``Add`` op, ``tf.nn.bias_add``, with transposed operands;
* tf_slim ``fully_connected``; tf_keras and Keras 3 ``Dense`` on rank-2 input and,
  through ``Tensordot`` (Reshape -> MatMul -> Reshape -> BiasAdd), on rank-3 input
  with a known and an unknown batch dimension;
* ``BatchMatMulV2`` (rank-3 ``tf.matmul``) plus a 1-D bias;
* openai GPT-2's ``conv1d``, google-research BERT's feed-forward
  (``tf.compat.v1.layers.dense``) and transformers ``TFBertModel``'s dense layers;
* a bias with unit axes before it: [1, n] (transformers ``TFConv1D``, so every projection
  of ``TFGPT2Model``) and [1, 1, n] after Tensordot and ``BatchMatMulV2``, squeezed to [n].

Not fused: a product also read elsewhere, an [m, 1] tensor (one value per row), a
[1, 1, n] bias on a rank-2 product (the sum gains an axis), a bias of length 1 broadcast
over n columns, and the sum of two matmuls.
"""
from __future__ import annotations

import functools

import pytest

from tests.models import activation_models as am
from tests.helpers.pass_checks import REGISTRY, assert_builds, op_count, pass_report, refusals
from tests.helpers.verify import assert_verifies

import scopefusion

#: the epilogue pass (UB fusion) would take these fused ops into MatMul + bias + activation ops:
#: it is tested on its own (tests/passes/linear/test_epilogue.py), this file tests the graph stage's pass
GRAPH_STAGE_ONLY = scopefusion.FusionSwitch.from_text('{"Switch": {"UBFusion": {"ALL": "off"}}}')
PASS = "MatMulBiasAddFusionPass"
MODELS = {**am.MATMUL_BIAS_FORMS, **am.MATMUL_BIAS_REFUSALS}
MATMULS = ("MatMul", "BatchMatMulV2")


@functools.cache
def model(key: str) -> am.ActivationModel:
    return MODELS[key]()


def fused_nodes(graph_def) -> list:
    return [n for n in graph_def.node if n.op == "MatMulBiasAdd"]


@pytest.mark.parametrize("key", list(MODELS))
def test_builder_makes_its_form(key):
    """The builder's graph holds the ops of its form and runs in plain TensorFlow."""
    assert_builds(model(key), "MatMulBiasAdd")


def test_transposed_operands_are_stored_transposed():
    """The transpose variants multiply the operands as stored: the attributes are the MatMul's."""
    for key, (ta, tb) in {"tf1_transpose_a": (True, False), "tf1_transpose_b": (False, True),
                          "tf1_transpose_ab": (True, True), "tf1_transpose_b_add": (False, True)}.items():
        m = model(key)
        (matmul,) = [n for n in m.graph_def.node if n.op == "MatMul"]
        assert (matmul.attr["transpose_a"].b, matmul.attr["transpose_b"].b) == (ta, tb) == m.transpose


@pytest.mark.parametrize("key", list(am.MATMUL_BIAS_FORMS))
def test_matmul_bias_form_is_fused(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=GRAPH_STAGE_ONLY)
    fused = result.fused_graph_def
    nodes = fused_nodes(fused)
    assert len(nodes) == m.matmul_bias_adds, refusals(result, PASS)
    assert len(pass_report(result, PASS).fused) == m.matmul_bias_adds
    for n in nodes:
        assert {"transpose_a", "transpose_b"} <= set(n.attr), n.name
        assert (n.attr["transpose_a"].b, n.attr["transpose_b"].b) == m.transpose, n.name
        assert len([i for i in n.input if not i.startswith("^")]) == 3, n.name
    # each fused product took its matmul along; other matmuls (attention) stay
    assert op_count(fused, *MATMULS) == op_count(m.graph_def, *MATMULS) - m.matmul_bias_adds
    assert_verifies(m, result)


@pytest.mark.parametrize("key", list(am.MATMUL_BIAS_REFUSALS))
def test_matmul_plus_something_else_is_not_fused(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=GRAPH_STAGE_ONLY)
    assert fused_nodes(result.fused_graph_def) == []
    assert pass_report(result, PASS).fused == []
    assert op_count(result.fused_graph_def, *MATMULS) == op_count(m.graph_def, *MATMULS)
    assert_verifies(m, result)


@pytest.mark.parametrize("key", ["bias_1xn", "bias_1x1xn_tensordot", "bias_1x1xn_batch",
                                 "transformers_gpt2_conv1d_bias_1xn"])
def test_a_bias_with_unit_axes_is_squeezed_to_a_vector(key):
    """The fused op takes a [n] bias: a Squeeze of exactly the unit axes reads the original one."""
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=GRAPH_STAGE_ONLY)
    fused = result.fused_graph_def
    by_name = {n.name: n for n in fused.node}
    for node in fused_nodes(fused):
        squeeze = by_name[node.input[2]]
        assert squeeze.op == "Squeeze", node.name
        assert list(squeeze.attr["squeeze_dims"].list.i) == ([0, 1] if "1x1xn" in key else [0]), node.name
    assert len(fused_nodes(fused)) == m.matmul_bias_adds


@pytest.mark.parametrize("key, reason", [
    ("bias_nx1", "not a bias along the last axis"),
    ("bias_adds_axis", "more axes than the rank-2 product"),
    ("bias_length_1", "the add broadcasts, it is no bias add"),
])
def test_a_tensor_that_is_no_bias_is_refused_with_the_reason(key, reason):
    result = scopefusion.fuse(model(key).graph_def, registry=REGISTRY, fusion_switch_file=GRAPH_STAGE_ONLY)
    (refusal,) = pass_report(result, PASS).refused
    assert reason in refusal.reason
