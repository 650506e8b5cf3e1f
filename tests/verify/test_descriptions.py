"""A result's description (``set_description`` of a scope pass, ``FusedOp.description`` of a graph
pass) is kept: in the report's fused records and on the fused node as ``_description``, which
TensorFlow ignores (the fused graph still runs and matches the original)."""
from __future__ import annotations

import json

import scopefusion
from scopefusion.core.fusion.plan import DESCRIPTION_ATTR

LAYER_NORM = "bert/embeddings/LayerNorm"


def test_descriptions_reach_the_report_and_the_fused_nodes(bert_encoder, registry):
    result = scopefusion.fuse(bert_encoder.graph_def, registry=registry, hints=False)
    records = {(f.name, f.type): f.description for f in result.report.fused}
    # a scope pass's set_description and a graph pass's FusedOp.description
    assert records[(LAYER_NORM, "LayerNorm")].startswith("LayerNorm over axes [1]")
    assert records[("bert/pooler/dense/Tanh", "MatMulBiasAddActivation")] == "MatMulBiasAdd + Tanh"
    nodes = {n.name: n for n in result.graph_def.node}
    assert nodes[LAYER_NORM].attr[DESCRIPTION_ATTR].s.decode() == records[(LAYER_NORM, "LayerNorm")]
    assert nodes["bert/pooler/dense/Tanh"].attr[DESCRIPTION_ATTR].s == b"MatMulBiasAdd + Tanh"
    described = [n for n in result.graph_def.node if DESCRIPTION_ATTR in n.attr]
    assert len(described) == sum(1 for n in result.graph_def.node if n.op in registry.fused_ops)
    as_json = json.loads(result.report.to_json())
    assert any(f["description"] == "MatMulBiasAdd + Tanh" for p in as_json["passes"] for f in p["fused"])
    outcome = scopefusion.verify(bert_encoder.graph_def, result.graph_def, registry=registry, feeds=bert_encoder.inputs)
    outcome.assert_ok()
    tf_form = scopefusion.fuse(bert_encoder.graph_def, registry=registry, hints=False, emit="tf").graph_def
    scopefusion.verify(bert_encoder.graph_def, tf_form, registry=registry, feeds=bert_encoder.inputs).assert_ok()
