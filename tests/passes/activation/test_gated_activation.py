"""GatedActivationFusionPass (the ``UBFusion`` stage): ``act(gate) * up`` -> ``GatedActivation``,
on gated MLPs as real libraries build them (frozen, tiny, random weights).

Expected counts come from the architectures: one gated feed-forward per layer in transformers
``TFT5EncoderModel`` with ``feed_forward_proj="gated-gelu"`` (GeGLU, ``gelu_new``: the tanh
GELU) and ``TFMistralModel`` (SwiGLU), keras-hub ``LlamaBackbone`` and ``MistralBackbone``
(SwiGLU) and ``GemmaBackbone`` (GeGLU, tanh GELU); and a Keras 3 gated block written with
layers (``Multiply()([Dense(activation="silu")(x), Dense()(x)])``).

The result is the same whichever stage made the activation: with GeluFusionPass and
SwishFusionPass switched off, the pass takes the raw ops and makes the same ops with the same
attributes.  Every fused graph verifies numerically.  Refused with the reason: an activation
something else reads too, a product that broadcasts (a scale, not a projection); not matched:
``relu(a) * b``.
"""
from __future__ import annotations

import functools

import pytest

from tests.models import activation_models as am
from tests.models import rms_norm_models as rm
from tests.models.norm_models import HIDDEN, spec, traced
from tests.helpers.pass_checks import REGISTRY, op_count, pass_report, refusals
from tests.helpers.verify import assert_verifies

import scopefusion

PASS = "GatedActivationFusionPass"
LAYERS = 2
RAW = scopefusion.FusionSwitch.from_text(
    '{"Switch": {"GraphFusion": {"GeluFusionPass": "off", "SwishFusionPass": "off"}}}')
SWIGLU = {"activation": "Swish", "beta": 1.0, "approximate": False}
GEGLU_TANH = {"activation": "Gelu", "beta": 1.0, "approximate": True}


def transformers_t5_gated_gelu(seed: int = 0):
    """``TFT5EncoderModel`` with ``feed_forward_proj="gated-gelu"``: ``TFT5DenseGatedActDense``
    computes ``gelu_new(wi_0(h)) * wi_1(h)`` in every layer."""
    import tf_keras
    from transformers import T5Config, TFT5EncoderModel

    tf_keras.utils.set_random_seed(seed)
    config = T5Config(vocab_size=50, d_model=HIDDEN, d_kv=8, d_ff=32, num_layers=LAYERS, num_heads=2,
                      dropout_rate=0.0, layer_norm_epsilon=1e-6, feed_forward_proj="gated-gelu")
    fn, specs = am._transformers_model(TFT5EncoderModel(config, name="t5"), seed, ("input_ids", "attention_mask"))
    return traced("transformers_t5_gated_gelu", fn, specs, seed, int_range=(0, 2))


def keras_gated_block(seed: int = 0):
    """Keras 3 layers: ``Multiply()([Dense(32, activation="silu")(x), Dense(32)(x)])``, then
    ``Dense(16)``: a SwiGLU with biased projections."""
    import keras

    keras.utils.set_random_seed(seed)
    gate, up, down = (keras.layers.Dense(32, activation="silu"), keras.layers.Dense(32), keras.layers.Dense(HIDDEN))
    for layer in (gate, up):
        layer.build((2, HIDDEN))
    down.build((2, 32))
    am._randomize_keras([gate, up, down], seed)
    multiply = keras.layers.Multiply()
    return traced("keras_gated_block", lambda x: down(multiply([gate(x), up(x)])), {"x": spec([2, HIDDEN])}, seed)


#: key -> (builder, count, attributes of every fused op)
CASES = {
    "transformers_t5_gated_gelu": (transformers_t5_gated_gelu, LAYERS, GEGLU_TANH),
    "transformers_mistral": (lambda: rm.transformers_rms("mistral"), LAYERS, SWIGLU),
    "keras_hub_llama": (lambda: rm.keras_hub_backbone("llama"), LAYERS, SWIGLU),
    "keras_hub_mistral": (lambda: rm.keras_hub_backbone("mistral"), LAYERS, SWIGLU),
    "keras_hub_gemma": (lambda: rm.keras_hub_backbone("gemma"), LAYERS, GEGLU_TANH),
    "keras_gated_block": (keras_gated_block, 1, SWIGLU),
}


@functools.cache
def model(key: str):
    return CASES[key][0]()


@functools.cache
def fused(key: str, raw: bool = False):
    return scopefusion.fuse(model(key).graph_def, registry=REGISTRY, fusion_switch_file=RAW if raw else None)


def gated_attrs(result) -> list[tuple]:
    return sorted((n.attr["activation"].s.decode(), n.attr["approximate"].b, round(n.attr["beta"].f, 6),
                   n.attr["T"].type) for n in result.fused_graph_def.node if n.op == "GatedActivation")


@pytest.mark.parametrize("key", list(CASES))
def test_gated_mlps_are_fused(key):
    _, count, attrs = CASES[key]
    result = fused(key)
    nodes = [n for n in result.fused_graph_def.node if n.op == "GatedActivation"]
    assert len(nodes) == count, refusals(result, PASS)
    report = pass_report(result, PASS)
    assert len(report.fused) == count and report.refused == []
    for node in nodes:
        assert node.attr["activation"].s.decode() == attrs["activation"]
        assert node.attr["approximate"].b is attrs["approximate"]
        assert node.attr["beta"].f == pytest.approx(attrs["beta"])
        assert len([i for i in node.input if not i.startswith("^")]) == 2
    # the activation went into the gated op: none is left
    assert op_count(result.fused_graph_def, "Gelu", "Swish", "Sigmoid", "Tanh", "Erf", "Erfc") == 0
    assert_verifies(model(key), result)


@pytest.mark.parametrize("key", list(CASES))
def test_the_raw_activation_gives_the_same_ops(key):
    """GeluFusionPass and SwishFusionPass switched off: the pass reads the activation's own ops
    and makes the same GatedActivation ops, with the same attributes."""
    result = fused(key, raw=True)
    assert pass_report(result, "GeluFusionPass").switch.startswith("off")
    assert gated_attrs(result) == gated_attrs(fused(key)) and len(gated_attrs(result)) == CASES[key][1]
    assert_verifies(model(key), result)


def test_keras_biased_gate_keeps_its_product_and_bias_fused():
    """The gate's Dense has a bias: MatMulBiasAdd (graph stage) feeds the GatedActivation, whose
    match overlaps the epilogue's Swish(MatMulBiasAdd) and comes first in the run order."""
    result = fused("keras_gated_block")
    graph = {n.name: n for n in result.fused_graph_def.node}
    (node,) = [n for n in graph.values() if n.op == "GatedActivation"]
    assert [graph[i].op for i in node.input] == ["MatMulBiasAdd", "MatMulBiasAdd"]
    (dropped,) = pass_report(result, "EpilogueFusionPass").dropped
    assert PASS in dropped.reason


def _look_alike(which: str):
    import tensorflow as tf

    def fn(x):
        h = x * 2.0
        if which == "scaled":
            return tf.nn.silu(h) * tf.constant(0.5)
        if which == "activation_read":
            g = tf.nn.gelu(h, approximate=True)
            return g * (x + 1.0), g
        return tf.nn.relu(h) * (x + 1.0)

    return traced(f"look_alike[{which}]", fn, {"x": spec([2, 4, HIDDEN])})


@pytest.mark.parametrize("which, reason", [
    ("scaled", "the product broadcasts"),
    ("activation_read", "is also read by"),
])
def test_look_alikes_are_refused_with_the_reason(which, reason):
    m = _look_alike(which)
    for switch in (None, RAW):
        result = scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=switch)
        (refusal,) = pass_report(result, PASS).refused
        assert reason in refusal.reason
        assert op_count(result.fused_graph_def, "GatedActivation") == 0
        assert_verifies(m, result)


def test_a_relu_gate_is_not_matched():
    m = _look_alike("relu")
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    assert pass_report(result, PASS).match_times == 0
