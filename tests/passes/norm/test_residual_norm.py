"""ResidualNormFusionPass (the ``UBFusion`` stage): ``norm(x + residual)`` -> ``AddLayerNorm`` /
``AddRMSNorm``, on real transformer graphs (frozen, tiny, random weights).

Expected counts come from each architecture (``n`` layers):

* transformers ``TFBertModel`` (post-norm): the embeddings' sum and both sub-layers of every
  layer close with LayerNorm(sum): ``2n + 1`` AddLayerNorm, no sum read on;
* transformers ``TFGPT2Model`` (pre-norm): ``ln_2`` and the next layer's ``ln_1`` read the
  residual sums, ``ln_f`` the last: ``2n`` AddLayerNorm, ``2n - 1`` of them hand their sum to
  the next residual add.  The first ``ln_1`` reads the embeddings plus a scalar token-type
  embedding of 0: that add broadcasts and is refused with the reason;
* transformers ``TFT5EncoderModel`` and ``TFMistralModel``, keras-hub ``LlamaBackbone``,
  ``MistralBackbone`` and ``GemmaBackbone`` (pre-norm, RMS): ``2n`` AddRMSNorm, ``2n - 1`` with
  the sum read on (the first norm reads the embeddings, no add);
* a tf_slim BERT-style encoder (3 layers, rank-2 dense layers): ``2n`` AddLayerNorm, whose
  summands are the graph stage's ``MatMulBiasAdd`` ops (their shapes are worked out through
  them); its embeddings' norm reads ``x * c + d`` with a scalar ``d`` and is refused;
* a residual stack ``h = norm(h + relu(h @ w))`` with the layer norm hand-written (fused by the
  graph stage's LayerNormFusionPass) and as tf_keras ``LayerNormalization`` (fused by the scope
  stage's ScopeLayerNormPass, whose axis reads 2 where the hand-written one reads -1): ``n``
  AddLayerNorm each, with the same attributes (axes counted from the end): the result does not
  depend on which pass made the LayerNorm.

Every fused graph verifies numerically against the original.  Refused with the reason: an add
that broadcasts (a bias, not a residual), a layer norm whose statistics are read elsewhere.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.models import activation_models as am
from tests.models import layer_norm_models as lm
from tests.models import rms_norm_models as rm
from tests.models.model_builders import bert_style_encoder
from tests.models.norm_models import HIDDEN, NormModel, encoder, params, spec, traced
from tests.helpers.pass_checks import REGISTRY, op_count, pass_report, refusals
from tests.helpers.verify import assert_verifies

import scopefusion
from scopefusion.core.verify.execute import run_graph_def

PASS = "ResidualNormFusionPass"
LAYERS = 2
FUSED = ("AddLayerNorm", "AddRMSNorm")


def keras_layer_norm_encoder() -> object:
    """The residual stack with tf_keras ``LayerNormalization`` (each in its own scope) as its norm,
    with the hand-written form's epsilon and parameters."""
    import tf_keras

    norms = []
    for i in range(LAYERS):
        layer = tf_keras.layers.LayerNormalization(epsilon=1e-5, name=f"ln_{i}")
        layer.build((2, 4, HIDDEN))
        layer.set_weights([params(HIDDEN, 10 + i, 1.0), params(HIDDEN, 20 + i)])
        norms.append(layer)
    fn, specs = encoder(lambda x, i: norms[i](x), LAYERS)
    return traced("tf_keras_layer_norm_encoder", fn, specs)


def bias_not_residual() -> object:
    """``LayerNormalization(x + b)`` with ``b`` a [HIDDEN] vector: a bias add, not a residual."""
    import tf_keras

    norm = tf_keras.layers.LayerNormalization(epsilon=1e-5, name="ln")
    norm.build((2, 4, HIDDEN))
    b = params(HIDDEN, 3)
    return traced("bias_not_residual", lambda x: norm(x * 2.0 + b), {"x": spec([2, 4, HIDDEN])})


def _frozen(m) -> tuple:
    return m.graph_def, m.inputs, m.outputs


#: model key -> (builder, fused op, count, sums read on)
CASES = {
    "transformers_bert": (am.transformers_bert, "AddLayerNorm", 2 * LAYERS + 1, 0),
    "transformers_gpt2": (am.transformers_gpt2, "AddLayerNorm", 2 * LAYERS, 2 * LAYERS - 1),
    "transformers_t5": (lambda: rm.transformers_rms("t5"), "AddRMSNorm", 2 * LAYERS, 2 * LAYERS - 1),
    "transformers_mistral": (lambda: rm.transformers_rms("mistral"), "AddRMSNorm", 2 * LAYERS, 2 * LAYERS - 1),
    "keras_hub_llama": (lambda: rm.keras_hub_backbone("llama"), "AddRMSNorm", 2 * LAYERS, 2 * LAYERS - 1),
    "keras_hub_mistral": (lambda: rm.keras_hub_backbone("mistral"), "AddRMSNorm", 2 * LAYERS, 2 * LAYERS - 1),
    "keras_hub_gemma": (lambda: rm.keras_hub_backbone("gemma"), "AddRMSNorm", 2 * LAYERS, 2 * LAYERS - 1),
    "hand_written_layer_norm": (lambda: lm.hand_written_layer_norm("rsqrt"), "AddLayerNorm", LAYERS, 0),
    "tf_slim_bert_encoder": (lambda: NormModel(*_frozen(bert_style_encoder(layers=3, hidden=64, heads=4, seq=8,
                                                                           batch=2, seed=1)), name="tf_slim_bert"),
                             "AddLayerNorm", 2 * 3, 0),
    "tf_keras_layer_norm": (keras_layer_norm_encoder, "AddLayerNorm", LAYERS, 0),
}


@functools.cache
def fused(key: str):
    m = CASES[key][0]()
    return m, scopefusion.fuse(m.graph_def, registry=REGISTRY)


def sums_read(graph_def, node) -> int:
    """How many inputs of other nodes read output 1 (the sum) of ``node``."""
    return sum(i == f"{node.name}:1" for n in graph_def.node for i in n.input)


@pytest.mark.parametrize("key", list(CASES))
def test_residual_norms_are_fused(key):
    _, op_type, count, carried = CASES[key]
    m, result = fused(key)
    graph = result.fused_graph_def
    nodes = [n for n in graph.node if n.op == op_type]
    assert len(nodes) == count, refusals(result, PASS)
    assert len(pass_report(result, PASS).fused) == count
    assert sum(sums_read(graph, n) > 0 for n in nodes) == carried
    for node in nodes:
        assert len([i for i in node.input if not i.startswith("^")]) == (4 if op_type == "AddLayerNorm" else 3)
    assert_verifies(m, result)


def test_gpt2_first_norm_reads_a_broadcasting_add_and_is_refused():
    _, result = fused("transformers_gpt2")
    (refusal,) = pass_report(result, PASS).refused
    assert refusal.name.endswith("h_._0/ln_1") and "the add broadcasts" in refusal.reason
    assert op_count(result.fused_graph_def, "LayerNorm") == 1


def test_the_result_does_not_depend_on_which_pass_made_the_layer_norm():
    """The hand-written norms come from LayerNormFusionPass, the Keras layers' from
    ScopeLayerNormPass; both end as the same AddLayerNorm ops."""
    ops = {}
    for key, maker in (("hand_written_layer_norm", "LayerNormFusionPass"), ("tf_keras_layer_norm",
                                                                            "ScopeLayerNormPass")):
        _, result = fused(key)
        assert len(pass_report(result, maker).fused) == LAYERS, key
        ops[key] = sorted((n.attr["begin_norm_axis"].i, n.attr["begin_params_axis"].i,
                           round(n.attr["epsilon"].f, 9), n.attr["T"].type)
                          for n in result.fused_graph_def.node if n.op == "AddLayerNorm")
    assert ops["hand_written_layer_norm"] == ops["tf_keras_layer_norm"]  # axes counted from the end
    assert ops["tf_keras_layer_norm"][0][:2] == (-1, -1)
    assert len(ops["tf_keras_layer_norm"]) == LAYERS
    # the two models are one computation (same weights, epsilon and parameters): same outputs
    x = np.random.default_rng(0).normal(size=(2, 4, HIDDEN)).astype(np.float32)
    outs = [run_graph_def(fused(key)[0].graph_def, {"x:0": x}, list(fused(key)[0].outputs))[0]
            for key in ("hand_written_layer_norm", "tf_keras_layer_norm")]
    assert np.max(np.abs(outs[0] - outs[1])) <= 1e-4


def test_a_bias_add_before_a_norm_is_refused():
    m = bias_not_residual()
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    (refusal,) = pass_report(result, PASS).refused
    assert "the add broadcasts" in refusal.reason and "[16]" in refusal.reason
    assert op_count(result.fused_graph_def, *FUSED) == 0 and op_count(result.fused_graph_def, "LayerNorm") == 1
    assert_verifies(m, result)


def test_statistics_read_elsewhere_are_refused():
    """A residual layer norm that also returns its mean and variance: AddLayerNorm has no such outputs."""
    import tensorflow as tf

    gamma, beta = params(HIDDEN, 1, 1.0), params(HIDDEN, 2)

    def fn(x):
        h = x + tf.nn.relu(x * 2.0)
        mean, var = tf.nn.moments(h, [-1], keepdims=True)
        return {"y": tf.nn.batch_normalization(h, mean, var, beta, gamma, 1e-5), "mean": mean * 1.0,
                "variance": var + 0.0}

    m = traced("statistics_read", fn, {"x": spec([2, 4, HIDDEN])})
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    (refusal,) = pass_report(result, PASS).refused
    assert "mean or variance is read by" in refusal.reason
    assert op_count(result.fused_graph_def, "LayerNorm") == 1
    assert_verifies(m, result)
