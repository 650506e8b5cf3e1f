"""AttentionFusionPass on more real attention (``tests.models.attention_backbones``):
transformers ``TFWav2Vec2Model`` (heads folded into the batch) and TF Model Garden's
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
