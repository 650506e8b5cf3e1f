"""LayerNormFusionPass on layer norms written without a scope of their own (built by
``norm_models``, frozen, random weights): hand-written TensorFlow (``reduce_mean`` +
``square`` + ``rsqrt``, ``reduce_variance`` + ``sqrt`` + ``RealDiv``, ``tf.nn.moments`` +
the formula or ``tf.nn.batch_normalization``), transformers' ``functional_layernorm``,
``keras.ops.layer_normalization`` and ``TFDebertaLayerNorm``'s own lines at the top level.

Each is fused into exactly as many ``LayerNorm`` nodes as the model has layer norms, with
``begin_norm_axis``, ``begin_params_axis`` and ``epsilon`` as its code sets them, and
verified against the original.  Look-alikes are never fused: missing gamma or beta,
epsilon on the standard deviation, RMS-style scaling, non-trailing axes (transformers'
channels-first layer norm, tf_slim's instance norm, Keras' group norm), a statistic read
outside, batch norms and RMS norms; what the scope pass fused is left to it.
"""
from __future__ import annotations

import pytest

from tests.models.norm_models import HIDDEN
from tests.helpers.norm_testing import (
    LAYER_NORM_DECOYS, LAYER_NORM_FORMS, REGISTRY, assert_attrs, assert_builds, assert_fused_as_built,
    assert_look_alike, assert_verifies, fused, model, nodes, op_count, pass_report,
)

PASS = "LayerNormFusionPass"
FORMS = [f"ln:{k}" for k in LAYER_NORM_FORMS]
DECOYS = [f"ln:{k}" for k in LAYER_NORM_DECOYS]
#: What the pass says about look-alikes built for other passes (``NormModel.refusal`` says it for the rest).
OTHER_REFUSALS = {"ln:instance_norm_nhwc": "not the trailing axes", "ln:keras_group_normalization": "trailing axes"}


@pytest.mark.parametrize("key", FORMS + DECOYS)
def test_builder_makes_its_form(key):
    assert_builds(model(key), "LayerNorm")


@pytest.mark.parametrize("key", FORMS)
def test_layer_norm_without_a_scope_is_fused(key):
    m, result, layer_norms = assert_fused_as_built(key, PASS, "LayerNorm", model(key).graph_layer_norms)
    assert m.layer_norms == m.graph_layer_norms
    graph_fused = {f.name for f in pass_report(result, PASS).fused}
    for node in layer_norms:
        assert node.name in graph_fused
        assert_attrs(node, {**m.attrs, "T": 1})
        assert [i for i in node.input if not i.startswith("^")][0] != ""
    # the statistics and normalisers went with them; the model has no others
    assert op_count(result.fused_graph_def, "Mean", "Rsqrt", "Sqrt", "SquaredDifference") == 0
    assert assert_verifies(m, result) <= 1e-4


def test_inputs_are_x_gamma_and_beta():
    """The fused op reads the block's input, and gamma and beta as the code gives them (Keras'
    leading-1 reshapes of gamma and beta are seen through, and removed)."""
    result = fused("ln:keras_ops_layer_normalization")
    graph = {n.name: n for n in result.fused_graph_def.node}
    for node in nodes(result.fused_graph_def, "LayerNorm"):
        x, gamma, beta = node.input[:3]
        assert graph[x.split(":")[0]].op == "AddV2"  # h + relu(h @ w)
        for param in (gamma, beta):
            value = graph[param].attr["value"].tensor
            assert graph[param].op == "Const" and [d.size for d in value.tensor_shape.dim] == [HIDDEN]
    assert op_count(result.fused_graph_def, "Reshape") == 0


def test_statistics_read_outside_become_the_mean_and_variance_outputs():
    m = model("ln:statistics_read_outside")
    result = fused("ln:statistics_read_outside")
    (node,) = nodes(result.fused_graph_def, "LayerNorm")
    reads = {i for n in result.fused_graph_def.node for i in n.input if i.split(":")[0] == node.name}
    assert reads == {node.name, f"{node.name}:1", f"{node.name}:2"}
    assert assert_verifies(m, result) <= 1e-4


def test_what_the_scope_pass_fused_is_not_matched_again():
    """transformers TFBertModel: 5 layer norms, each a tf_keras layer in its own scope."""
    result = fused("ln:scope_pass_first_transformers_bert")
    assert len(pass_report(result, "ScopeLayerNormPass").fused) == 5
    report = pass_report(result, PASS)
    assert (report.match_times, report.fused, report.refused) == (0, [], [])


@pytest.mark.parametrize("key", DECOYS)
def test_look_alike_is_not_fused(key):
    expected = model(key).refusal if key.split(":")[1].startswith("refusal_") else OTHER_REFUSALS.get(key)
    m, result = assert_look_alike(key, PASS, expected)
    assert len(nodes(result.fused_graph_def, "LayerNorm")) == m.layer_norms  # the scope pass's, if any


def test_registered_as_a_built_in_graph_pass():
    assert PASS in REGISTRY.graph_pass_names()
    assert REGISTRY.get(PASS).origin == "built-in"
