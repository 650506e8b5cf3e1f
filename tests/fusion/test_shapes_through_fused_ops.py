"""Shapes flow through the fused ops of an earlier stage.

A fused op is imported into TensorFlow's shape inference as a stand-in: declared
``same_shape`` outputs (``LayerNorm``, ``RMSNorm``, ``GroupNorm``, ``InstanceNorm``,
``Gelu``, ``Swish``: y is shaped like x) as an ``Identity`` of that input, so a pass of a later
stage still tells the rank of what lies downstream.  Without it, a layer norm over a positive
axis behind a scope-fused layer norm was refused ("cannot tell the rank of the input"), as in
transformers' ``TFLxmertModel``.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.models import activation_models as am
from tests.models import norm_models as nm
from tests.helpers.pass_checks import REGISTRY, op_count, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion
from scopefusion.core.fusion.fused_ops import FusedOpDef, TensorArg, shape_rules

H = nm.HIDDEN


def slim_then_positive_axis() -> nm.NormModel:
    """``tf_slim.layers.layer_norm`` (a scope of its own: fused by the scope stage), then a
    layer norm written at the top level over axis 2 (fused by the graph stage), twice; the
    input's shape is unknown, so only the first norm's output can tell the rank."""
    import tensorflow as tf
    import tf_slim

    def build():
        x = tf.compat.v1.placeholder(tf.float32, None, name="x")
        h = tf.reshape(x, [-1, 4, H])
        for i in range(2):
            h = tf_slim.layers.layer_norm(h, begin_norm_axis=-1, begin_params_axis=-1, scope=f"ln{i}")
            h = tf.nn.relu(h)
            mean = tf.reduce_mean(h, [2], keepdims=True)
            var = tf.reduce_mean(tf.square(h - mean), [2], keepdims=True)
            h = (h - mean) * tf.math.rsqrt(var + 1e-5) * nm.params(H, 10 + i, 1.0) + nm.params(H, 20 + i)
        feed = np.random.default_rng(0).normal(size=(2, 4, H)).astype(np.float32)
        return {x: feed}, [h]

    return nm.tf1_graph("slim_then_positive_axis", build, layer_norms=2, graph_layer_norms=2,
                        input_shapes=f"x:2,4,{H}")


def test_a_later_stage_tells_the_rank_through_a_fused_layer_norm():
    m = slim_then_positive_axis()
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    assert len(pass_report(result, "ScopeLayerNormPass").fused) == m.layer_norms
    graph_pass = pass_report(result, "LayerNormFusionPass")
    assert graph_pass.refused == [] and len(graph_pass.fused) == m.graph_layer_norms
    assert op_count(result.fused_graph_def, "LayerNorm") == 4
    assert_verifies(m, result)


def test_without_the_declaration_the_rank_stays_unknown(monkeypatch):
    m = slim_then_positive_axis()
    import scopefusion.core.graph_fusion.engine as engine

    monkeypatch.setattr(engine, "shape_rules", lambda fused_ops: {})
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    refused = pass_report(result, "LayerNormFusionPass").refused
    assert len(refused) == 2 and all("cannot tell the rank" in r.reason for r in refused)


def test_same_shape_is_checked_when_declared():
    with pytest.raises(ValueError, match="same_shape maps output 1 to input 0, but the op has 1 output"):
        FusedOpDef("Bad", (TensorArg("x", type_attr="T"),), (TensorArg("y", type_attr="T"),), same_shape={1: 0})
    assert shape_rules(REGISTRY.fused_ops)["LayerNorm"] == {0: 0}
    assert "MatMulBiasAdd" not in shape_rules(REGISTRY.fused_ops)


def lxmert_norm_calls():
    """transformers' TFLxmertModel, tiny, and how many times its tf_keras layer norms are called
    while it is traced (its cross-attention layer is shared by both directions)."""
    import tensorflow as tf
    import tf_keras
    from transformers import LxmertConfig, TFLxmertModel

    tf_keras.utils.set_random_seed(0)
    config = LxmertConfig(vocab_size=50, hidden_size=16, num_attention_heads=2, intermediate_size=24,
                          l_layers=1, x_layers=1, r_layers=1, visual_feat_dim=8, visual_pos_dim=4,
                          max_position_embeddings=16)
    model = TFLxmertModel(config, name="lxmert")
    dummy = {k: v for k, v in model.dummy_inputs.items() if v is not None}
    model(dummy, training=False)
    am._perturb_keras(model, 0)
    calls = []
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, tf_keras.layers.LayerNormalization):
            def counted(*args, __call=layer.call, **kwargs):
                calls.append(1)
                return __call(*args, **kwargs)
            layer.call = counted
    specs = {k: tf.TensorSpec(v.shape, v.dtype, name=k) for k, v in dummy.items()}

    def fn(**inputs):
        out = model(inputs, training=False)
        return {"language": out.language_output, "vision": out.vision_output}

    m = nm.traced("lxmert", fn, specs, int_range=(0, 2))
    return m, len(calls)


def test_transformers_lxmert_layer_norms_are_all_fused():
    m, calls = lxmert_norm_calls()
    # embeddings 1, visual features and boxes 2, language and vision layers 2 each, cross layer 6
    # (its cross-attention layer is shared by both directions: its norm is called twice)
    assert calls == 13
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    fused = [f for p in result.report.passes if p.name in ("ScopeLayerNormPass", "LayerNormFusionPass")
             for f in p.fused]
    refused = [r.reason for p in result.report.passes if p.name in ("ScopeLayerNormPass", "LayerNormFusionPass")
               for r in p.refused]
    assert len(fused) == calls and refused == []
    # a layer norm of a residual sum ends as the UBFusion stage's AddLayerNorm, which holds it
    assert op_count(result.fused_graph_def, "LayerNorm", "AddLayerNorm") == calls
    assert_verifies(m, result)
