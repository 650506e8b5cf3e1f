"""GroupNormFusionPass on the group norms real libraries produce (built by ``norm_models``,
frozen, random weights): Keras 3 ``GroupNormalization`` (NHWC, NCHW, unknown batch; groups
below and equal to the channel count), tf_keras ``GroupNormalization`` (weighted moments),
tf_slim ``group_norm``, transformers ``TFWav2Vec2Model`` / ``TFHubertModel`` with
``feat_extract_norm="group"`` (groups == channels, no reshape) and ``TFWav2Vec2GroupNorm``'s
grouped path.  tensorflow-addons 0.23 does not import with TensorFlow 2.21 / Keras 3, so its
layer is not among them.

Each is fused into exactly as many ``GroupNorm`` nodes as the model has group norms, with
``num_groups`` (the channel count when every channel is a group), ``epsilon`` and
``data_format``, and verified against the original.  Not fused: tf_slim instance norms
(NHWC and NCHW; ``ScopeInstanceNormPass`` takes them when enabled), layer norms, batch norms
and a group norm without beta (refused).
"""
from __future__ import annotations

import pytest

from tests.helpers.norm_testing import (
    GROUP_NORM_DECOYS, GROUP_NORM_FORMS, REGISTRY, assert_attrs, assert_builds, assert_fused_as_built,
    assert_look_alike, assert_verifies, fused, model, nodes, op_count,
)

PASS = "GroupNormFusionPass"
FORMS = [f"gn:{k}" for k in GROUP_NORM_FORMS]
DECOYS = [f"gn:{k}" for k in GROUP_NORM_DECOYS]


@pytest.mark.parametrize("key", FORMS + DECOYS)
def test_builder_makes_its_form(key):
    assert_builds(model(key), "GroupNorm")


@pytest.mark.parametrize("key", FORMS)
def test_group_norm_is_fused(key):
    m, result, groups = assert_fused_as_built(key, PASS, "GroupNorm", model(key).group_norms)
    expected = dict(m.attrs)
    num_groups = expected.pop("num_groups")
    for node in groups:
        assert_attrs(node, {**expected, "T": 1})
        assert len([i for i in node.input if not i.startswith("^")]) == 3
    assert sorted(n.attr["num_groups"].i for n in groups) == sorted(num_groups)
    # the models' other norms are layer norms, fused by the scope pass
    assert len(nodes(result.fused_graph_def, "LayerNorm")) == m.layer_norms
    # each norm took its Rsqrt along (wav2vec2's weight-normalised positional conv keeps its own)
    norms = m.group_norms + m.layer_norms
    assert op_count(result.fused_graph_def, "Rsqrt") == op_count(m.graph_def, "Rsqrt") - norms
    assert assert_verifies(m, result) <= 1e-4


def test_speech_encoder_group_norm_has_a_group_per_channel():
    """TFWav2Vec2Model's first conv layer: conv_dim[0] == 8 channels, 8 groups, read straight
    from the conv output (no reshape), gamma and beta of shape [8]."""
    result = fused("gn:transformers_wav2vec2")
    graph = {n.name: n for n in result.fused_graph_def.node}
    (node,) = nodes(result.fused_graph_def, "GroupNorm")
    assert node.attr["num_groups"].i == 8
    assert "conv_layers.0" in node.name
    for param in node.input[1:3]:
        const = graph[param.split(":")[0]]
        while const.op != "Const":
            const = graph[const.input[0]]
        assert [d.size for d in const.attr["value"].tensor.tensor_shape.dim] == [8]


def test_instance_norm_pass_keeps_the_tf_slim_instance_norm():
    """Enabled, ScopeInstanceNormPass fuses tf_slim's instance norm first; disabled, it stays
    unfused: never a GroupNorm."""
    for enable, instance_norms in (("ScopeInstanceNormPass", 1), ("", 0)):
        result = fused("gn:instance_norm_nhwc", enable)
        assert len(nodes(result.fused_graph_def, "InstanceNorm")) == instance_norms
        assert nodes(result.fused_graph_def, "GroupNorm") == []


@pytest.mark.parametrize("key", DECOYS)
def test_look_alike_is_not_fused(key):
    m, result = assert_look_alike(key, PASS, model(key).refusal)
    assert nodes(result.fused_graph_def, "GroupNorm") == []
    assert len(nodes(result.fused_graph_def, "LayerNorm")) == m.layer_norms


def test_registered_with_its_fused_op():
    assert PASS in REGISTRY.graph_pass_names()
    op = REGISTRY.fused_ops["GroupNorm"]
    assert op.signature() == "GroupNorm(x, gamma, beta) -> (y)"
    assert [a.name for a in op.attrs] == ["num_groups", "epsilon", "data_format", "T"]
