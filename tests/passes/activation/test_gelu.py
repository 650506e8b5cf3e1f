"""GeluFusionPass on the GELU forms real libraries produce (built by
``activation_models``, frozen, random weights).

Fused into one ``Gelu`` each, with ``approximate`` False for the erf forms and
True for the tanh forms, and verified numerically against the original:

* google-research BERT's ``gelu`` (erf, then tanh version) inside
  ``tf.compat.v1.layers.dense``; openai GPT-2's ``gelu`` after its ``conv1d``;
* ``tf.nn.gelu`` (``0.5 x erfc(-x 0.70710677)`` and the tanh form);
* Keras 3 and tf_keras ``Dense(activation="gelu")`` and ``activations.gelu``;
* keras-hub ``BertBackbone`` (``gelu_approximate``), tf_slim ``fully_connected``;
* transformers (4.x) ``TFBertModel``, ``TFGPT2Model`` and the activations
  ``gelu``, ``gelu_new``, ``gelu_fast``, ``gelu_10`` (a clipped GELU) and the
  TF < 2.4 fallbacks ``_gelu`` / ``_gelu_new`` of ``activations_tf``.

Look-alikes are never fused: quick_gelu, SiLU, mish, GELUs with one constant
changed, a Gaussian gate of one tensor by another, and a GELU whose ``Erf`` is
also read outside it.
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
GELU_PASS_ONLY = scopefusion.FusionSwitch.from_text(
    '{"Switch": {"GraphFusion": {"ALL": "off", "GeluFusionPass": "on"}, "UBFusion": {"ALL": "off"}}}')
PASS = "GeluFusionPass"
MODELS = {**am.GELU_FORMS, **am.GELU_LOOK_ALIKES, "shared_intermediate": am.shared_intermediate}


@functools.cache
def model(key: str) -> am.ActivationModel:
    return MODELS[key]()


def gelu_nodes(graph_def) -> list:
    return [n for n in graph_def.node if n.op == "Gelu"]


@pytest.mark.parametrize("key", list(MODELS))
def test_builder_makes_its_form(key):
    """The builder's graph holds the ops of its form and runs in plain TensorFlow."""
    assert_builds(model(key), "Gelu")


@pytest.mark.parametrize("key", list(am.GELU_FORMS))
def test_gelu_form_is_fused(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=GRAPH_STAGE_ONLY)
    fused = result.fused_graph_def
    nodes = gelu_nodes(fused)
    assert len(nodes) == m.gelus, refusals(result, PASS)
    assert len(pass_report(result, PASS).fused) == m.gelus
    assert all("approximate" in n.attr for n in nodes)
    assert [n.attr["approximate"].b for n in nodes] == [m.approximate] * m.gelus
    assert all(len([i for i in n.input if not i.startswith("^")]) == 1 for n in nodes)
    if m.gelu_input is not None:
        assert [n.input[0].removesuffix(":0") for n in nodes] == [m.gelu_input] * m.gelus
    # the Erf / Erfc or Tanh each GELU is made of went with it; a Tanh outside the
    # GELUs (keras-hub's pooler) stays
    exact = 0 if m.approximate else m.gelus
    assert op_count(m.graph_def, "Erf", "Erfc") == exact  # the models have no Erf but their GELUs'
    assert op_count(fused, "Erf", "Erfc") == 0
    assert op_count(fused, "Tanh") == op_count(m.graph_def, "Tanh") - (m.gelus - exact)
    assert_verifies(m, result)


@pytest.mark.parametrize("key", list(am.GELU_LOOK_ALIKES))
def test_look_alike_is_not_fused(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=GELU_PASS_ONLY)
    assert gelu_nodes(result.fused_graph_def) == []
    assert pass_report(result, PASS).fused == []
    # the GELU pass alone changed nothing (another pass may well fuse a look-alike: SiLU is a Swish)
    assert result.report.nodes_after == result.report.nodes_before
    assert_verifies(m, result)


def test_gelu_whose_erf_is_read_elsewhere_is_not_fused():
    """Fusing would lose the Erf tensor that a second output reads: the pass refuses
    it (with a reason in ``refused``) or does not match it at all."""
    m = model("shared_intermediate")
    assert m.outputs == ["gelu_out:0", "erf_out:0"]
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=GRAPH_STAGE_ONLY)
    assert gelu_nodes(result.fused_graph_def) == []
    report = pass_report(result, PASS)
    assert report.fused == []
    assert all(r.reason for r in report.refused)
    assert op_count(result.fused_graph_def, "Erf") == 1
    assert_verifies(m, result)
