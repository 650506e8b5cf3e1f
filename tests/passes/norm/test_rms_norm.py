"""RMSNormFusionPass on the RMS norms real libraries produce (built by ``norm_models``,
frozen, random weights): Keras 3 ``RMSNormalization`` (also under ``mixed_float16``),
keras-hub ``GemmaBackbone`` / ``LlamaBackbone`` / ``MistralBackbone``, transformers
``TFT5EncoderModel`` / ``TFMistralModel``, ``TFT5LayerNorm`` and Gemma's norm run at the top
level, and an RMS norm without epsilon.

Each is fused into exactly as many ``RMSNorm`` nodes as the model has RMS norms (two per
decoder layer and a final one), with ``epsilon``, ``axes`` and ``T`` as the code sets them,
and verified against the original.  Not fused: layer norms (Keras' ``rms_scaling`` divides
by the standard deviation), L2 normalization, a centred input (refused), epsilon added to
the root mean square (refused) and a norm without gamma.
"""
from __future__ import annotations

import pytest

from tests.helpers.norm_testing import (
    REGISTRY, RMS_NORM_DECOYS, RMS_NORM_FORMS, assert_attrs, assert_builds, assert_fused_as_built,
    assert_look_alike, assert_verifies, fused, model, nodes, op_count,
)

PASS = "RMSNormFusionPass"
FORMS = [f"rms:{k}" for k in RMS_NORM_FORMS]
DECOYS = [f"rms:{k}" for k in RMS_NORM_DECOYS]


@pytest.mark.parametrize("key", FORMS + DECOYS)
def test_builder_makes_its_form(key):
    assert_builds(model(key), "RMSNorm")


@pytest.mark.parametrize("key", FORMS)
def test_rms_norm_is_fused(key):
    m, result, rms = assert_fused_as_built(key, PASS, "RMSNorm", model(key).rms_norms)
    for node in rms:
        assert_attrs(node, m.attrs)
        assert len([i for i in node.input if not i.startswith("^")]) == 2
    # each RMS norm took its one Mean along
    assert op_count(result.fused_graph_def, "Mean") == op_count(m.graph_def, "Mean") - m.rms_norms
    tolerance = 1e-2 if "float16" in key else 1e-4
    assert assert_verifies(m, result) <= tolerance


def test_gemma_scales_by_one_plus_w_outside_the_op():
    """keras-hub Gemma's ``(1 + scale)`` stays in the graph as the gamma the op reads."""
    result = fused("rms:keras_hub_gemma")
    graph = {n.name: n for n in result.fused_graph_def.node}
    for node in nodes(result.fused_graph_def, "RMSNorm"):
        gamma = graph[node.input[1]]
        assert gamma.op == "AddV2"
        constants = [graph[i] for i in gamma.input]
        assert any(c.op == "Const" and c.attr["value"].tensor.float_val == [1.0] for c in constants)


def test_mixed_precision_casts_stay_around_a_float32_op():
    """Keras' RMSNormalization under mixed_float16 computes in float32 between casts: the
    up-cast feeds the op, the down-cast reads it."""
    result = fused("rms:keras_rms_normalization_mixed_float16")
    graph = {n.name: n for n in result.fused_graph_def.node}
    for node in nodes(result.fused_graph_def, "RMSNorm"):
        assert node.attr["T"].type == 1
        assert graph[node.input[0]].op == "Cast"
        readers = [n for n in result.fused_graph_def.node if node.name in n.input]
        assert [r.op for r in readers] == ["Cast"]


@pytest.mark.parametrize("key", DECOYS)
def test_look_alike_is_not_fused(key):
    _, result = assert_look_alike(key, PASS, model(key).refusal)
    assert nodes(result.fused_graph_def, "RMSNorm") == []


def test_registered_with_its_fused_op():
    assert PASS in REGISTRY.graph_pass_names()
    op = REGISTRY.fused_ops["RMSNorm"]
    assert op.signature() == "RMSNorm(x, gamma) -> (y)"
    assert [a.name for a in op.attrs] == ["epsilon", "axes", "T"]
