"""SwishFusionPass on the SiLU / swish / quick GELU forms real libraries produce (built by
``activation_models2``, frozen, random weights).

Fused into one ``Swish(x)`` each, with ``beta`` the constant inside the sigmoid, and
verified numerically against the original:

* ``tf.nn.silu`` and ``tf.nn.swish(beta=1.5)`` (their custom gradient's ``IdentityN`` goes
  too), traced and in a TF1 graph (tf_slim ``fully_connected(activation_fn=tf.nn.silu)``);
* Keras 3 and tf_keras ``Dense(activation="silu" / "swish")``, Keras 3 under ``mixed_float16``
  and ``bfloat16`` (``beta`` a Cast of the constant);
* keras-hub ``LlamaBackbone``, transformers ``TFMistralModel`` and ``TFCLIPTextModel``
  (quick GELU: ``beta`` 1.702) and the activations ``silu``, ``swish``, ``quick_gelu``;
* TF Model Garden's ``simple_swish`` (``x * sigmoid(x)``).

Not fused: a per-channel beta, Keras 3's hard SiLU, transformers' GLU and mish, a swish
whose sigmoid is read elsewhere (refused with the reason).  GeluFusionPass and this
pass never match the same forms: neither matches anything of the other's.

The epilogue stage, which would take a Swish into the MatMulBiasAdd before it, is
switched off here so that the Swish nodes can be counted (see ``test_epilogue.py``).
"""
from __future__ import annotations

import functools

import pytest

from tests.models import activation_models as am
from tests.models import activation_models2 as am2
from tests.helpers.pass_checks import REGISTRY, assert_builds, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion
from scopefusion import FusionSwitch

PASS = "SwishFusionPass"
UB_OFF = FusionSwitch.from_text('{"Switch": {"UBFusion": {"ALL": "off"}}}')
MODELS = {**am2.SWISH_FORMS, **am2.SWISH_LOOK_ALIKES, "sigmoid_read_elsewhere": am2.sigmoid_read_elsewhere}


@functools.cache
def model(key: str) -> am2.PassModel:
    return MODELS[key]()


@functools.cache
def gelu_model(key: str) -> am.ActivationModel:
    return am.GELU_FORMS[key]()


def nodes(graph_def, op: str) -> list:
    return [n for n in graph_def.node if n.op == op]


def fuse(m):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=UB_OFF)


@pytest.mark.parametrize("key", list(MODELS))
def test_builder_makes_its_form(key):
    """The builder's graph holds the ops of its form and runs in plain TensorFlow."""
    assert_builds(model(key), "Swish")


@pytest.mark.parametrize("key", list(am2.SWISH_FORMS))
def test_swish_form_is_fused(key):
    m = model(key)
    result = fuse(m)
    fused = result.fused_graph_def
    swishes = nodes(fused, "Swish")
    report = pass_report(result, PASS)
    assert len(swishes) == m.expected, [r.reason for r in report.refused]
    assert len(report.fused) == m.expected
    for node in swishes:
        assert node.attr["beta"].f == pytest.approx(m.attrs["beta"], rel=1e-6), node.name
        assert node.attr["T"].type == m.attrs.get("T", 1), node.name
        assert len([i for i in node.input if not i.startswith("^")]) == 1, node.name
    # each Swish took its Sigmoid and tf.nn.silu's IdentityN along (the models have no others)
    assert len(nodes(fused, "Sigmoid")) == len(nodes(m.graph_def, "Sigmoid")) - m.expected == 0
    assert nodes(fused, "IdentityN") == []
    # tf.nn.silu's product is matched inside its IdentityN too; that inner match is all that is dropped
    assert report.refused == []
    assert all(r.reason.startswith("subsumed by") and PASS in r.reason and r.winner.endswith(f"({PASS})")
               for r in report.dropped), report.dropped
    assert report.matches == len(report.fused) + len(report.dropped)
    assert_verifies(m, result)


def test_quick_gelu_keeps_its_beta_and_silu_loses_its_identity_n():
    """quick GELU is the plain product with 1.702; tf.nn.silu's fused node takes the IdentityN's name."""
    quick = fuse(model("transformers_quick_gelu")).fused_graph_def
    (node,) = nodes(quick, "Swish")
    assert node.attr["beta"].f == pytest.approx(1.702, rel=1e-6) and node.name == "mul_2"
    silu = fuse(model("tf_nn_swish_beta")).fused_graph_def
    (node,) = nodes(silu, "Swish")
    assert node.attr["beta"].f == 1.5 and node.name == "IdentityN" and node.input[0] == "mul"


@pytest.mark.parametrize("key", list(am2.SWISH_FORMS))
def test_gelu_pass_matches_no_swish(key):
    result = fuse(model(key))
    assert pass_report(result, "GeluFusionPass").match_times == 0
    assert nodes(result.fused_graph_def, "Gelu") == []


@pytest.mark.parametrize("key", list(am.GELU_FORMS))
def test_swish_pass_matches_no_gelu(key):
    m = gelu_model(key)
    result = fuse(m)
    assert pass_report(result, PASS).match_times == 0
    assert nodes(result.fused_graph_def, "Swish") == []
    assert len(nodes(result.fused_graph_def, "Gelu")) == m.gelus


@pytest.mark.parametrize("key", list(am2.SWISH_LOOK_ALIKES))
def test_look_alike_is_not_fused(key):
    m = model(key)
    result = fuse(m)
    assert nodes(result.fused_graph_def, "Swish") == []
    assert pass_report(result, PASS).fused == []
    assert_verifies(m, result)


def test_swish_whose_sigmoid_is_read_elsewhere_is_refused():
    m = model("sigmoid_read_elsewhere")
    result = fuse(m)
    assert nodes(result.fused_graph_def, "Swish") == []
    (refusal,) = pass_report(result, PASS).refused
    assert "'Sigmoid' is also read by" in refusal.reason and "fusing would lose it" in refusal.reason
    assert_verifies(m, result)
