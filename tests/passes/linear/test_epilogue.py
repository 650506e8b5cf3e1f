"""EpilogueFusionPass (the ``UBFusion`` stage) on dense layers and convolutions with an
activation, as real libraries build them (``epilogue_models``, frozen, random weights).

After graph fusion made ``MatMulBiasAdd``, ``Gelu`` and ``Swish`` of them, each product
or convolution with its bias and activation becomes one ``MatMulBiasAddActivation`` or
``Conv2DBiasAddActivation`` carrying the activation (and LeakyRelu's ``alpha``, Gelu's
``approximate``, Swish's ``beta``), verified numerically against the original:

* Keras 3 and tf_keras ``Conv2D(activation=...)`` and ``Dense(activation=...)`` on rank-2
  and (through Tensordot) rank-4 input, for relu, relu6, elu, leaky_relu, sigmoid, tanh,
  gelu, silu and swish;
* tf_slim ``conv2d`` / ``fully_connected`` with ``activation_fn`` (LeakyReLU with alpha 0.1,
  the tanh GELU and a swish with beta 1.5 among them);
* keras-hub ``BertBackbone`` (tanh GELU in every feed-forward, tanh in the pooler),
  transformers ``TFBertModel`` (erf GELU) and ``TFCLIPTextModel`` (quick GELU: a Swish
  with beta 1.702).

Refused with the reason: a pre-activation or convolution something else reads too, a
BiasAdd in another data format than its convolution.  Not matched: activations the
fused ops do not carry (softplus, selu) and a Dense without bias.  The fusion switch
file's ``{"UBFusion": {"ALL": "off"}}`` leaves MatMulBiasAdd and its activation apart.
"""
from __future__ import annotations

import functools

import pytest

from tests.models import activation_models as am
from tests.models import activation_models2 as am2
from tests.models import epilogue_models as em
from tests.helpers.pass_checks import REGISTRY, assert_builds, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion
from scopefusion import FusionSwitch

PASS = "EpilogueFusionPass"
MODELS = {**em.EPILOGUE_FORMS, **em.EPILOGUE_REFUSALS, **em.EPILOGUE_LOOK_ALIKES}
FUSED_TYPES = ("MatMulBiasAddActivation", "Conv2DBiasAddActivation")
#: What an epilogue op carries when the activation has no use for a parameter.
DEFAULTS = {"alpha": 0.2, "approximate": False, "beta": 1.0}
ACTIVATION_OPS = ("Relu", "Relu6", "Elu", "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "Swish")
CONV_ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


@functools.cache
def model(key: str):
    return MODELS[key]()


def nodes(graph_def, *ops: str) -> list:
    return [n for n in graph_def.node if n.op in ops]


def assert_activation(node, fused: dict) -> None:
    """``node`` carries the activation ``fused`` names, its parameters and defaults for the rest."""
    assert node.attr["activation"].s.decode() == fused["activation"], node.name
    wanted = {**DEFAULTS, **{k: v for k, v in fused.items() if k != "activation"}}
    assert node.attr["alpha"].f == pytest.approx(wanted["alpha"], rel=1e-6), node.name
    assert node.attr["approximate"].b is wanted["approximate"], node.name
    assert node.attr["beta"].f == pytest.approx(wanted["beta"], rel=1e-6), node.name


@pytest.mark.parametrize("key", list(MODELS))
def test_builder_makes_its_form(key):
    """The builder's graph holds the ops of its form and runs in plain TensorFlow."""
    assert_builds(model(key))


@pytest.mark.parametrize("key", list(em.EPILOGUE_FORMS))
def test_epilogue_is_fused(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    fused = result.fused_graph_def
    report = pass_report(result, PASS)
    matmuls, convs = nodes(fused, FUSED_TYPES[0]), nodes(fused, FUSED_TYPES[1])
    assert (len(matmuls), len(convs)) == (m.attrs["matmul"], m.attrs["conv"]), [r.reason for r in report.refused]
    assert len(report.fused) == m.attrs["matmul"] + m.attrs["conv"] and report.refused == []
    for node in matmuls + convs:
        assert_activation(node, m.attrs["fused"])
        assert len([i for i in node.input if not i.startswith("^")]) == 3, node.name
    for node in matmuls:
        assert (node.attr["transpose_a"].b, node.attr["transpose_b"].b) == (False, False), node.name
    (original_conv,) = nodes(m.graph_def, "Conv2D")
    for key_ in CONV_ATTRS:
        assert convs[0].attr[key_] == original_conv.attr[key_], key_
    # every product, convolution and activation went into the fused ops
    assert nodes(fused, "MatMul", "MatMulBiasAdd", "Conv2D", "BiasAdd", *ACTIVATION_OPS) == []
    assert_verifies(m, result)


def test_real_models_fuse_their_dense_activations():
    """keras-hub BERT: one tanh-GELU feed-forward per layer and the pooler's tanh;
    transformers BERT: one erf GELU per layer; transformers CLIP text: one quick GELU per
    layer (a Swish with beta 1.702).  The feed-forwards act on [batch, seq, hidden]
    (through Tensordot); the pooler on [batch, hidden]."""
    cases = [
        (am.keras_hub_bert(), {"Gelu": {"activation": "Gelu", "approximate": True}, "Tanh": {"activation": "Tanh"}},
         {"Gelu": 2, "Tanh": 1}),
        (am.transformers_bert(), {"Gelu": {"activation": "Gelu"}}, {"Gelu": 2}),
        (am2.transformers_clip_text(), {"Swish": {"activation": "Swish", "beta": 1.702}}, {"Swish": 2}),
    ]
    for m, fused_attrs, counts in cases:
        result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
        epilogues = nodes(result.fused_graph_def, FUSED_TYPES[0])
        found = {a: sum(n.attr["activation"].s.decode() == a for n in epilogues) for a in counts}
        assert found == counts and len(epilogues) == sum(counts.values()), m.name
        for node in epilogues:
            assert_activation(node, fused_attrs[node.attr["activation"].s.decode()])
        assert_verifies(m, result)


@pytest.mark.parametrize("key", list(em.EPILOGUE_REFUSALS))
def test_epilogue_that_would_lose_a_tensor_or_move_the_bias_is_refused(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    report = pass_report(result, PASS)
    assert nodes(result.fused_graph_def, *FUSED_TYPES) == [] and report.fused == []
    (refusal,) = report.refused
    assert m.attrs["reason"] in refusal.reason
    assert_verifies(m, result)


@pytest.mark.parametrize("key", list(em.EPILOGUE_LOOK_ALIKES))
def test_look_alike_is_not_matched(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    assert pass_report(result, PASS).match_times == 0
    assert nodes(result.fused_graph_def, *FUSED_TYPES) == []
    assert_verifies(m, result)


def test_the_switch_file_keeps_matmul_bias_add_and_its_activation_apart():
    m = model("tf_keras_relu")
    switch = FusionSwitch.from_text('{"Switch": {"UBFusion": {"ALL": "off"}}}')
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=switch)
    fused = result.fused_graph_def
    assert nodes(fused, *FUSED_TYPES) == []
    assert len(nodes(fused, "MatMulBiasAdd")) == 2 and len(nodes(fused, "Relu")) == 3
    assert len(nodes(fused, "Conv2D")) == len(nodes(fused, "BiasAdd")) == 1
    report = pass_report(result, PASS)
    assert report.switch == "off (ALL)" and report.match_times == 0
    assert_verifies(m, result)
