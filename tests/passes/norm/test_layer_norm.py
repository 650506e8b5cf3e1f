"""ScopeLayerNormPass on graphs built by tf_slim.layers.layer_norm."""
from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.freeze import freeze_graph
from tests.helpers.pass_checks import NORMS_APART

import scopefusion
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.verify.execute import run_graph_def
from scopefusion.testing import graph_from_function


def _max_err(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True))


def test_every_layer_norm_of_a_bert_encoder_is_fused(bert_encoder, registry):
    m = bert_encoder
    result = scopefusion.fuse(m.graph_def, registry=registry, fusion_switch_file=NORMS_APART)
    report = result.report
    fused = [n for n in result.graph_def.node if n.op == "LayerNorm"]
    assert len(fused) == m.layer_norms == 7
    assert report.fused_count("LayerNorm") == 7 and report.refused == []
    names = sorted(n.name for n in fused)
    assert "bert/embeddings/LayerNorm" in names
    assert "bert/encoder/layer_2/output/LayerNorm" in names
    node = next(n for n in fused if n.name == "bert/encoder/layer_1/attention/output/LayerNorm")
    assert node.attr["begin_norm_axis"].i == 1  # x is [batch*seq, hidden]
    assert node.attr["begin_params_axis"].i == -1
    assert node.attr["epsilon"].f == pytest.approx(1e-12, rel=1e-6)
    assert node.input[0] == "bert/encoder/layer_1/attention/output/add"
    # gamma and beta stay as constants feeding the fused node
    assert node.input[1].startswith("bert/encoder/layer_1/attention/output/LayerNorm/")
    nodes = {n.name for n in result.graph_def.node}
    assert not any(n.endswith("/moments/mean") or n.endswith("batchnorm/Rsqrt") for n in nodes)
    GraphIndex(result.graph_def)
    assert m.graph_def.node[0].name in nodes  # caller's graph is untouched
    assert any(n.op == "Rsqrt" for n in m.graph_def.node)


def test_tf_form_runs_and_matches_the_original(bert_encoder, registry):
    m = bert_encoder
    result = scopefusion.fuse(m.graph_def, emit="tf", registry=registry, fusion_switch_file=NORMS_APART)
    calls = [n for n in result.graph_def.node
             if n.op == "PartitionedCall" and n.attr["_scopefusion_op"].s == b"LayerNorm"]
    assert len(calls) == 7
    expected = run_graph_def(m.graph_def, m.inputs, m.outputs)
    got = run_graph_def(result.graph_def, m.inputs, m.outputs)
    assert _max_err(expected, got) <= 1e-4
    # intermediate output tensors of a fused scope are gone, but the layer
    # norm result is available from the fused node itself
    ln = "bert/encoder/layer_0/output/LayerNorm"
    orig = run_graph_def(m.graph_def, m.inputs, [f"{ln}/batchnorm/add_1:0", f"{ln}/moments/mean:0"])
    new = run_graph_def(result.graph_def, m.inputs, [f"{ln}:0", f"{ln}:1"])
    assert _max_err(orig, new) <= 1e-4


def test_old_output_names_stay_fetchable_when_the_output_is_a_layer_norm(registry):
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(3)

    def build():
        x = tf1.placeholder(tf.float32, [4, 16], name="x")
        y = tf_slim.layers.layer_norm(tf.nn.relu(x) * 3.0, begin_norm_axis=1)
        return {x: rng.normal(size=(4, 16)).astype(np.float32)}, [y]

    graph, feeds, outputs = freeze_graph(build)
    assert outputs == ["LayerNorm/batchnorm/add_1:0"]
    result = scopefusion.fuse(graph, emit="tf", registry=registry)
    assert result.report.fused_count("LayerNorm") == 1
    alias = next(n for n in result.graph_def.node if n.name == "LayerNorm/batchnorm/add_1")
    assert alias.op == "Identity" and list(alias.input) == ["LayerNorm"]
    assert _max_err(run_graph_def(graph, feeds, outputs), run_graph_def(result.graph_def, feeds, outputs)) <= 1e-4


@pytest.mark.parametrize("variant,reason", [
    ({"scale": False}, "no gamma"),
    ({"center": False}, "no beta"),
    ({"center": False, "scale": False}, "no gamma"),
])
def test_variants_without_gamma_or_beta_are_refused(registry, variant, reason):
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 8], name="x")
        y = tf_slim.layers.layer_norm(x, begin_norm_axis=1, **variant)
        return {x: np.ones((2, 8), np.float32)}, [tf.identity(y, name="out")]

    graph, _, _ = freeze_graph(build)
    result = scopefusion.fuse(graph, registry=registry)
    assert result.report.fused == []
    refused = result.report.pass_report("ScopeLayerNormPass").refused
    assert len(refused) == 1 and reason in refused[0].reason
    assert len(result.graph_def.node) == len(graph.node)


def test_axes_that_are_not_trailing_are_refused(registry):
    import tensorflow as tf

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 3, 4, 5], name="x")
        # tf_slim normalises [begin_norm_axis, rank): always trailing.  Build
        # the same scope by hand over axes [1, 2] to get a look-alike.
        with tf1.variable_scope("LayerNorm"):
            mean, var = tf.nn.moments(x, [1, 2], keepdims=True)
            gamma = tf1.get_variable("gamma", [5], initializer=tf1.ones_initializer())
            beta = tf1.get_variable("beta", [5], initializer=tf1.zeros_initializer())
            y = tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-5)
        return {x: np.ones((2, 3, 4, 5), np.float32)}, [tf.identity(y, name="out")]

    graph, _, _ = freeze_graph(build)
    result = scopefusion.fuse(graph, registry=registry)
    refused = result.report.pass_report("ScopeLayerNormPass").refused
    assert result.report.fused == [] and len(refused) == 1
    assert "not the trailing axes of a rank-4 input" in refused[0].reason
    # the graph pass, which looks at layer norms whatever their scope, refuses it too
    (graph_refusal,) = result.report.pass_report("LayerNormFusionPass").refused
    assert "reduction axes [1, 2] are not the trailing axes" in graph_refusal.reason


def test_epsilon_and_3d_input_read_from_the_graph(registry):
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(5)

    def build():
        x = tf1.placeholder(tf.float32, [2, 5, 12], name="x")
        with tf1.variable_scope("encoder"):
            y = tf_slim.layers.layer_norm(x, begin_norm_axis=2, begin_params_axis=-1)
            z = tf_slim.layers.layer_norm(tf.tanh(y), begin_norm_axis=1, begin_params_axis=1)
        return {x: rng.normal(size=(2, 5, 12)).astype(np.float32)}, [tf.identity(z, name="out")]

    graph, feeds, outputs = freeze_graph(build)
    result = scopefusion.fuse(graph, emit="tf", registry=registry)
    fused = {n.name: n for n in result.fused_graph_def.node if n.op == "LayerNorm"}
    assert set(fused) == {"encoder/LayerNorm", "encoder/LayerNorm_1"}
    assert fused["encoder/LayerNorm"].attr["begin_norm_axis"].i == 2
    assert fused["encoder/LayerNorm_1"].attr["begin_norm_axis"].i == 1
    assert fused["encoder/LayerNorm_1"].attr["begin_params_axis"].i == -2
    assert _max_err(run_graph_def(graph, feeds, outputs), run_graph_def(result.graph_def, feeds, outputs)) <= 1e-4


def test_tf1_style_add_ops_are_fused_too(registry):
    """TF1 exported ``+`` as ``Add``; TF2 writes ``AddV2``.  Same graph, both spellings."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(7)

    def build():
        x = tf1.placeholder(tf.float32, [3, 10], name="x")
        y = tf_slim.layers.layer_norm(x + 1.0, begin_norm_axis=-1)
        return {x: rng.normal(size=(3, 10)).astype(np.float32)}, [tf.identity(y, name="out")]

    graph, feeds, outputs = freeze_graph(build)
    renamed = 0
    for node in graph.node:
        if node.op == "AddV2":
            node.op = "Add"
            renamed += 1
    assert renamed == 3  # x + 1, variance + epsilon, the final sum
    result = scopefusion.fuse(graph, emit="tf", registry=registry)
    assert result.report.fused_count("LayerNorm") == 1
    assert _max_err(run_graph_def(graph, feeds, outputs), run_graph_def(result.graph_def, feeds, outputs)) <= 1e-4


def test_a_layer_norm_written_with_reduce_variance(registry):
    """tf.math.reduce_variance takes a mean of its own: two Means of x, one statistic."""
    import tensorflow as tf

    rng = np.random.default_rng(4)
    gamma = tf.constant(rng.uniform(0.5, 1.5, 8).astype(np.float32))
    beta = tf.constant(rng.normal(size=8).astype(np.float32))

    def norm(x):
        with tf.name_scope("ln"):
            mean = tf.reduce_mean(x, -1, keepdims=True)
            variance = tf.math.reduce_variance(x, -1, keepdims=True)
            return (x - mean) * tf.math.rsqrt(variance + 1e-5) * gamma + beta

    graph = graph_from_function(norm, tf.TensorSpec([2, 4, 8], tf.float32, "x"))
    assert sum(n.op == "Mean" for n in graph.node) == 3
    result = scopefusion.fuse(graph, registry=registry)
    assert result.report.refused == []
    (node,) = [n for n in result.graph_def.node if n.op == "LayerNorm"]
    assert node.name == "ln" and node.input[0] == "x"
    assert node.attr["epsilon"].f == pytest.approx(1e-5) and node.attr["begin_norm_axis"].i == -1
    assert not any(n.op == "Mean" for n in result.graph_def.node)
    scopefusion.verify(graph, result.graph_def, fused_ops=registry.fused_ops).assert_ok()


def test_a_layer_norm_of_an_embedding_lookup(registry):
    """x comes from a GatherV2 (whose type attr is Tparams): nothing to tell about its type."""
    import tensorflow as tf
    import tf_slim

    def build():
        ids = tf.compat.v1.placeholder(tf.int32, [2, 5], name="ids")
        table = tf.constant(np.random.default_rng(2).normal(size=(10, 8)).astype(np.float32))
        return {}, [tf_slim.layers.layer_norm(tf.gather(table, ids), begin_norm_axis=-1, begin_params_axis=-1)]

    frozen, _, _ = freeze_graph(build)
    result = scopefusion.fuse(frozen, registry=registry)
    assert result.report.refused == [] and result.report.fused_count("LayerNorm") == 1
    scopefusion.verify(frozen, result.graph_def, fused_ops=registry.fused_ops, int_range=(0, 10)).assert_ok()
