"""EpilogueFusionPass (the ``UBFusion`` stage) on convolutions that add their bias with nothing
after it, as real libraries build them (``conv_bias_models``, frozen, random weights).

Each becomes one ``Conv2DBiasAdd`` or ``DepthwiseConv2dNativeBiasAdd`` with the
convolution's attributes, verified numerically against the original: Keras 3 and tf_keras
``Conv2D`` / ``DepthwiseConv2D``, tf_slim ``conv2d`` / ``separable_conv2d``, a tf_keras
convolution whose batch norm the batch-norm pass folded into a bias, ``tf.nn.bias_add``, and
``Add`` of a [C] or [1, 1, 1, C] channel vector.  A convolution followed by an activation stays
``Conv2DBiasAddActivation`` (tests/test_epilogue.py): that match contains the convolution's and
the outermost match of the pass wins.  Refused with the reason: a convolution something else reads, an
added feature map, a vector along another axis.
"""
from __future__ import annotations

import functools

import pytest

from tests.models import conv_bias_models as cm
from tests.models import epilogue_models as em
from tests.helpers.pass_checks import REGISTRY, assert_builds, op_count, pass_report, refusals
from tests.helpers.verify import assert_verifies

import scopefusion

PASS = "EpilogueFusionPass"  # its patterns without an activation
MODELS = {**cm.CONV_BIAS_FORMS, **cm.CONV_BIAS_REFUSALS}
FUSED_TYPES = {"Conv2D": "Conv2DBiasAdd", "DepthwiseConv2dNative": "DepthwiseConv2dNativeBiasAdd"}
CONV_ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


@functools.cache
def model(key: str):
    return MODELS[key]()


@pytest.mark.parametrize("key", list(MODELS))
def test_builder_makes_its_form(key):
    assert_builds(model(key), *FUSED_TYPES.values())


@pytest.mark.parametrize("key", list(cm.CONV_BIAS_FORMS))
def test_convolution_and_bias_are_fused(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    fused = result.fused_graph_def
    report = pass_report(result, PASS)
    convs = [n for n in fused.node if n.op == "Conv2DBiasAdd"]
    depthwise = [n for n in fused.node if n.op == "DepthwiseConv2dNativeBiasAdd"]
    assert (len(convs), len(depthwise)) == (m.attrs["conv"], m.attrs["depthwise"]), refusals(result, PASS)
    assert len(report.fused) == m.expected and report.refused == []
    # every convolution of the model's layers went into a fused op, with its attributes
    originals = {op: [n for n in m.graph_def.node if n.op == op] for op in FUSED_TYPES}
    for op, fused_type in FUSED_TYPES.items():
        made = [n for n in fused.node if n.op == fused_type]
        if len(made) == len(originals[op]):  # the separable convolution's depthwise part has no bias
            for original, node in zip(sorted(originals[op], key=lambda n: n.name), sorted(made, key=lambda n: n.name),
                                      strict=True):
                for attr in CONV_ATTRS:
                    assert node.attr[attr] == original.attr[attr], (node.name, attr)
    assert op_count(fused, "Conv2D") == 0 and op_count(fused, "BiasAdd") == 0
    assert_verifies(m, result)


def test_a_channel_vector_with_unit_axes_is_squeezed():
    """``b + conv`` with b of shape [1, 1, 1, C]: the fused op reads Squeeze(b, [0, 1, 2])."""
    result = scopefusion.fuse(model("tf_radd_1x1x1xc").graph_def, registry=REGISTRY)
    fused = {n.name: n for n in result.fused_graph_def.node}
    (node,) = [n for n in fused.values() if n.op == "Conv2DBiasAdd"]
    squeeze = fused[node.input[2]]
    assert squeeze.op == "Squeeze" and list(squeeze.attr["squeeze_dims"].list.i) == [0, 1, 2]
    assert node.name == "block/add"  # the fused op takes over the add's name: its readers are unchanged


@pytest.mark.parametrize("key", list(cm.CONV_BIAS_REFUSALS))
def test_what_is_no_conv_bias_is_refused_with_the_reason(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    report = pass_report(result, PASS)
    assert report.fused == [] and op_count(result.fused_graph_def, *FUSED_TYPES.values()) == 0
    (refusal,) = report.refused
    assert m.attrs["reason"] in refusal.reason
    assert_verifies(m, result)


def test_a_convolution_with_an_activation_stays_the_epilogue_op():
    """Conv2D + BiasAdd + ReLU: the Conv2DBiasAddActivation match contains the conv-bias match, which
    is then no match of its own (nothing dropped, nothing applied twice)."""
    m = em.keras_layers("tf_keras", "relu")
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    fused = result.fused_graph_def
    assert op_count(fused, "Conv2DBiasAddActivation") == 1 and op_count(fused, "Conv2DBiasAdd") == 0
    report = pass_report(result, PASS)
    assert len(report.fused) == 3 and report.refused == [] and report.dropped == []
    assert_verifies(m, result)


def test_the_pre_activation_read_elsewhere_leaves_the_convolution_apart():
    """tf_slim conv2d, ReLU, and the pre-activation added back: the activation match is refused (it
    would lose the pre-activation) and the convolution with its bias, inside it, is no match of its own."""
    m = em.refusal("slim_pre_activation_read")
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    fused = result.fused_graph_def
    (refusal,) = pass_report(result, PASS).refused
    assert "the pre-activation" in refusal.reason
    assert op_count(fused, "Conv2DBiasAdd") == 0 and op_count(fused, "Conv2D") == 1
    assert_verifies(m, result)
