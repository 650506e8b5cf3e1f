"""ScopeInstanceNormPass on graphs built by tf_slim.instance_norm and by hand
(tf.nn.moments over spatial axes + tf.nn.batch_normalization), and on layer
norm / batch norm decoys that it must leave alone."""
from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.freeze import freeze_graph

import scopefusion
from scopefusion.core.graph.index import GraphIndex
from scopefusion.builtin_passes.scope.instance_norm import (
    INSTANCE_NORM,
    ScopeInstanceNormPass,
    instance_norm_reference,
)
from scopefusion.core.graph.attrs import attr_value_to_python
from scopefusion.core.fusion.plan import DESCRIPTION_ATTR
from scopefusion.testing import graph_from_function, registry_with

PASS = "ScopeInstanceNormPass"
FLOAT32_MAX_ABS_ERR = 1e-4
EPS_1E_6 = float(np.float32(1e-6))  # tf_slim's default epsilon, as stored in the graph


@pytest.fixture(scope="module")
def in_registry():
    return registry_with([ScopeInstanceNormPass], [INSTANCE_NORM])


def _fuse(graph, registry, enable=PASS, **options):
    result = scopefusion.fuse(graph, registry=registry, enable_scope_fusion_passes=enable, **options)
    GraphIndex(result.graph_def)  # a valid graph
    return result


def _nodes(result, op="InstanceNorm"):
    return {n.name: n for n in result.fused_graph_def.node if n.op == op}


def _attrs(node):
    return {k: attr_value_to_python(v) for k, v in node.attr.items() if k != DESCRIPTION_ATTR}


def _max_err(graph, result, registry, **options) -> float:
    """Verify the fused graph against the original; the largest absolute error."""
    outcome = scopefusion.verify(graph, result.fused_graph_def, fused_ops=registry.fused_ops, **options)
    outcome.assert_ok()
    return max(o.max_abs_error for o in outcome.outputs)


def _refusals(result):
    return result.report.pass_report(PASS).refused


def _slim_params(seed=0):
    """Non-trivial gamma / beta, so verification checks they are used."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    return {"gamma": tf1.random_uniform_initializer(0.5, 1.5, seed=seed),
            "beta": tf1.random_normal_initializer(stddev=0.5, seed=seed)}


# ------------------------------------------------------------- tf_slim, NHWC
@pytest.fixture(scope="module")
def slim_convnet_nhwc():
    """conv2d + instance_norm twice (normalizer_fn), then instance_norm with a ReLU inside its scope."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 8, 8, 3], name="images")
        h = tf_slim.conv2d(x, 4, 3, normalizer_fn=tf_slim.instance_norm,
                           normalizer_params={"param_initializers": _slim_params(1)})
        h = tf_slim.conv2d(h, 6, 3, stride=2, normalizer_fn=tf_slim.instance_norm,
                           normalizer_params={"epsilon": 1e-3, "param_initializers": _slim_params(2)})
        y = tf_slim.instance_norm(h, epsilon=1e-5, activation_fn=tf.nn.relu, param_initializers=_slim_params(3))
        return {}, [tf.identity(y, name="out")]

    graph, _, _ = freeze_graph(build)
    return graph


def test_slim_instance_norms_nhwc_are_fused_and_verified(slim_convnet_nhwc, in_registry):
    graph = slim_convnet_nhwc
    result = _fuse(graph, in_registry)
    report = result.report.pass_report(PASS)
    assert report.matched_scopes == ["Conv/InstanceNorm/moments", "Conv_1/InstanceNorm/moments",
                                     "InstanceNorm/moments"]
    assert report.refused == [] and result.report.fused_count("InstanceNorm") == 3
    fused = _nodes(result)
    assert sorted(fused) == ["Conv/InstanceNorm", "Conv_1/InstanceNorm", "InstanceNorm"]
    epsilons = {"Conv/InstanceNorm": EPS_1E_6, "Conv_1/InstanceNorm": 1e-3, "InstanceNorm": 1e-5}
    for name, node in fused.items():
        attrs = _attrs(node)
        assert attrs["axes"] == [1, 2] and attrs["data_format"] == "NHWC" and attrs["T"] == 1
        assert attrs["epsilon"] == pytest.approx(epsilons[name], rel=1e-6)
    record = next(f for f in report.fused if f.name == "Conv_1/InstanceNorm")
    assert record.scopes == ["Conv_1/InstanceNorm/moments", "Conv_1/InstanceNorm/instancenorm"]

    node = fused["Conv_1/InstanceNorm"]
    assert node.input[0] == "Conv_1/Conv2D"
    # gamma and beta are the [C] parameters, read as before
    assert node.input[1:] == ["Conv_1/InstanceNorm/instancenorm/mul/ReadVariableOp",
                              "Conv_1/InstanceNorm/instancenorm/ReadVariableOp"]
    # the activation inside the tf_slim scope is not part of the normalization: it stays
    relu = next(n for n in result.fused_graph_def.node if n.name == "InstanceNorm/Relu")
    assert list(relu.input) == ["InstanceNorm"]
    ops = {n.op for n in result.fused_graph_def.node}
    assert not ops & {"Mean", "SquaredDifference", "Rsqrt", "StopGradient"}

    assert _max_err(graph, result, in_registry) <= FLOAT32_MAX_ABS_ERR


def test_tf_form_runs_the_reference(slim_convnet_nhwc, in_registry):
    from scopefusion.core.verify.execute import run_graph_def

    graph = slim_convnet_nhwc
    result = _fuse(graph, in_registry, emit="tf")
    calls = [n for n in result.graph_def.node if n.op == "PartitionedCall"]
    assert len(calls) == 3 and {c.attr["_scopefusion_op"].s for c in calls} == {b"InstanceNorm"}
    feed = {"images:0": np.random.default_rng(0).normal(size=(2, 8, 8, 3)).astype(np.float32)}
    want = run_graph_def(graph, feed, ["out:0"])[0]
    got = run_graph_def(result.graph_def, feed, ["out:0"])[0]
    assert float(np.max(np.abs(want - got))) <= FLOAT32_MAX_ABS_ERR


# ------------------------------------------------------------- tf_slim, NCHW
def test_slim_instance_norm_nchw_after_a_conv_is_fused(in_registry):
    """NCHW: tf_slim reshapes gamma and beta to [1, C, 1, 1]; the fused op takes the [C] vectors."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 3, 8, 8], name="images")
        h = tf_slim.conv2d(x, 4, 3, data_format="NCHW", activation_fn=None)
        y = tf_slim.instance_norm(h, data_format="NCHW", param_initializers=_slim_params(4))
        return {}, [tf.nn.relu(y, name="out")]

    graph, _, _ = freeze_graph(build)
    assert sum(n.op == "Reshape" for n in graph.node) == 2
    result = _fuse(graph, in_registry)
    (node,) = _nodes(result).values()
    assert node.name == "InstanceNorm"
    assert _attrs(node) == {"axes": [2, 3], "data_format": "NCHW", "T": 1,
                            "epsilon": pytest.approx(EPS_1E_6, rel=1e-6)}
    assert node.input[:] == ["Conv/BiasAdd", "InstanceNorm/Reshape_1/ReadVariableOp",
                             "InstanceNorm/Reshape/ReadVariableOp"]
    assert not any(n.op == "Reshape" for n in result.fused_graph_def.node)
    assert _max_err(graph, result, in_registry) <= FLOAT32_MAX_ABS_ERR


@pytest.mark.parametrize("data_format,shape,axes", [
    ("NHWC", [2, 6, 4], [1]),            # [batch, length, channels]
    ("NCHW", [2, 4, 6], [2]),            # [batch, channels, length]
    ("NCHW", [2, 3, 2, 3, 4], [2, 3, 4]),  # volumes
])
def test_slim_instance_norm_of_other_ranks(in_registry, data_format, shape, axes):
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, shape, name="x")
        y = tf_slim.instance_norm(tf.tanh(x) * 3.0, data_format=data_format, param_initializers=_slim_params(5))
        return {}, [tf.identity(y, name="out")]

    graph, _, _ = freeze_graph(build)
    result = _fuse(graph, in_registry)
    (node,) = _nodes(result).values()
    assert _attrs(node)["axes"] == axes and _attrs(node)["data_format"] == data_format
    assert _max_err(graph, result, in_registry) <= FLOAT32_MAX_ABS_ERR


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("center,scale,helpers", [
    (False, True, {"ZerosLike"}),
    (True, False, {"OnesLike"}),
    (False, False, {"Shape", "StridedSlice", "Fill", "ZerosLike"}),
])
def test_missing_gamma_or_beta_is_fed_as_ones_or_zeros(in_registry, data_format, center, scale, helpers):
    """center=False / scale=False: the fused op gets explicit per-channel zeros / ones."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    shape = [2, 4, 5, 3] if data_format == "NHWC" else [2, 3, 4, 5]

    def build():
        x = tf1.placeholder(tf.float32, shape, name="x")
        y = tf_slim.instance_norm(x * 2.0 + 1.0, center=center, scale=scale, data_format=data_format,
                                  param_initializers=_slim_params(6))
        return {}, [tf.identity(y, name="out")]

    graph, _, _ = freeze_graph(build)
    result = _fuse(graph, in_registry)
    assert _refusals(result) == [] and result.report.fused_count("InstanceNorm") == 1
    (node,) = _nodes(result).values()
    assert node.name == "InstanceNorm/instance_norm" and node.input[0] == "add"
    assert _attrs(node)["data_format"] == data_format
    new_ops = {n.op for n in result.fused_graph_def.node if n.name.startswith("InstanceNorm/")
               and n.name.split("/")[1] in {"scale", "offset", "shape", "channels"}}
    assert helpers <= new_ops
    assert _max_err(graph, result, in_registry) <= FLOAT32_MAX_ABS_ERR


def test_float16_moments_computed_in_float32_are_fused(in_registry):
    """tf.nn.moments casts float16 input to float32 and the moments back; the fused op is T=half."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float16, [2, 4, 5, 3], name="x")
        y = tf_slim.instance_norm(x, param_initializers=_slim_params(7))
        return {}, [tf.identity(y, name="out")]

    graph, _, _ = freeze_graph(build)
    assert sum(n.op == "Cast" for n in graph.node) == 3
    result = _fuse(graph, in_registry)
    (node,) = _nodes(result).values()
    attrs = _attrs(node)
    assert attrs["T"] == 19  # DT_HALF
    assert attrs["epsilon"] == pytest.approx(float(np.float16(1e-6)), rel=1e-6)  # read from the graph
    assert not any(n.op == "Cast" for n in result.fused_graph_def.node)
    assert _max_err(graph, result, in_registry) <= 1e-2  # float16 tolerance


# ------------------------------------------------------ written by hand
def _hand_written(shape, axes, *, scope="inorm", data_format="NHWC", params="vector", epsilon=1e-5):
    """tf.nn.moments(x, axes, keepdims=True) + tf.nn.batch_normalization inside ``scope``."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    channels = shape[1] if data_format == "NCHW" else shape[-1]

    def build():
        x = tf1.placeholder(tf.float32, shape, name="x")
        with tf1.variable_scope(scope):
            mean, variance = tf.nn.moments(x, axes, keepdims=True)
            gamma = beta = None
            if params != "none":
                param_shape = [1, 1, 1, channels] if params == "broadcast" else [channels]
                gamma = tf1.get_variable("gamma", param_shape, initializer=tf1.random_uniform_initializer(0.5, 1.5))
                beta = tf1.get_variable("beta", param_shape, initializer=tf1.random_normal_initializer())
                if params == "reshaped":
                    per_channel = [1] * len(shape)
                    per_channel[1 if data_format == "NCHW" else -1] = channels
                    gamma, beta = tf.reshape(gamma, per_channel), tf.reshape(beta, per_channel)
            y = tf.nn.batch_normalization(x, mean, variance, beta, gamma, epsilon)
        return {}, [tf.identity(y, name="out")]

    graph, _, _ = freeze_graph(build)
    return graph


@pytest.mark.parametrize("axes", [[1, 2], [-3, -2], [2, 1]])
def test_hand_written_moments_over_spatial_axes_are_fused(in_registry, axes):
    graph = _hand_written([2, 4, 5, 3], axes, scope="style/inorm", epsilon=1e-3)
    result = _fuse(graph, in_registry)
    (node,) = _nodes(result).values()
    assert node.name == "style/inorm" and node.input[0] == "x"
    assert _attrs(node) == {"axes": [1, 2], "data_format": "NHWC", "T": 1,
                            "epsilon": pytest.approx(1e-3, rel=1e-6)}
    assert result.report.pass_report(PASS).fused[0].scopes == ["style/inorm/moments", "style/inorm/batchnorm"]
    assert _max_err(graph, result, in_registry) <= FLOAT32_MAX_ABS_ERR


def test_hand_written_nchw_with_params_reshaped_in_the_scope(in_registry):
    graph = _hand_written([2, 3, 4, 5], [2, 3], data_format="NCHW", params="reshaped")
    result = _fuse(graph, in_registry)
    (node,) = _nodes(result).values()
    assert _attrs(node)["data_format"] == "NCHW" and _attrs(node)["axes"] == [2, 3]
    assert node.input[1:] == ["inorm/Reshape/ReadVariableOp", "inorm/Reshape_1/ReadVariableOp"]
    assert _max_err(graph, result, in_registry) <= FLOAT32_MAX_ABS_ERR


def test_hand_written_tf2_function_with_the_moments_as_outputs(in_registry):
    """Traced in TF2; the graph also returns the moments, which become fused outputs 1 and 2."""
    import tensorflow as tf

    def model(x):
        with tf.name_scope("block"):
            with tf.name_scope("norm"):
                mean, variance = tf.nn.moments(x, [1, 2], keepdims=True)
                y = tf.nn.batch_normalization(x, mean, variance, tf.constant([0.1, -0.2, 0.3]),
                                              tf.constant([1.5, 0.5, 2.0]), 1e-4)
            return tf.nn.relu(y), mean, variance

    graph = graph_from_function(model, tf.TensorSpec([2, 6, 6, 3], tf.float32, "x"))
    result = _fuse(graph, in_registry)
    (node,) = _nodes(result).values()
    assert node.name == "block/norm"
    readers = {n.name: list(n.input) for n in result.fused_graph_def.node if n.op == "Identity"}
    assert sorted(readers.values()) == [["block/Relu"], ["block/norm:1"], ["block/norm:2"]]
    assert _max_err(graph, result, in_registry) <= FLOAT32_MAX_ABS_ERR


def test_two_instance_norms_in_one_scope_are_named_by_their_batchnorm_scopes(in_registry):
    import tensorflow as tf

    def model(x):
        with tf.name_scope("block"):
            m, v = tf.nn.moments(x, [1, 2], keepdims=True)
            h = tf.nn.batch_normalization(x, m, v, tf.constant([0.5, 0.0]), tf.constant([2.0, 1.0]), 1e-5)
            t = tf.tanh(h)
            m2, v2 = tf.nn.moments(t, [1, 2], keepdims=True)
            return tf.nn.batch_normalization(t, m2, v2, tf.constant([0.1, 0.2]), tf.constant([1.0, 3.0]), 1e-2)

    graph = graph_from_function(model, tf.TensorSpec([2, 5, 5, 2], tf.float32, "x"))
    result = _fuse(graph, in_registry)
    fused = _nodes(result)
    assert sorted(fused) == ["block/batchnorm", "block/batchnorm_1"]
    assert _attrs(fused["block/batchnorm_1"])["epsilon"] == pytest.approx(1e-2, rel=1e-6)
    assert _max_err(graph, result, in_registry) <= FLOAT32_MAX_ABS_ERR


def test_an_instance_norm_in_a_scope_named_layer_norm_is_fused_as_instance_norm(in_registry):
    """Identified by wiring, not by names: it normalises over H and W, so it is no layer norm."""
    graph = _hand_written([2, 4, 5, 3], [1, 2], scope="LayerNorm")
    result = _fuse(graph, in_registry)
    assert result.report.fused_count("LayerNorm") == 0
    (node,) = _nodes(result).values()
    assert node.name == "LayerNorm"
    assert _max_err(graph, result, in_registry) <= FLOAT32_MAX_ABS_ERR


# ------------------------------------------------------------- refusals
def _adain_graph():
    """Per-instance gamma / beta computed from a style input (adaptive instance norm)."""
    import tensorflow as tf

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 4, 5, 3], name="x")
        style = tf1.placeholder(tf.float32, [2, 3], name="style")
        with tf1.variable_scope("adain"):
            mean, variance = tf.nn.moments(x, [1, 2], keepdims=True)
            gamma = tf.reshape(style, [2, 1, 1, 3])
            beta = tf.reshape(style * 0.5, [2, 1, 1, 3])
            y = tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-5)
        return {}, [tf.identity(y, name="out")]

    return freeze_graph(build)[0]


def _not_batch_normalization_graph():
    """Moments over spatial axes, normalised as (x - mean) * rsqrt(variance + eps)."""
    import tensorflow as tf

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 4, 5, 3], name="x")
        with tf1.variable_scope("norm"):
            mean, variance = tf.nn.moments(x, [1, 2], keepdims=True)
            y = (x - mean) * tf.math.rsqrt(variance + 1e-5)
        return {}, [tf.identity(y, name="out")]

    return freeze_graph(build)[0]


def _slim_rank_2_graph():
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [4, 6], name="x")
        return {}, [tf.identity(tf_slim.instance_norm(x), name="out")]

    return freeze_graph(build)[0]


@pytest.mark.parametrize("build,scope,reason", [
    (lambda: _hand_written([2, 4, 5, 3], [1, 2], params="broadcast"), "inorm",
     "gamma is per channel but has shape [1, 1, 1, 3]; InstanceNorm takes it as [C]"),
    (_adain_graph, "adain", "gamma 'adain/Reshape' is a tensor of rank 4, not a per-channel vector [C]"),
    (_not_batch_normalization_graph, "norm", "x is not multiplied by rsqrt(variance + epsilon)"),
    (_slim_rank_2_graph, "InstanceNorm", "a rank-2 input has no spatial axes"),
], ids=["gamma-1x1x1xC", "adain", "not-batch_normalization", "slim-rank-2"])
def test_what_the_op_cannot_represent_is_refused_with_a_reason(in_registry, build, scope, reason):
    graph = build()
    result = _fuse(graph, in_registry)
    assert result.report.fused == []
    (refusal,) = _refusals(result)
    assert refusal.name == scope and reason in refusal.reason
    assert len(result.graph_def.node) == len(graph.node)


# ------------------------------------------------------------- decoys
def _slim_layer_norms_graph():
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 4, 5, 12], name="x")
        a = tf_slim.layer_norm(x)                                         # axes [1, 2, 3]
        b = tf_slim.layer_norm(tf.reshape(a, [2, 20, 12]), begin_norm_axis=-1)  # axes [2], gamma [12]
        c = tf_slim.layer_norm(b, begin_norm_axis=2, center=False, scale=False)  # axes [2], no params
        d = tf_slim.layer_norm(tf.reshape(c, [2, 4, 5, 12]), begin_norm_axis=2)  # axes [2, 3], gamma [5, 12]
        return {}, [tf.identity(d, name="out")]

    return freeze_graph(build)[0]


def _keras_batch_norms_graph():
    import tensorflow as tf
    import tf_keras

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 4, 5, 3], name="x")
        h = tf_keras.layers.BatchNormalization(fused=False)(x, training=True)  # moments over [0, 1, 2]
        y = tf_keras.layers.BatchNormalization()(h, training=False)           # FusedBatchNormV3
        return {}, [tf.identity(y, name="out")]

    return freeze_graph(build)[0]


@pytest.mark.parametrize("build,moments", [
    (_slim_layer_norms_graph, 4),
    (_keras_batch_norms_graph, 1),
    (lambda: _hand_written([2, 4, 5, 3], [0, 1, 2], scope="bn"), 1),              # a batch norm
    (lambda: _hand_written([2, 4, 5, 3], [1, 2, 3], scope="norm"), 1),            # a layer norm
    (lambda: _hand_written([2, 3, 4, 5], [2, 3], scope="norm", data_format="NCHW", params="none"), 1),
], ids=["slim-layer_norm", "keras-batch_norm", "hand-batch-norm", "hand-layer-norm", "trailing-no-params"])
def test_layer_norms_and_batch_norms_are_not_instance_norms(in_registry, build, moments):
    graph = build()
    result = _fuse(graph, in_registry)
    report = result.report.pass_report(PASS)
    assert len(report.matched_scopes) == moments  # the pass looked at their moments ...
    assert report.fused == [] and report.matches == len(report.refused) == moments  # ... and says why it took none
    assert all(r.reason.startswith("rejected by the pass: not an instance normalization: ") for r in report.refused)
    assert result.report.fused_count("InstanceNorm") == 0
    assert not _nodes(result)


def test_bert_layer_norms_stay_layer_norms(bert_encoder, in_registry):
    result = _fuse(bert_encoder.graph_def, in_registry)
    assert result.report.fused_count("LayerNorm") == 7
    assert result.report.fused_count("InstanceNorm") == 0
    refusals = _refusals(result)
    assert len(refusals) == 7 and all("not an instance normalization" in r.reason for r in refusals)


# ------------------------------------------------------------- enabling
def test_the_pass_runs_only_when_enabled(slim_convnet_nhwc, in_registry):
    assert in_registry.get(PASS).general is False
    result = _fuse(slim_convnet_nhwc, in_registry, enable=None)
    assert PASS not in [p.name for p in result.report.passes]
    assert result.report.fused == [] and not _nodes(result)
    assert len(result.graph_def.node) == len(slim_convnet_nhwc.node)
    enabled = _fuse(slim_convnet_nhwc, in_registry, enable=f" {PASS} ,")
    assert enabled.report.fused_count("InstanceNorm") == 3


# ------------------------------------------------------------- reference
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_reference_implementation_matches_numpy(data_format):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(2.0, 3.0, size=(2, 3, 4, 5)).astype(np.float32)
    channels = x.shape[-1] if data_format == "NHWC" else x.shape[1]
    gamma = rng.uniform(0.5, 1.5, channels).astype(np.float32)
    beta = rng.normal(size=channels).astype(np.float32)
    axes = (1, 2) if data_format == "NHWC" else (2, 3)
    shape = [1, 1, 1, channels] if data_format == "NHWC" else [1, channels, 1, 1]
    mean = x.astype(np.float64).mean(axis=axes, keepdims=True)
    variance = x.astype(np.float64).var(axis=axes, keepdims=True)
    want = (x - mean) / np.sqrt(variance + 1e-3) * gamma.reshape(shape) + beta.reshape(shape)

    y, m, v = instance_norm_reference(tf.constant(x), tf.constant(gamma), tf.constant(beta), epsilon=1e-3,
                                      axes=list(axes), data_format=data_format, T=tf.float32)
    assert y.shape == x.shape and m.shape == mean.shape and v.shape == variance.shape
    assert np.max(np.abs(y.numpy() - want)) <= 1e-4
    assert np.max(np.abs(m.numpy() - mean)) <= 1e-4 and np.max(np.abs(v.numpy() - variance)) <= 1e-3
