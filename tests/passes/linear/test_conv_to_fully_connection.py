"""ConvToFullyConnectionFusionPass on the convolutions real code writes as fully connected layers (built
by ``conv_fc_models``, frozen, random weights): tf_slim's VGG head (``fc6`` a 4x4 VALID convolution over
the 4x4 map, ``fc7``/``fc8`` 1x1 over the 1x1 result), Keras 3 and tf_keras MobileNet's ``conv_preds``,
Keras classifier heads ending in a convolution as large as their map (with and without bias).  Each
becomes ``FullyConnection(x, w[, b])`` with ``num_output`` its output channels, and the fused graph
matches the original numerically.

Refused with the reason: MobileNet's pointwise convolutions (a 1x1 filter sliding over a larger map), a
grouped convolution covering the map, a 3x3 VALID convolution of a 6x6 map.
"""
from __future__ import annotations

import functools

import pytest

from tests.models import conv_fc_models as cf
from tests.helpers.pass_checks import REGISTRY, assert_builds, op_count, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion
from scopefusion.testing import assert_verified

PASS = "ConvToFullyConnectionFusionPass"
MODELS = {**cf.FC_FORMS, **cf.FC_REFUSALS}


@functools.cache
def model(key: str):
    return MODELS[key]()


def fuse(m):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY)


@pytest.mark.parametrize("key", [k for k in MODELS if k != "grouped_covering"])
def test_builder_makes_its_form(key):
    """The builder's graph holds its convolutions and runs in plain TensorFlow (a grouped
    convolution has no CPU kernel: that graph is only looked at)."""
    assert_builds(model(key), "FullyConnection")


@pytest.mark.parametrize("key", list(cf.FC_FORMS))
def test_covering_convolution_becomes_fully_connection(key):
    m = model(key)
    result = fuse(m)
    report = pass_report(result, PASS)
    assert len(report.fused) == m.expected, [r.reason for r in report.refused]
    assert len(report.refused) == m.attrs["refused"], [r.reason for r in report.refused]
    for refusal in report.refused:
        assert m.attrs["reason"] in refusal.reason, refusal.reason
    fused = [n for n in result.fused_graph_def.node if n.op == "FullyConnection"]
    assert len(fused) == m.expected
    original = {n.name: n for n in m.graph_def.node}
    for node in fused:
        filter_shape = [d.size for d in original[node.input[1]].attr["value"].tensor.tensor_shape.dim]
        assert node.attr["num_output"].i == filter_shape[3] and node.attr["axis"].i == 1
    assert sum(len(n.attr["optional_inputs"].list.s) for n in fused) == m.attrs["biased"]
    assert_verifies(m, result)


@pytest.mark.parametrize("key", list(cf.FC_REFUSALS))
def test_look_alikes_stay_convolutions(key):
    m = model(key)
    result = fuse(m)
    report = pass_report(result, PASS)
    assert report.fused == []
    (refusal,) = report.refused
    assert m.attrs["reason"] in refusal.reason, refusal.reason
    assert op_count(result.fused_graph_def, "FullyConnection") == 0
    if key != "grouped_covering":  # no CPU kernel runs a grouped Conv2D, in either graph
        assert_verifies(m, result)


def test_convolutions_a_batch_norm_follows_are_left_to_the_folding(keras_mobilenet_v2):
    """Keras' MobileNetV2 at 32x32: its last eight 1x1 convolutions cover their 1x1 maps, but a batch norm
    follows each, which ConvBatchnormFusionPass folds in the same stage: refused, so no result of the
    two passes overlaps the other; the other 27 slide.  Nothing is dropped, and the graph verifies."""
    result = scopefusion.fuse(keras_mobilenet_v2.graph_def, registry=REGISTRY, hints=False)
    report = pass_report(result, PASS)
    assert report.fused == [] and report.dropped == []
    reasons = [r.reason for r in report.refused]
    assert sum("ConvBatchnormFusionPass folds into it in this stage" in r for r in reasons) == 8
    assert sum("filter slides over a" in r for r in reasons) == len(reasons) - 8
    assert len(pass_report(result, "ConvBatchnormFusionPass").fused) == 52
    assert_verified(keras_mobilenet_v2.graph_def, result, fused_ops=REGISTRY.fused_ops)


def test_switch_file_turns_it_off():
    m = model("slim_vgg_head")
    switch = scopefusion.FusionSwitch.from_text('{"Switch": {"GraphFusion": {"%s": "off"}}}' % PASS)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=switch)
    assert op_count(result.fused_graph_def, "FullyConnection") == 0
