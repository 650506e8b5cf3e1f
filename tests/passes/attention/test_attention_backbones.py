"""AttentionFusionPass on more real attention (``tests.models.attention_backbones``):
transformers ``TFWav2Vec2Model`` (heads folded into the batch), keras-hub ``GemmaBackbone``
(grouped-query: Keras' grouped einsum, ``query_groups``), transformers ``TFSwinModel``
(windows: ``mask_windows``) and TF Model Garden's
``TransformerEncoderBlock`` (a padding mask, a causal mask shared by the blocks) and
``BertEncoderV2``.  Each: exactly one ``ScaledDotProductAttention`` per attention softmax, no
softmax and no refusal left, the attributes the code sets, verified against the original
(float32, within 1e-4).
"""
from __future__ import annotations

import functools

import pytest

from tests.helpers.pass_checks import REGISTRY, op_count, pass_report
from tests.helpers.verify import assert_verifies
from tests.models import attention_backbones as ab

import scopefusion

PASS = "AttentionFusionPass"
OP = "ScaledDotProductAttention"


def attr(node, key: str):
    value = node.attr[key]
    kind = value.WhichOneof("value")
    if kind == "s":
        return value.s.decode()
    if kind == "list":
        return [s.decode() for s in value.list.s]
    return getattr(value, kind)


def check(m) -> None:
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    report = pass_report(result, PASS)
    assert m.attentions >= 1 and op_count(m.graph_def, "Softmax") == m.attentions
    assert [f"{r.name}: {r.reason}" for r in report.refused] == []
    assert len(report.fused) == m.attentions
    nodes = [n for n in result.fused_graph_def.node if n.op == OP]
    assert len(nodes) == m.attentions and op_count(result.fused_graph_def, "Softmax") == 0
    for node in nodes:
        for name, want in m.attrs.items():
            got = attr(node, name)
            assert got == (pytest.approx(want, rel=1e-6) if isinstance(want, float) else want), (node.name, name)
    assert assert_verifies(m, result) <= 1e-4


@functools.cache
def model(key: str):
    return {**ab.BACKBONE_FORMS, **ab.MODEL_GARDEN_FORMS}[key]()


@pytest.mark.parametrize("key", list(ab.BACKBONE_FORMS))
def test_backbone_attention_is_fused(key):
    check(model(key))


@pytest.mark.parametrize("key", list(ab.MODEL_GARDEN_FORMS))
def test_model_garden_attention_is_fused(key, model_garden_site):
    check(model(key))


def test_a_mask_per_window_in_the_reference():
    """``mask_windows``: batch row b takes the mask of window b % windows, against numpy."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(6, 2, 4, 8)).astype(np.float32) for _ in range(3))
    mask = rng.normal(size=(1, 3, 1, 4, 4)).astype(np.float32)
    (y,) = REGISTRY.fused_ops[OP].reference(tf.constant(q), tf.constant(k), tf.constant(v), tf.constant(mask),
                                            scale=0.5, is_causal=False, mask_fill=-1e9, zero_dropped=False,
                                            mask_windows=3, num_heads=2, num_kv_heads=2, layout="BNSH",
                                            transpose_q=False, transpose_k=False, T=tf.float32, Tmask=tf.float32,
                                            softmax_dtype=tf.float32)
    s = 0.5 * q @ np.swapaxes(k, -1, -2) + mask[0][np.arange(6) % 3]
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(y.numpy(), p @ v, atol=1e-5)


def test_swin_windows():
    """transformers ``TFSwinModel``: each block's relative position bias is the op's bias, its
    window mask (computed in ``tf.cond`` branches, viewed per window by shapes Swin computes
    from ``Shape`` ops) the op's mask: 4 windows of 4x4 patches in the first stage, 1 in the
    second.  The views' shape computations stay in the graph, read by nothing fused."""
    from tests.models import attention_models as atm

    m = atm.transformers_swin()
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    nodes = sorted((n for n in result.fused_graph_def.node if n.op == OP), key=lambda n: n.name)
    assert [attr(n, "mask_windows") for n in nodes] == [4, 4, 1, 1]
    assert [attr(n, "num_heads") for n in nodes] == [1, 1, 2, 2]
    assert all(attr(n, "optional_inputs") == ["mask", "bias"] for n in nodes)
    assert op_count(result.fused_graph_def, "Softmax") == 0
    assert assert_verifies(m, result) <= 1e-4


def test_query_groups_in_the_reference():
    """``query_groups``: q holds each kv head's query heads along its rows; against numpy, with a
    mask in the scores' grouped view."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(1)
    b, kv, groups, t, s, h = 2, 2, 3, 4, 5, 8
    q = rng.normal(size=(b, kv, groups * t, h)).astype(np.float32)
    k, v = (rng.normal(size=(b, kv, s, h)).astype(np.float32) for _ in range(2))
    mask = rng.integers(0, 2, size=(b, 1, 1, t, s)).astype(bool)
    mask[..., 0] = True
    (y,) = REGISTRY.fused_ops[OP].reference(tf.constant(q), tf.constant(k), tf.constant(v), tf.constant(mask),
                                            scale=0.7, is_causal=False, mask_fill=-1e9, zero_dropped=False,
                                            query_groups=groups, num_heads=kv * groups, num_kv_heads=kv,
                                            layout="BNSH", transpose_q=False, transpose_k=False, T=tf.float32,
                                            Tmask=tf.bool, softmax_dtype=tf.float32)
    q5 = q.reshape(b, kv, groups, t, h)  # [batch, kv head, group, query, size]
    scores = 0.7 * np.einsum("bkgth,bksh->bkgts", q5, k)
    scores = np.where(mask, scores, -1e9)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    expected = np.einsum("bkgts,bksh->bkgth", p, v).reshape(b, kv, groups * t, h)
    np.testing.assert_allclose(y.numpy(), expected, atol=1e-5)
