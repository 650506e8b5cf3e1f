"""Layer norms in half and bfloat16, as real code builds them.

* Keras 3 ``LayerNormalization`` under a ``float16``/``bfloat16`` or mixed dtype policy, and
  tf_keras under ``mixed_float16``, compute in float32 between two casts::

      Cast(x -> float32), moments, ..., add_2 (float32), Cast_3 (-> half)   <- read outside

  The scope becomes a float32 ``LayerNorm`` followed by the same ``Cast`` (under its own name); the
  up-cast stays as the LayerNorm's input. Numerics do not change.
* ``tf.nn.moments`` on float16 input (tf_keras and tf_slim layer norms in float16) computes the
  statistics in float32 and casts them back: the scope becomes a float16 ``LayerNorm`` whose mean
  and variance outputs are the float16 casts.
* bfloat16 without casts (tf_keras in bfloat16): a bfloat16 ``LayerNorm``; its epsilon constant is
  bfloat16 too.

Verification uses the tolerances of the graphs' output dtypes (1e-2 for half and bfloat16).
"""
from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.freeze import freeze_function, freeze_graph

import scopefusion
from scopefusion.core.graph.index import GraphIndex
from scopefusion.testing import graph_from_function

DT_FLOAT, DT_BFLOAT16, DT_HALF = 1, 14, 19
SHAPE = [2, 4, 8]


def _freeze(fn, dtype):
    import tensorflow as tf

    return graph_from_function(fn, tf.TensorSpec(SHAPE, dtype, name="x"))


def _random_gamma_beta(layer, numpy_dtype, seed=0):
    """gamma 1 and beta 0 would hide a swapped or dropped parameter."""
    rng = np.random.default_rng(seed)
    layer.gamma.assign((1.0 + 0.5 * rng.standard_normal(SHAPE[-1])).astype(numpy_dtype))
    layer.beta.assign((0.5 * rng.standard_normal(SHAPE[-1])).astype(numpy_dtype))


def _keras3_layer_norm(policy: str):
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        layer = keras.layers.LayerNormalization(epsilon=1e-6, name="ln")
        layer.build(SHAPE)
        _random_gamma_beta(layer, "float32")  # Keras casts to the variable's dtype
        return _freeze(lambda x: layer(x), keras.config.dtype_policy().compute_dtype)
    finally:
        keras.config.set_dtype_policy(previous)


def _tf_keras_layer_norm(policy: str, epsilon: float = 1e-6):
    import tf_keras

    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
        layer = tf_keras.layers.LayerNormalization(epsilon=epsilon, name="ln")
        layer.build(SHAPE)
        _random_gamma_beta(layer, layer.gamma.dtype.as_numpy_dtype)
        return _freeze(lambda x: layer(x), tf_keras.mixed_precision.global_policy().compute_dtype)
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)


def _fuse_and_verify(graph_def, registry):
    result = scopefusion.fuse(graph_def, registry=registry)
    GraphIndex(result.graph_def)
    assert result.report.pass_report("ScopeLayerNormPass").refused == []
    check = scopefusion.verify(graph_def, result.graph_def, fused_ops=registry.fused_ops, runs=3)
    check.assert_ok()
    return result, check


def _only(result, op):
    nodes = [n for n in result.graph_def.node if n.op == op]
    assert len(nodes) == 1, [n.name for n in nodes]
    return nodes[0]


@pytest.mark.parametrize("policy,low", [
    ("mixed_float16", DT_HALF), ("float16", DT_HALF), ("mixed_bfloat16", DT_BFLOAT16), ("bfloat16", DT_BFLOAT16),
])
def test_keras3_layer_norm_under_a_low_precision_policy(registry, policy, low):
    import tensorflow as tf

    graph = _keras3_layer_norm(policy)
    casts = {n.name: n for n in graph.node if n.op == "Cast"}
    down = [n for n in casts.values() if n.attr["DstT"].type == low and n.attr["SrcT"].type == DT_FLOAT]
    (out_cast,) = [n for n in down if any(i.split(":")[0] == n.name for m in graph.node
                                          if m.name == "Identity" for i in m.input)]
    result, check = _fuse_and_verify(graph, registry)
    assert result.report.fused_count("LayerNorm") == 1
    ln = _only(result, "LayerNorm")
    assert ln.attr["T"].type == DT_FLOAT  # computed in float32, as the layer does
    assert ln.attr["epsilon"].f == pytest.approx(1e-6)
    assert (ln.attr["begin_norm_axis"].i, ln.attr["begin_params_axis"].i) == (-1, -1)
    after = {n.name: n for n in result.graph_def.node}
    # the same Cast, under its own name, reads the LayerNorm; the up-cast feeds it
    cast = after[out_cast.name]
    assert cast.op == "Cast" and list(cast.input) == [ln.name]
    assert cast.attr["DstT"].type == low
    assert after[ln.input[0]].op == "Cast" and after[ln.input[0]].attr["SrcT"].type == low
    assert check.outputs[0].dtype == tf.as_dtype(low).name
    assert check.outputs[0].max_abs_error == 0.0  # same float32 arithmetic, same final rounding


def test_tf_keras_mixed_float16_moments_path(registry):
    result, check = _fuse_and_verify(_tf_keras_layer_norm("mixed_float16"), registry)
    ln = _only(result, "LayerNorm")
    assert ln.attr["T"].type == DT_FLOAT and ln.attr["epsilon"].f == pytest.approx(1e-6)
    casts = {n.name: n for n in result.graph_def.node if n.op == "Cast"}
    assert sorted((c.attr["SrcT"].type, c.attr["DstT"].type) for c in casts.values()) == [
        (DT_FLOAT, DT_HALF), (DT_HALF, DT_FLOAT)]  # the two casts of the layer, and no other
    assert casts[ln.input[0]].attr["SrcT"].type == DT_HALF
    assert check.outputs[0].max_abs_error == 0.0


@pytest.mark.parametrize("dtype,T,epsilon", [
    ("float16", DT_HALF, float(np.float16(1e-6))),
    ("bfloat16", DT_BFLOAT16, 9.98377799987793e-07),  # 1e-6 in bfloat16
])
def test_tf_keras_layer_norm_in_half_and_bfloat16(registry, dtype, T, epsilon):
    """float16: tf.nn.moments computes the statistics in float32 and casts them back;
    bfloat16: no casts at all, and a bfloat16 epsilon constant."""
    graph = _tf_keras_layer_norm(dtype)
    ops = [n.op for n in graph.node]
    assert ops.count("Cast") == (3 if dtype == "float16" else 0)
    result, check = _fuse_and_verify(graph, registry)
    ln = _only(result, "LayerNorm")
    assert ln.attr["T"].type == T
    assert ln.attr["epsilon"].f == pytest.approx(epsilon, rel=1e-6)
    assert ln.input[0] == "x"  # the half / bfloat16 input itself
    assert not any(n.op == "Cast" for n in result.graph_def.node)
    assert check.outputs[0].max_abs_error <= 2e-2


def test_tf_slim_layer_norm_in_float16(registry):
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float16, SHAPE, name="x")
        return {}, [tf_slim.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1)]

    def randomize(sess):
        rng = np.random.default_rng(3)
        for v in tf1.trainable_variables():
            sess.run(v.assign(rng.uniform(-1, 1, v.shape.as_list()).astype(np.float16)))

    frozen, _, _ = freeze_graph(build, initialize=randomize)
    result, _ = _fuse_and_verify(frozen, registry)
    ln = _only(result, "LayerNorm")
    assert ln.name == "LayerNorm" and ln.attr["T"].type == DT_HALF
    assert ln.attr["epsilon"].f == pytest.approx(float(np.float16(1e-3)))  # tf_slim's float16 epsilon


def test_keras_hub_backbone_under_mixed_precision(registry):
    import keras
    import keras_hub
    import tensorflow as tf

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(0)
        backbone = keras_hub.models.GPT2Backbone(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=32,
                                                 intermediate_dim=64, max_sequence_length=8, dropout=0.0,
                                                 name="gpt2_backbone")
        specs = {k: tf.TensorSpec([2, 8], tf.int32, k) for k in ("token_ids", "padding_mask")}
        graph = freeze_function(lambda **f: backbone(f, training=False), specs, autograph=False)[0]
    finally:
        keras.config.set_dtype_policy(previous)
    result = scopefusion.fuse(graph, registry=registry)
    assert result.report.pass_report("ScopeLayerNormPass").refused == []
    assert result.report.fused_count("LayerNorm") == 5  # two per block and the final one
    assert sum(n.op == "LayerNorm" and n.attr["T"].type == DT_FLOAT for n in result.graph_def.node) == 5
    check = scopefusion.verify(graph, result.graph_def, fused_ops=registry.fused_ops, int_range=(0, 2), runs=2)
    check.assert_ok()


def test_the_down_cast_may_be_a_graph_output(registry):
    """The re-created Cast keeps its name, so a graph output naming it needs no alias."""
    graph = _keras3_layer_norm("mixed_float16")
    reader = next(n for n in graph.node if n.name == "Identity")
    cast = reader.input[0]
    assert next(n for n in graph.node if n.name == cast).op == "Cast"
    result = scopefusion.fuse(graph, registry=registry, outputs=["Identity", cast])
    assert result.report.pass_report("ScopeLayerNormPass").refused == [] and result.report.fused_count("LayerNorm") == 1
    check = scopefusion.verify(graph, result.graph_def, fused_ops=registry.fused_ops,
                               outputs=["Identity:0", f"{cast}:0"])
    check.assert_ok()
    assert [o.name for o in check.outputs] == ["Identity:0", f"{cast}:0"]
