"""A layer norm whose gamma and beta are one tensor (``tf.nn.batch_normalization(x, mean, var,
p, p, eps)``): the fused LayerNorm takes that tensor at both its gamma and beta inputs, and so
does the AddLayerNorm the residual add and it become."""
from __future__ import annotations

from tests.models.layer_norm_models import keras_layer_norm_merged_weights, shared_scale_and_offset
from tests.helpers.pass_checks import REGISTRY, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion
from scopefusion.testing import assert_fused

RESIDUAL_OFF = '{"Switch": {"UBFusion": {"ResidualNormFusionPass": "off"}}}'


def test_one_tensor_for_gamma_and_beta_is_both_inputs():
    m = shared_scale_and_offset()
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    report = pass_report(result, "LayerNormFusionPass")
    assert report.refused == []
    assert len(report.fused) == 2
    nodes = assert_fused(result, "AddLayerNorm", 2, begin_norm_axis=-1, begin_params_axis=-1)
    for k, node in enumerate(sorted(nodes, key=lambda n: n.name)):
        x, residual, gamma, beta = node.input
        assert gamma == beta == f"scale_and_offset_{k}", list(node.input)
    assert assert_verifies(m, result, every_output=True) < 1e-4


def test_the_layer_norm_alone_takes_it_twice():
    m = shared_scale_and_offset()
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY,
                              fusion_switch_file=scopefusion.FusionSwitch.from_text(RESIDUAL_OFF))
    nodes = assert_fused(result, "LayerNorm", 2, begin_norm_axis=-1, begin_params_axis=-1, epsilon=1e-5)
    for k, node in enumerate(sorted(nodes, key=lambda n: n.name)):
        assert list(node.input)[1:] == [f"scale_and_offset_{k}"] * 2, list(node.input)
    assert assert_verifies(m, result, every_output=True) < 1e-4


def test_keras_gamma_and_beta_merged_into_one_tensor():
    m = keras_layer_norm_merged_weights()
    reshapes = [n for n in m.graph_def.node if n.op == "Reshape"]
    assert len(reshapes) == 1  # gamma and beta: one constant, one Reshape, read as both
    shared = reshapes[0].name
    assert len([n for n in m.graph_def.node if shared in n.input]) == 2
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY,
                              fusion_switch_file=scopefusion.FusionSwitch.from_text(RESIDUAL_OFF))
    (node,) = assert_fused(result, "LayerNorm", 1, **m.attrs)
    x, gamma, beta = node.input
    assert x == "x" and gamma == beta  # the one tensor (read from before its Reshape) at both inputs
    assert pass_report(result, "LayerNormFusionPass").refused == []
    assert assert_verifies(m, result, every_output=True) < 1e-4
