"""AttentionFusionPass on the attention real libraries compute (built by
``attention_models``, frozen, random weights): transformers ``TFBertModel``,
``TFGPT2Model`` (causal), ``TFT5EncoderModel`` (no scale, relative position bias),
``TFViTModel``, ``TFCLIPTextModel``, ``TFMistralModel`` (grouped-query); Keras 3 and tf_keras
``MultiHeadAttention`` without a mask, with ``attention_mask``, ``use_causal_mask`` or both;
attention written in a few lines of TensorFlow with the scale on k, ``rsqrt(d)``, another
scalar, a band-part causal mask, openai GPT-2's lines, a softmax written out as ops (which the softmax pass turns
into a ``Softmax`` in the graph stage; the attention pass runs in the ``UBFusion`` stage).

Each is fused into exactly as many ``ScaledDotProductAttention`` nodes as the model has
attention softmaxes, with the attributes the code sets, no softmax left, and verified
against the original (float32, within 1e-4).  Refused with the reason: a softmax over the
queries, GPT-2's masking with a band that is not causal, a scale that is a matrix, an op
between the softmax and the product with v, dropout left in the graph, k not transposed.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.models import attention_models as atm
from scopefusion.core.fusion.fused_ops import shape_rules
from tests.helpers.pass_checks import REGISTRY, op_count, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion

PASS = "AttentionFusionPass"
OP = "ScaledDotProductAttention"
MODELS = {**atm.ATTENTION_FORMS, **atm.ATTENTION_LOOK_ALIKES}
OFF = '{"Switch": {"UBFusion": {"AttentionFusionPass": "off"}}}'


@functools.cache
def model(key: str) -> atm.AttentionModel:
    return MODELS[key]()


@functools.cache
def fused(key: str):
    return scopefusion.fuse(model(key).graph_def, registry=REGISTRY)


def refusals(result) -> list[str]:
    return [f"{r.name}: {r.reason}" for r in pass_report(result, PASS).refused]


def attr(node, key: str):
    value = node.attr[key]
    kind = value.WhichOneof("value")
    if kind == "s":
        return value.s.decode()
    if kind == "list":
        return [s.decode() for s in value.list.s]
    return getattr(value, kind)


@pytest.mark.parametrize("key", list(atm.ATTENTION_FORMS))
def test_attention_is_fused(key):
    m, result = model(key), fused(key)
    report = pass_report(result, PASS)
    assert m.attentions >= 1
    # one softmax per attention in the code (written out as ops in one form)
    written_out = key in ("hand_written_softmax_hand_written", "openai_gpt2")
    assert op_count(m.graph_def, "Softmax") == (0 if written_out else m.attentions)
    assert len(report.fused) == m.attentions, refusals(result)
    assert report.refused == []
    nodes = [n for n in result.fused_graph_def.node if n.op == OP]
    assert len(nodes) == m.attentions
    assert op_count(result.fused_graph_def, "Softmax") == 0
    for node in nodes:
        for name, want in m.attrs.items():
            got = attr(node, name)
            assert got == (pytest.approx(want, rel=1e-6) if isinstance(want, float) else want), (node.name, name)
    assert assert_verifies_within(m, result) <= (1e-2 if "float16" in key else 1e-4)


def assert_verifies_within(m, result) -> float:
    check = scopefusion.verify(m.graph_def, result.fused_graph_def, fused_ops=REGISTRY.fused_ops,
                               input_shapes=m.input_shapes, int_range=m.int_range, runs=2)
    assert check.passed, check.table()
    return max(o.max_abs_error for o in check.outputs)


@pytest.mark.parametrize("key", list(atm.ATTENTION_LOOK_ALIKES))
def test_look_alike_is_not_fused(key):
    m, result = model(key), fused(key)
    report = pass_report(result, PASS)
    assert report.fused == []
    assert op_count(result.fused_graph_def, OP) == 0
    reasons = refusals(result)
    if m.refusal is None:
        assert reasons == []
    else:
        assert len(reasons) == 1 and m.refusal in reasons[0], reasons
    assert_verifies(m, result)


@pytest.mark.parametrize("key, inputs", [
    ("transformers_bert", ["mask"]),             # (1 - mask) * -10000, shared by the layers
    ("transformers_t5", ["mask"]),               # position bias + padding mask, one tensor
    ("transformers_vit", []),
    ("transformers_clip_text", ["mask", "bias"]),  # the additive causal mask first, then the padding mask
    ("transformers_gpt2", ["mask"]),             # causal (an attribute) and the padding mask
    ("keras_mha_causal", []),
    ("keras_mha_padding", ["mask"]),
    ("keras_mha_both", ["mask"]),                # logical_and(padding, causal): stays an input
])
def test_masks_the_op_takes(key, inputs):
    for node in fused(key).fused_graph_def.node:
        if node.op == OP:
            assert attr(node, "optional_inputs") == inputs
            assert len([i for i in node.input if not i.startswith("^")]) == 3 + len(inputs)


def test_a_boolean_mask_is_taken_as_it_is():
    """Keras' masked softmax selects with a boolean mask: the op takes it, Tmask bool, and the
    value the dropped scores become."""
    for node in fused("keras_mha_padding").fused_graph_def.node:
        if node.op == OP:
            assert attr(node, "Tmask") == 10
            assert attr(node, "mask_fill") < -1e30


@pytest.mark.parametrize("key, mask_ops, fill", [
    ("transformers_gpt2", ("GreaterEqual",), -10000.0),   # w * b - 1e4 * (1 - b), b from a range compare
    ("keras_mha_causal", ("MatrixBandPart",), None),              # where(band_part(ones, -1, 0), w, lowest)
    ("hand_written_band_part_causal", ("MatrixBandPart",), -1e9),
    ("tf_keras_mha_causal", ("MatrixBandPart",), -1e9),           # s + (1 - band_part) * -1e9
])
def test_an_exactly_causal_mask_becomes_an_attribute(key, mask_ops, fill):
    """The causal mask built in the graph is evaluated, found exactly causal and goes with the op."""
    m, result = model(key), fused(key)
    assert all(op_count(m.graph_def, op) > 0 for op in mask_ops)
    assert all(op_count(result.fused_graph_def, op) == 0 for op in mask_ops)
    for node in result.fused_graph_def.node:
        if node.op == OP:
            assert attr(node, "is_causal") is True
            if fill is not None:
                assert attr(node, "mask_fill") == pytest.approx(fill)


def test_layouts():
    """BatchMatMul heads are [batch, heads, seq, size]; Keras' einsums keep [batch, seq, heads, size]."""
    for key, layout in (("transformers_bert", "BNSH"), ("transformers_t5", "BNSH"), ("keras_mha_none", "BSNH"),
                        ("tf_keras_mha_none", "BSNH")):
        layouts = {attr(n, "layout") for n in fused(key).fused_graph_def.node if n.op == OP}
        assert layouts == {layout}, key


def test_the_switch_file_turns_it_off():
    switch = scopefusion.FusionSwitch.from_text(OFF)
    result = scopefusion.fuse(model("transformers_bert").graph_def, registry=REGISTRY, fusion_switch_file=switch)
    assert op_count(result.fused_graph_def, OP) == 0
    assert result.report.pass_report(PASS).switch == "off (exact)"


@pytest.mark.parametrize("key", ["transformers_bert", "transformers_gpt2", "transformers_t5", "keras_mha_padding"])
def test_other_passes_fuse_as_much_as_without_it(key):
    """Fusing attention takes nothing from the other passes: each fuses as many places with the
    attention pass on as with it off."""
    on = fused(key).report
    off = scopefusion.fuse(model(key).graph_def, registry=REGISTRY,
                           fusion_switch_file=scopefusion.FusionSwitch.from_text(OFF)).report
    counts = {p.name: len(p.fused) for p in off.passes if p.name != PASS}
    assert {p.name: len(p.fused) for p in on.passes if p.name != PASS} == counts
    assert sum(counts.values()) > 0


def test_reference_is_attention():
    """The reference implementation against numpy, with a bias, a boolean mask, causality and
    grouped-query heads."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 4, 5, 8)).astype(np.float32)
    k, v = (rng.normal(size=(2, 2, 5, 8)).astype(np.float32) for _ in range(2))
    bias = rng.normal(size=(1, 4, 5, 5)).astype(np.float32)
    mask = rng.integers(0, 2, size=(2, 1, 1, 5)).astype(bool)
    mask[..., 0] = True
    (y,) = REGISTRY.fused_ops[OP].reference(tf.constant(q), tf.constant(k), tf.constant(v), tf.constant(mask),
                                            tf.constant(bias), scale=0.3, is_causal=True, mask_fill=-1e9,
                                            zero_dropped=False, num_heads=4, num_kv_heads=2, layout="BNSH",
                                            transpose_q=False, transpose_k=False, T=tf.float32, Tmask=tf.bool,
                                            softmax_dtype=tf.float32)
    kk, vv = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    s = 0.3 * q @ np.swapaxes(kk, -1, -2) + bias
    s = np.where(np.tril(np.ones((5, 5), bool)), s, -1e9)
    s = np.where(mask, s, -1e9)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(y.numpy(), p @ vv, atol=1e-5)


def test_registered_with_its_fused_op():
    assert PASS in REGISTRY.graph_pass_names()
    op = REGISTRY.fused_ops[OP]
    assert op.signature() == "ScaledDotProductAttention(q, k, v[, mask][, bias]) -> (y)"
    assert [a.name for a in op.attrs][:7] == ["scale", "is_causal", "mask_fill", "zero_dropped", "num_heads",
                                              "num_kv_heads", "layout"]


def test_grouped_query_attention_takes_k_and_v_unrepeated():
    """transformers' Mistral repeats its 2 key/value heads for 4 query heads (``tf.repeat``):
    the op takes them as they are, the repetition goes with it."""
    m, result = model("transformers_mistral"), fused("transformers_mistral")
    assert op_count(m.graph_def, "Tile") == 2 * m.attentions
    assert op_count(result.fused_graph_def, "Tile") == 0
    graph = {n.name: n for n in result.fused_graph_def.node}
    # q and k are the rotary embedding's outputs, shaped like its input
    shapes = scopefusion.GraphView(result.fused_graph_def, same_shape=shape_rules(REGISTRY.fused_ops))
    for node in graph.values():
        if node.op == OP:
            q, k, v = (shapes.static_shape((shapes.index.index[i.split(":")[0]], 0)) for i in node.input[:3])
            assert (q[1], k[1], v[1]) == (4, 2, 2)
