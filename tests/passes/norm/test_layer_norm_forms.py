"""ScopeLayerNormPass on every form real code produces, built with the real libraries.

Forms (each fused into LayerNorm and verified numerically against the original):

* tf_slim ``layers.layer_norm`` with reference variables (``use_resource=False``
  or ``disable_resource_variables``) and with resource variables;
* tf_keras ``LayerNormalization``: epsilon < 1.001e-5 (``tf.nn.moments`` +
  ``tf.nn.batch_normalization``) and epsilon >= 1.001e-5 (reshape +
  ``FusedBatchNormV3``), traced and frozen or built in TF1 graph mode;
* Keras 3 ``LayerNormalization`` (moments + flat ops, no ``batchnorm`` scope);
* GPT-2's hand-written ``norm()`` and a ``Sqrt`` / ``RealDiv`` spelling;
* keras-hub ``BertBackbone`` and ``GPT2Backbone``, TF Model Garden ``BertEncoderV2``.

Look-alikes (never fused): Keras 3 and tf_keras ``BatchNormalization`` in
inference, Keras 3 ``RMSNormalization``, tf_slim ``instance_norm`` and ``batch_norm``;
variants the op cannot represent (RMS scaling, no gamma or beta, axes that are not
trailing or not contiguous, epsilon added to the standard deviation, unknown rank) are
refused with a reason.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import pytest

from tests.helpers.freeze import freeze_function, freeze_graph
from tests.helpers.pass_checks import NORMS_APART

import scopefusion
from scopefusion import ScopeGraph
from scopefusion.core.graph.index import GraphIndex
from scopefusion.builtin_passes.scope.layer_norm import analyse
from scopefusion.core.verify.execute import run_graph_def

MAX_ERR = 1e-4


@dataclass
class Built:
    graph_def: object
    feeds: dict = field(default_factory=dict)  # placeholder tensor name -> value (TF1 builds)
    outputs: list = field(default_factory=list)


# --------------------------------------------------------------------------- helpers


def _fuse(graph_def, registry):
    result = scopefusion.fuse(graph_def, emit="tf", registry=registry, fusion_switch_file=NORMS_APART)
    GraphIndex(result.graph_def)
    return result


def _ln_refusals(result) -> list:
    """The layer-norm pass's refusals (graph passes may refuse look-alikes of their own)."""
    return result.report.pass_report("ScopeLayerNormPass").refused


def _fused_nodes(result) -> dict:
    return {n.name: n for n in result.fused_graph_def.node if n.op == "LayerNorm"}


def _assert_fused(result, expected: dict[str, tuple[int, int, float]]) -> None:
    """Exactly these LayerNorm nodes, each with (begin_norm_axis, begin_params_axis, epsilon)."""
    report = result.report
    refusals = [(r.name, r.reason) for r in _ln_refusals(result)]
    nodes = _fused_nodes(result)
    assert sorted(nodes) == sorted(expected), refusals
    assert report.fused_count("LayerNorm") == len(expected)
    assert refusals == []
    for name, (norm_axis, params_axis, epsilon) in expected.items():
        attr = nodes[name].attr
        assert attr["begin_norm_axis"].i == norm_axis, name
        assert attr["begin_params_axis"].i == params_axis, name
        assert attr["epsilon"].f == pytest.approx(epsilon, rel=1e-6), name
        assert attr["T"].type == 1, name
    calls = [n for n in result.graph_def.node
             if n.op == "PartitionedCall" and n.attr["_scopefusion_op"].s == b"LayerNorm"]
    assert len(calls) == len(expected)


def _verify(original, result, registry, **options) -> float:
    check = scopefusion.verify(original, result.fused_graph_def, fused_ops=registry.fused_ops, **options)
    check.assert_ok()
    worst = max(o.max_abs_error for o in check.outputs)
    assert worst <= MAX_ERR
    print(f"max abs err {worst:.3g}")
    return worst


def _assert_not_fused(result, *, matched: bool) -> None:
    """A look-alike: no LayerNorm, nothing fused by the layer-norm pass; ``matched`` says whether
    a pattern found it (then the pass refused it)."""
    report = result.report
    assert report.fused_count("LayerNorm") == 0
    assert not any(n.op == "LayerNorm" for n in result.fused_graph_def.node)
    assert report.pass_report("ScopeLayerNormPass").fused == []
    assert bool(report.pass_report("ScopeLayerNormPass").matched_scopes) == matched


def _randomize(sess, variables, rng) -> None:
    for v in variables:
        shape = v.shape.as_list()
        sess.run(v.assign(rng.uniform(-1.0, 1.0, shape).astype(np.float32)))


def _freeze_tf1(build, seed: int = 0) -> Built:
    """TF1 graph mode: build, initialise, randomise every trainable variable, freeze."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    return Built(*freeze_graph(build, seed,
                               initialize=lambda sess: _randomize(sess, tf.compat.v1.trainable_variables(), rng)))


def _freeze_traced(fn, specs: dict) -> Built:
    """Trace ``fn(**specs)`` and freeze its variables (as SavedModel exports do)."""
    return Built(freeze_function(fn, specs, autograph=False)[0])


def _randomize_keras(layer, seed: int) -> None:
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.uniform(-1.0, 1.0, w.shape).astype(np.float32) for w in layer.get_weights()])


@contextlib.contextmanager
def _tf_slim_batch_norm_shim():
    """tf_slim.batch_norm checks ``isinstance(x, ops.Tensor)``; TF 2.21 dropped that alias."""
    import tensorflow as tf
    from tensorflow.python.framework import ops

    added = not hasattr(ops, "Tensor")
    if added:
        ops.Tensor = tf.Tensor
    try:
        yield
    finally:
        if added:
            del ops.Tensor


# ------------------------------------------------------------------------- tf_slim


def _slim_encoder(variables: str) -> Built:
    """Two tf_slim layer norms: over the last axis and over the last two axes."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(1)

    def build():
        x = tf1.placeholder(tf.float32, [2, 5, 16], name="x")
        with tf1.variable_scope("encoder", use_resource=False if variables == "use_resource=False" else None):
            y = tf_slim.layers.layer_norm(x * 2.0 + 1.0, begin_norm_axis=-1, begin_params_axis=-1)
            w = tf1.get_variable("w", [16, 16])
            h = tf.tanh(tf.einsum("bsh,hk->bsk", y, w))
            z = tf_slim.layers.layer_norm(h, begin_norm_axis=1, begin_params_axis=-2, scope="ln")
        return {x: rng.normal(size=(2, 5, 16)).astype(np.float32)}, [tf.identity(z, name="out")]

    if variables != "disable_resource_variables":
        return _freeze_tf1(build)
    was_enabled = tf1.resource_variables_enabled()
    tf1.disable_resource_variables()
    try:
        return _freeze_tf1(build)
    finally:
        if was_enabled:
            tf1.enable_resource_variables()


SLIM_VARIABLES = ["use_resource=False", "disable_resource_variables", "resource"]


@pytest.fixture(scope="session")
def slim_encoders() -> dict[str, Built]:
    return {v: _slim_encoder(v) for v in SLIM_VARIABLES}


@pytest.mark.parametrize("variables", SLIM_VARIABLES)
def test_tf_slim_layer_norm_reference_and_resource_variables(slim_encoders, registry, variables):
    m = slim_encoders[variables]
    ops = {n.name: n.op for n in m.graph_def.node}
    if variables == "resource":
        assert ops["encoder/LayerNorm/batchnorm/mul/ReadVariableOp"] == "Identity"
    else:  # reference variables: gamma/read lies outside the batchnorm scope
        assert ops["encoder/LayerNorm/gamma/read"] == "Identity"
        assert ops["encoder/LayerNorm/gamma"] == "Const"
        assert not any("ReadVariableOp" in n for n in ops)
    result = _fuse(m.graph_def, registry)
    assert result.report.pass_report("ScopeLayerNormPass").matched_scopes == ["encoder/LayerNorm", "encoder/ln"]
    # tf_slim turns begin_norm_axis=-1 into the positive axis 2 of a rank-3 input
    _assert_fused(result, {"encoder/LayerNorm": (2, -1, 1e-12), "encoder/ln": (1, -2, 1e-12)})
    node = _fused_nodes(result)["encoder/LayerNorm"]
    assert node.input[0] == "encoder/add" and node.input[1].startswith("encoder/LayerNorm/")
    _verify(m.graph_def, result, registry)
    got = run_graph_def(result.graph_def, m.feeds, m.outputs)
    want = run_graph_def(m.graph_def, m.feeds, m.outputs)
    assert float(np.max(np.abs(got[0] - want[0]))) <= MAX_ERR


# ------------------------------------------------------------------------ tf_keras


def _tf_keras_pair(epsilon: float) -> Built:
    """Two tf_keras LayerNormalizations, axis -1 and [1, 2], traced and frozen."""
    import tensorflow as tf

    import tf_keras

    last = tf_keras.layers.LayerNormalization(epsilon=epsilon, name="ln_last")
    both = tf_keras.layers.LayerNormalization(axis=[1, 2], epsilon=epsilon, name="ln_both")
    for i, layer in enumerate((last, both)):
        layer.build((2, 5, 16))
        _randomize_keras(layer, i)

    def call(x):
        return both(tf.tanh(last(x)))

    return _freeze_traced(call, {"x": tf.TensorSpec([2, 5, 16], tf.float32, "x")})


@pytest.fixture(scope="session")
def tf_keras_traced() -> dict[str, Built]:
    return {"moments": _tf_keras_pair(1e-6), "fused_batch_norm": _tf_keras_pair(1e-3)}


def test_tf_keras_small_epsilon_moments_form(tf_keras_traced, registry):
    m = tf_keras_traced["moments"]
    ops = {n.name: n.op for n in m.graph_def.node}
    assert ops["ln_last/moments/SquaredDifference"] == "SquaredDifference"
    assert ops["ln_last/batchnorm/Rsqrt"] == "Rsqrt" and ops["ln_both/Reshape"] == "Reshape"  # gamma -> [1, 5, 16]
    result = _fuse(m.graph_def, registry)
    assert result.report.pass_report("ScopeLayerNormPass").matched_scopes == ["ln_last", "ln_both"]
    _assert_fused(result, {"ln_last": (2, -1, 1e-6), "ln_both": (1, -2, 1e-6)})
    # gamma of ln_both is the [5, 16] weight itself, not its Reshape to [1, 5, 16]
    assert _fused_nodes(result)["ln_both"].input[1] == "ln_both/Reshape/ReadVariableOp"
    _verify(m.graph_def, result, registry)


def test_tf_keras_large_epsilon_fused_batch_norm_form(tf_keras_traced, registry):
    m = tf_keras_traced["fused_batch_norm"]
    fbn = {n.name: n for n in m.graph_def.node if n.op == "FusedBatchNormV3"}
    assert sorted(fbn) == ["ln_both/FusedBatchNormV3", "ln_last/FusedBatchNormV3"]
    assert all(n.attr["is_training"].b and n.attr["data_format"].s == b"NCHW" for n in fbn.values())
    assert not any(n.op in ("Mean", "Rsqrt") for n in m.graph_def.node)
    result = _fuse(m.graph_def, registry)
    _assert_fused(result, {"ln_last": (2, -1, 1e-3), "ln_both": (1, -2, 1e-3)})
    assert not any(n.op == "FusedBatchNormV3" for n in result.fused_graph_def.node)
    # the batch statistics of FusedBatchNormV3 ([pre] rows) are not the op's mean and
    # variance (kept dimensions): no output of the trick is mapped to them
    match = analyse(ScopeGraph(m.graph_def).scope("ln_last"))
    assert match.mean is None and match.variance is None and match.output == "ln_last/add"
    assert "FusedBatchNormV3" in match.description
    _verify(m.graph_def, result, registry)


@pytest.fixture(scope="session")
def tf_keras_tf1_dynamic() -> dict[float, Built]:
    """tf_keras Sequential([Dense, LayerNormalization]) in TF1 graph mode, batch unknown."""
    import tensorflow as tf

    import tf_keras

    tf1 = tf.compat.v1
    out = {}
    for epsilon in (1e-6, 1e-3):
        def build(epsilon=epsilon):
            x = tf1.placeholder(tf.float32, [None, 5, 16], name="x")
            model = tf_keras.Sequential([tf_keras.layers.Dense(16, name="dense"),
                                         tf_keras.layers.LayerNormalization(epsilon=epsilon,
                                                                            name="layer_normalization")],
                                        name="sequential")
            y = model(x)  # a graph output inside the fused scope: it stays fetchable by name
            return {x: np.random.default_rng(2).normal(size=(3, 5, 16)).astype(np.float32)}, [y]

        out[epsilon] = _freeze_tf1(build)
    return out


@pytest.mark.parametrize("epsilon", [1e-6, 1e-3])
def test_tf_keras_tf1_graph_mode_with_unknown_batch(tf_keras_tf1_dynamic, registry, epsilon):
    m = tf_keras_tf1_dynamic[epsilon]
    scope = "sequential/layer_normalization"
    if epsilon == 1e-3:  # the trick reads the input's dynamic shape: Shape(x) must be mapped too
        shape = next(n for n in m.graph_def.node if n.name == f"{scope}/Shape")
        assert shape.op == "Shape" and list(shape.input) == ["sequential/dense/BiasAdd"]
    result = _fuse(m.graph_def, registry)
    _assert_fused(result, {scope: (2, -1, epsilon)})
    assert _fused_nodes(result)[scope].input[0] == "sequential/dense/BiasAdd"
    assert m.outputs == [f"{scope}/{'batchnorm/add_1' if epsilon < 1e-5 else 'add'}:0"]
    _verify(m.graph_def, result, registry, input_shapes="x:3,5,16")
    _verify(m.graph_def, result, registry, feeds=m.feeds)


def test_a_model_scope_holding_one_layer_norm_gives_way_to_the_layer_norm_scope(registry):
    """``sequential`` holds a ReLU and one layer norm: the pattern matches it, the
    result is the layer norm's own scope."""
    import tensorflow as tf

    import tf_keras

    model = tf_keras.Sequential([tf_keras.layers.ReLU(name="re_lu"),
                                 tf_keras.layers.LayerNormalization(epsilon=1e-6, name="layer_normalization")],
                                name="sequential")
    model.build((2, 16))
    _randomize_keras(model.layers[1], 3)
    m = _freeze_traced(lambda x: model(x), {"x": tf.TensorSpec([2, 16], tf.float32, "x")})
    result = _fuse(m.graph_def, registry)
    assert result.report.pass_report("ScopeLayerNormPass").matched_scopes == ["sequential"]
    _assert_fused(result, {"sequential/layer_normalization": (1, -1, 1e-6)})
    assert any(n.op == "Relu" and n.name == "sequential/re_lu/Relu" for n in result.fused_graph_def.node)
    _verify(m.graph_def, result, registry)


# ------------------------------------------------------------------------- Keras 3


def _keras3():
    import keras
    assert keras.backend.backend() == "tensorflow", "the tests set KERAS_BACKEND=tensorflow"
    return keras


@pytest.fixture(scope="session")
def keras3_layer_norms() -> Built:
    import tensorflow as tf

    keras = _keras3()
    last = keras.layers.LayerNormalization(epsilon=1e-5, name="ln_last")
    both = keras.layers.LayerNormalization(axis=[1, 2], epsilon=1e-3, name="ln_both")
    for i, layer in enumerate((last, both)):
        layer.build((2, 5, 16))
        _randomize_keras(layer, 10 + i)
    return _freeze_traced(lambda x: both(tf.tanh(last(x))), {"x": tf.TensorSpec([2, 5, 16], tf.float32, "x")})


def test_keras3_layer_normalization(keras3_layer_norms, registry):
    m = keras3_layer_norms
    nodes = {n.name: n for n in m.graph_def.node}
    # moments, then flat ops in the layer's scope: no batchnorm sub-scope
    assert nodes["ln_last_1/moments/SquaredDifference"].op == "SquaredDifference"
    assert nodes["ln_last_1/Rsqrt"].op == "Rsqrt" and nodes["ln_last_1/Neg"].op == "Neg"
    assert not any("batchnorm" in n or op.op == "FusedBatchNormV3" for n, op in nodes.items())
    result = _fuse(m.graph_def, registry)
    # Keras 3 keeps axis -1 negative; epsilon 1e-3 still uses moments (no fused path)
    _assert_fused(result, {"ln_last_1": (-1, -1, 1e-5), "ln_both_1": (1, -2, 1e-3)})
    assert _fused_nodes(result)["ln_both_1"].input[2] == "ln_both_1/Reshape_1/ReadVariableOp"
    _verify(m.graph_def, result, registry)


@pytest.mark.filterwarnings("ignore:You passed `rms_scaling=True`")
@pytest.mark.parametrize("options,reason", [
    ({"rms_scaling": True}, "does not subtract the mean (RMS-style scaling)"),
    ({"center": False}, "no beta (center=False)"),
    ({"scale": False}, "no gamma (scale=False)"),
    ({"axis": 1}, "reduction axes [1] are not the trailing axes of a rank-3 input"),
    ({"axis": [0, 1]}, "reduction axes [0, 1] are not the trailing axes of a rank-3 input"),
    ({"axis": [0, 2]}, "reduction axes [0, 2] are not contiguous"),
])
def test_keras3_variants_the_op_cannot_represent_are_refused(registry, options, reason):
    import tensorflow as tf

    keras = _keras3()
    layer = keras.layers.LayerNormalization(name="ln", **options)
    layer.build((2, 5, 16))
    m = _freeze_traced(lambda x: layer(x), {"x": tf.TensorSpec([2, 5, 16], tf.float32, "x")})
    result = _fuse(m.graph_def, registry)
    _assert_not_fused(result, matched=True)
    (refusal,) = _ln_refusals(result)
    assert refusal.name == "ln_1" and reason in refusal.reason


# -------------------------------------------------------------------------- GPT-2


def gpt2_norm(x, scope, *, axis=-1, epsilon=1e-5):
    """openai/gpt-2 src/model.py ``norm``: normalize to mean = 0, std = 1, then do a diagonal affine transform."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    with tf1.variable_scope(scope):
        n_state = tf1.dimension_value(x.shape[-1])
        g = tf1.get_variable('g', [n_state], initializer=tf1.constant_initializer(1))
        b = tf1.get_variable('b', [n_state], initializer=tf1.constant_initializer(0))
        u = tf.reduce_mean(x, axis=axis, keepdims=True)
        s = tf.reduce_mean(tf.square(x - u), axis=axis, keepdims=True)
        x = (x - u) * tf1.rsqrt(s + epsilon)
        x = x * g + b
        return x


@pytest.fixture(scope="session")
def gpt2_blocks() -> Built:
    """A GPT-2-shaped model (TF1, reference variables): two blocks with ln_1 / ln_2, then ln_f."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(4)

    def build():
        x = tf1.placeholder(tf.float32, [2, 6, 16], name="x")
        with tf1.variable_scope("model", use_resource=False):
            h = x
            for layer in range(2):
                with tf1.variable_scope(f"h{layer}"):
                    w1 = tf1.get_variable("w1", [16, 16])
                    w2 = tf1.get_variable("w2", [16, 16])
                    h = h + tf.tanh(tf.einsum("bsh,hk->bsk", gpt2_norm(h, "ln_1"), w1))
                    h = h + tf.nn.relu(tf.einsum("bsh,hk->bsk", gpt2_norm(h, "ln_2"), w2))
            h = gpt2_norm(h, "ln_f")
        return {x: rng.normal(size=(2, 6, 16)).astype(np.float32)}, [tf.identity(h, name="out")]

    return _freeze_tf1(build)


def test_gpt2_norm(gpt2_blocks, registry):
    m = gpt2_blocks
    ops = {n.name: n.op for n in m.graph_def.node}
    assert ops["model/h0/ln_1/g/read"] == "Identity" and ops["model/h0/ln_1/Square"] == "Square"
    assert ops["model/h0/ln_1/sub_1"] == "Sub" and "model/h0/ln_1/SquaredDifference" not in ops
    result = _fuse(m.graph_def, registry)
    scopes = ["model/h0/ln_1", "model/h0/ln_2", "model/h1/ln_1", "model/h1/ln_2", "model/ln_f"]
    assert sorted(result.report.pass_report("ScopeLayerNormPass").matched_scopes) == scopes
    _assert_fused(result, {s: (-1, -1, 1e-5) for s in scopes})
    node = _fused_nodes(result)["model/h1/ln_2"]
    assert list(node.input) == ["model/h1/add", "model/h1/ln_2/g/read", "model/h1/ln_2/b/read"]
    _verify(m.graph_def, result, registry)
    _verify(m.graph_def, result, registry, feeds=m.feeds)


def test_sqrt_and_realdiv_spelling(registry):
    """``gamma * (x - mean) / sqrt(var + eps) + beta``, variance as a Square of a Sub."""
    import tensorflow as tf

    gamma = np.linspace(0.5, 1.5, 12).astype(np.float32)
    beta = np.linspace(-0.3, 0.3, 12).astype(np.float32)

    def layer_norm(x):
        with tf.name_scope("block"):
            h = tf.nn.relu(x)
            with tf.name_scope("norm"):
                mean = tf.reduce_mean(h, axis=[-1], keepdims=True)
                var = tf.reduce_mean(tf.square(h - mean), axis=[-1], keepdims=True)
                return tf.constant(gamma) * (h - mean) / tf.sqrt(var + 1e-6) + tf.constant(beta)

    graph = scopefusion.testing.graph_from_function(layer_norm, tf.TensorSpec([3, 4, 12], tf.float32, "x"))
    assert {"Sqrt", "RealDiv"} <= {n.op for n in graph.node}
    result = _fuse(graph, registry)
    _assert_fused(result, {"block/norm": (-1, -1, 1e-6)})
    _verify(graph, result, registry)


def test_hand_written_look_alikes_are_refused_with_a_reason(registry):
    import tensorflow as tf

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, None, name="x")  # unknown rank
        with tf1.variable_scope("model", use_resource=False):
            a = gpt2_norm(tf.reshape(x, [-1, 8]), "ln_ok")
            y = tf.reshape(x, [2, -1, 8])
            with tf1.variable_scope("ln_std"):  # epsilon added to the standard deviation
                u = tf.reduce_mean(y, -1, keepdims=True)
                s = tf.sqrt(tf.reduce_mean(tf.square(y - u), -1, keepdims=True))
                b = (y - u) / (s + 1e-5) * 2.0 + 1.0
            with tf1.variable_scope("ln_rank"):  # axis 1 of an input of unknown rank
                u = tf.reduce_mean(x, 1, keepdims=True)
                s = tf.reduce_mean(tf.square(x - u), 1, keepdims=True)
                c = (x - u) * tf1.rsqrt(s + 1e-5) * tf.ones([8]) + tf.zeros([8])
        return {x: np.ones((2, 8), np.float32)}, [tf.identity(a), tf.identity(b), tf.identity(c)]

    m = _freeze_tf1(build)
    result = _fuse(m.graph_def, registry)
    assert sorted(_fused_nodes(result)) == ["model/ln_ok"]
    reasons = {r.name: r.reason for r in _ln_refusals(result)}
    assert "divides by" in reasons["model/ln_std"]
    assert "epsilon added to the standard deviation" in reasons["model/ln_std"]
    assert "cannot tell the rank of 'x'" in reasons["model/ln_rank"]


# ------------------------------------------------------------- keras-hub, Model Garden


def _int_feeds(specs: dict) -> dict:
    rng = np.random.default_rng(5)
    return {f"{name}:0": rng.integers(0, 2, size=spec.shape).astype(spec.dtype.as_numpy_dtype)
            for name, spec in specs.items()}


@pytest.fixture(scope="session")
def keras_hub_backbones() -> dict[str, Built]:
    import tensorflow as tf

    keras = _keras3()
    import keras_hub
    keras.utils.set_random_seed(0)
    common = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64,
                  max_sequence_length=8, dropout=0.0)
    out = {}
    for name, cls, inputs in (("bert", keras_hub.models.BertBackbone, ("token_ids", "segment_ids", "padding_mask")),
                              ("gpt2", keras_hub.models.GPT2Backbone, ("token_ids", "padding_mask"))):
        backbone = cls(**common, name=f"{name}_backbone")  # explicit: Keras uniquifies default names
        specs = {k: tf.TensorSpec([2, 8], tf.int32, k) for k in inputs}
        out[name] = _freeze_traced(lambda backbone=backbone, **f: backbone(f, training=False), specs)
        out[name].feeds = _int_feeds(specs)
    return out


@pytest.mark.parametrize("name,epsilon", [("bert", 1e-12), ("gpt2", 1e-5)])
def test_keras_hub_backbones(keras_hub_backbones, registry, name, epsilon):
    m = keras_hub_backbones[name]
    result = _fuse(m.graph_def, registry)
    prefix = f"{name}_backbone_1/"
    first = "embeddings_layer_norm_1" if name == "bert" else "layer_norm_1"
    expected = [prefix + first] + [f"{prefix}transformer_layer_{i}_1/{kind}_layer_norm_1"
                                   for i in range(2) for kind in ("self_attention", "feedforward")]
    _assert_fused(result, {s: (-1, -1, epsilon) for s in expected})
    _verify(m.graph_def, result, registry, int_range=(0, 2))
    _verify(m.graph_def, result, registry, feeds=m.feeds)


@pytest.fixture(scope="session")
def model_garden_bert(model_garden_site) -> Built:
    import tensorflow as tf
    import tf_keras
    from official.nlp.modeling import networks
    tf_keras.utils.set_random_seed(0)
    encoder = networks.BertEncoderV2(vocab_size=50, hidden_size=32, num_layers=2, num_attention_heads=2,
                                     max_sequence_length=8, inner_dim=64, type_vocab_size=2, dropout_rate=0.0,
                                     attention_dropout_rate=0.0, name="bert_encoder_v2")
    names = ("input_word_ids", "input_mask", "input_type_ids")
    specs = {k: tf.TensorSpec([None, None], tf.int32, k) for k in names}  # as SavedModels export it

    def call(**inputs):
        out = encoder(inputs, training=False)
        return {"pooled": out["pooled_output"], "sequence": out["sequence_output"]}

    built = _freeze_traced(call, specs)
    built.feeds = _int_feeds({k: tf.TensorSpec([2, 8], tf.int32, k) for k in names})
    return built


def test_model_garden_bert_encoder(model_garden_bert, registry):
    m = model_garden_bert
    result = _fuse(m.graph_def, registry)
    expected = ["bert_encoder_v2/embeddings/layer_norm"] + [
        f"bert_encoder_v2/transformer/layer_{i}/{kind}_layer_norm"
        for i in range(2) for kind in ("self_attention", "output")]
    # tf_keras, epsilon 1e-12: moments form; axis 2 of a rank-3 input (ranks read through Einsum)
    _assert_fused(result, {s: (2, -1, 1e-12) for s in expected})
    shapes = "input_word_ids:2,8;input_mask:2,8;input_type_ids:2,8"
    _verify(m.graph_def, result, registry, int_range=(0, 2), input_shapes=shapes)
    _verify(m.graph_def, result, registry, feeds=m.feeds)


# ----------------------------------------------------------------------- look-alikes


def test_keras3_batch_normalization_in_inference_is_not_fused(registry):
    import tensorflow as tf

    keras = _keras3()
    keras.utils.set_random_seed(1)
    images = keras.Input((8, 8, 3), batch_size=2)
    h = keras.layers.Conv2D(8, 3)(images)
    h = keras.layers.BatchNormalization()(h)
    seq = keras.layers.Reshape((36, 8))(keras.layers.ReLU()(h))
    out = keras.layers.BatchNormalization(epsilon=1e-5)(keras.layers.Dense(16)(seq))  # over the last axis
    model = keras.Model(images, out)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([gamma + 0.5, beta + 0.1, mean + 0.2, var + 1.0])
    m = _freeze_traced(lambda x: model(x, training=False), {"x": tf.TensorSpec([2, 8, 8, 3], tf.float32, "x")})
    scopes = {n.name.rsplit("/", 1)[0] for n in m.graph_def.node if n.op == "Rsqrt"}
    assert len(scopes) == 2 and all(s.endswith("/batchnorm") for s in scopes)  # batchnorm-like, no moments
    assert not any(n.op == "Mean" for n in m.graph_def.node)
    _assert_not_fused(_fuse(m.graph_def, registry), matched=False)


def test_keras3_rms_normalization_is_not_fused(registry):
    import tensorflow as tf

    keras = _keras3()
    layer = keras.layers.RMSNormalization(name="rms")
    layer.build((2, 5, 16))
    _randomize_keras(layer, 7)
    m = _freeze_traced(lambda x: layer(x), {"x": tf.TensorSpec([2, 5, 16], tf.float32, "x")})
    assert any(n.op == "Rsqrt" for n in m.graph_def.node)
    _assert_not_fused(_fuse(m.graph_def, registry), matched=False)


@pytest.mark.parametrize("fused", [True, False])
def test_tf_keras_batch_normalization_in_inference_is_not_fused(registry, fused):
    import tensorflow as tf

    import tf_keras

    layer = tf_keras.layers.BatchNormalization(fused=fused, name="bn")
    layer.build((2, 4, 4, 8))
    _randomize_keras(layer, 6)
    layer.set_weights([*layer.get_weights()[:3], np.abs(layer.get_weights()[3]) + 0.5])
    m = _freeze_traced(lambda x: layer(x, training=False), {"x": tf.TensorSpec([2, 4, 4, 8], tf.float32, "x")})
    ops = [n.op for n in m.graph_def.node]
    assert ("FusedBatchNormV3" in ops) == fused and ("Rsqrt" in ops) != fused
    _assert_not_fused(_fuse(m.graph_def, registry), matched=False)


@pytest.fixture(scope="session")
def slim_look_alikes() -> Built:
    """tf_slim instance_norm (NHWC and NCHW) and batch_norm (inference fused and not, training)."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 4, 4, 8], name="x")
        y = tf_slim.instance_norm(x, epsilon=1e-6)
        z = tf_slim.instance_norm(tf.transpose(y, [0, 3, 1, 2]), data_format="NCHW")
        outs = [z]
        with _tf_slim_batch_norm_shim():
            for fused in (True, False):
                outs.append(tf_slim.batch_norm(y, is_training=False, scale=True, fused=fused,
                                               updates_collections=None))
            outs.append(tf_slim.batch_norm(y, is_training=True, scale=True, fused=False, updates_collections=None))
        return {x: np.ones((2, 4, 4, 8), np.float32)}, [tf.identity(o) for o in outs]

    built = _freeze_tf1(build)
    # The training batch norm updates its moving averages in place (updates_collections=None: the
    # output waits on the assignments); frozen, those assign to constants, a graph TensorFlow refuses
    # to import. An inference graph has no such updates: drop them and the output's waits on them.
    updates = {n.name for n in built.graph_def.node if "/AssignMovingAvg" in n.name}
    kept = [n for n in built.graph_def.node if n.name not in updates]
    for n in kept:
        n.input[:] = [i for i in n.input if i.lstrip("^").split(":")[0] not in updates]
    del built.graph_def.node[:]
    built.graph_def.node.extend(kept)
    return built


def test_tf_slim_instance_norm_and_batch_norm_are_not_fused(slim_look_alikes, registry):
    m = slim_look_alikes
    nodes = {n.name: n for n in m.graph_def.node}
    assert nodes["InstanceNorm/instancenorm/Rsqrt"].op == "Rsqrt"  # moments over H, W
    assert nodes["InstanceNorm_1/moments/mean"].op == "Mean"  # NCHW: over the last axes
    assert nodes["BatchNorm/FusedBatchNormV3"].attr["is_training"].b is False
    assert nodes["BatchNorm_1/batchnorm/Rsqrt"].op == "Rsqrt"
    assert nodes["BatchNorm_2/moments/mean"].op == "Mean"  # training: moments over [0, 1, 2]
    # the instance norms name their batch normalization "instancenorm" and the inference batch norms
    # have no moments: no candidates; the training one (moments and batchnorm, its updates dropped) is
    # a candidate the analysis refuses: its variance is squeezed from moments over [0, 1, 2]
    result = _fuse(m.graph_def, registry)
    _assert_not_fused(result, matched=True)
    assert result.report.pass_report("ScopeLayerNormPass").matched_scopes == ["BatchNorm_2"]
    assert [r.scopes for r in _ln_refusals(result)] == [["BatchNorm_2"]]
