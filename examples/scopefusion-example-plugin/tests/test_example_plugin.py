"""Tests of the example plugin, written with scopefusion's pytest plugin."""
from __future__ import annotations

import tensorflow as tf


def _model(x):
    with tf.name_scope("head"):
        y = tf.math.l2_normalize(x * 2.0, axis=-1, epsilon=1e-6)
    return tf.nn.relu(y + 0.1)


SPEC = tf.TensorSpec([4, 8], tf.float32, "x")


def test_l2_normalize_runs_only_when_enabled(scopefusion_helper):
    graph = scopefusion_helper.graph_from_function(_model, SPEC)
    assert scopefusion_helper.origin_of("ScopeL2NormalizePass") == "scopefusion-example-plugin 0.1.0"
    off = scopefusion_helper.run(graph)
    scopefusion_helper.assert_fused(off, "L2Normalize", 0)
    # off, the pass does not run; the general layer-norm pass names the scope as a near miss, with why
    why = scopefusion_helper.assert_not_matched(off, "head/l2_normalize")
    assert why.startswith("ScopeLayerNormPass: pattern LayerNorm: ") and "ScopeL2NormalizePass" not in why, why
    # left out, it is tried for hints (the graph holds what its patterns need) and says where it would fuse
    assert any(h.startswith("ScopeL2NormalizePass is not enabled; it would fuse 1 place(s) ('head/l2_normalize')")
               for h in off.report.hints), off.report.hints
    from scopefusion_example_plugin.l2_normalize import ScopeL2NormalizePass

    assert not ScopeL2NormalizePass().may_fuse({"Square", "Sum", "Maximum", "Mul"})  # no Rsqrt: not tried
    on = scopefusion_helper.run(graph, enable="ScopeL2NormalizePass")
    (node,) = scopefusion_helper.assert_fused(on, "L2Normalize", 1, axis=[-1], epsilon=1e-6)
    assert node.name == "head/l2_normalize"
    scopefusion_helper.assert_verified(graph, on)


def test_layer_norm_override_emits_layer_norm_v2(scopefusion_helper):
    gamma = tf.constant([2.0, 1.0, 0.5, 1.5, 1.0, 3.0, 0.25, 1.0])
    beta = tf.constant([0.5, 0.0, -1.0, 0.25, 0.0, 1.0, 0.0, 2.0])

    def model(x):
        # the ops tf_slim.layers.layer_norm writes, in a scope of the same name
        with tf.name_scope("enc/LayerNorm"):
            mean, variance = tf.nn.moments(x, [1], keepdims=True)
            y = tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-5)
        return tf.tanh(y)

    graph = scopefusion_helper.graph_from_function(model, SPEC)
    assert scopefusion_helper.origin_of("ScopeLayerNormPass") == "scopefusion-example-plugin 0.1.0"
    result = scopefusion_helper.run(graph)
    assert any("ScopeLayerNormPass: built-in replaced by" in o for o in result.report.overrides)
    scopefusion_helper.assert_fused(result, "LayerNorm", 0)
    scopefusion_helper.assert_fused(result, "LayerNormV2", 1, begin_axis=1, epsilon=1e-5)
    scopefusion_helper.assert_verified(graph, result)
