"""ConvBatchnormFusionPass on the convolution + batch norm forms real code produces (built
by ``conv_models``, frozen, random weights and batch-norm statistics).

Folded into the convolution with new weights plus a ``BiasAdd``, stock TensorFlow ops
only, and verified numerically against the original:

* tf_keras ``BatchNormalization`` (``FusedBatchNormV3``) and Keras 3's
  (``tf.nn.batch_normalization`` as ``Rsqrt``/``Mul``/``Sub``/``AddV2``) after ``Conv2D``
  with and without a bias and after ``DepthwiseConv2D`` (multiplier 2), NHWC and NCHW,
  gamma and beta on and off; tf_keras under ``mixed_float16``; after ``Conv1D`` (a
  squeezed ``Conv2D``; dilated, Keras 3 adds ``BatchToSpaceND``);
* tf_slim ``conv2d`` / ``separable_conv2d`` with ``normalizer_fn=batch_norm``, fused and
  not, NHWC and NCHW;
* Keras applications ``MobileNetV2`` (alpha 0.35, 32x32) under Keras 3 and tf_keras:
  52 pairs each;
* ``tf.nn.conv2d`` + ``tf.compat.v1.nn.fused_batch_norm`` outside any scope.

Refused with the reason: training graphs (tf_slim ``is_training=True``, fused and not),
a statistics output read, a convolution read elsewhere, batch norms along another
axis than the convolution's channels (and Keras 3's bias added along W), a negative
variance, tf_slim's instance norm. Not matched: a batch norm after ``Dense``.

Tolerances: float32 outputs are compared with ``rtol=1e-4`` and ``atol = 1e-5 x`` the
largest output magnitude. The folded convolution rounds the same products in another
order (``conv(x, w * s)`` against ``conv(x, w) * s``), so an element can differ by a few
float32 units in the last place (6e-8 relative) of the largest partial sums, which are
of the order of the largest output; near zero the relative error of such an element is
meaningless, hence the absolute floor. 1e-5 x scale is about 100 such units; measured
errors are below 1e-6 x scale, also through the 52 folded layers of MobileNetV2.
float16 models use ``verify``'s float16 defaults (1e-2).
"""
from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest

from tests.models import activation_models as am
from tests.models import conv_models as cm
from tests.helpers.verify import assert_verifies
import scopefusion
from scopefusion.builtin_passes.graph.conv_batchnorm import ConvBatchnormFusionPass

REGISTRY = scopefusion.load_registry(autoload=False)  # built-ins only
PASS = "ConvBatchnormFusionPass"
#: Only this graph pass runs (both sections), so that what is counted is its work alone.
ALONE = scopefusion.FusionSwitch.from_text(f"ALL:off\n{PASS}:on\n", "conv-batchnorm-alone")
MODELS = {**cm.FOLD_FORMS, **cm.REFUSED_FORMS, **cm.LOOK_ALIKES}
#: The relative size of the absolute tolerance (see the module docstring).
ATOL_PER_SCALE = 1e-5


@functools.cache
def model(key: str) -> cm.ConvModel:
    return MODELS[key]()


def fuse_alone(graph_def):
    return scopefusion.fuse(graph_def, registry=REGISTRY, fusion_switch_file=ALONE)


@functools.cache
def fused(key: str):
    return fuse_alone(model(key).graph_def)


@pytest.fixture(scope="module")
def tf_keras_mobilenet_v2() -> cm.ConvModel:
    return cm.tf_keras_mobilenet_v2(seed=0)


@pytest.fixture(scope="module")
def mobilenet_v2(request) -> cm.ConvModel:
    if request.param == "keras":  # the corpus' own build (conftest), shared with its tests
        return cm.keras_applications_mobilenet_v2(request.getfixturevalue("keras_mobilenet_v2"))
    return request.getfixturevalue("tf_keras_mobilenet_v2")


def pass_report(result):
    names = [p.name for p in result.report.passes]
    assert PASS in names, f"{PASS} did not run (passes: {names})"
    return result.report.pass_report(PASS)


def ops(graph_def) -> Counter:
    return Counter(n.op for n in graph_def.node)


def batch_norm_count(graph_def) -> int:
    """Batch norms in either form: FusedBatchNorm* nodes, or tf.nn.batch_normalization's Rsqrt."""
    counts = ops(graph_def)
    return sum(counts[op] for op in cm.FUSED_BATCH_NORMS) + counts["Rsqrt"]


def tolerances(m: cm.ConvModel) -> dict[str, float]:
    """The verify tolerances of a model: float16 verify's own, float32 an absolute tolerance scaled by
    the largest output (see the module docstring)."""
    if m.float16:
        return {}  # verify's float16 defaults
    scale = max(float(np.nanmax(np.abs(o))) for o in am.run(m))
    return {"rtol": 1e-4, "atol": ATOL_PER_SCALE * scale}


def original_conv(original, new_conv):
    """The convolution of the original graph a new one replaces: the same name, or (when the
    convolution and its batch norm share no scope) the one under the batch norm named
    by the new node's scope."""
    nodes = {n.name: n for n in original.node}
    if new_conv.name in nodes:
        return nodes[new_conv.name]
    node = nodes[new_conv.name.rsplit("/", 1)[0]]
    while node.op not in cm.CONVOLUTIONS:
        node = nodes[node.input[0].split(":")[0]]
    return node


def const_value(node) -> np.ndarray:
    from tensorflow.python.framework import tensor_util

    return tensor_util.MakeNdarray(node.attr["value"].tensor)


def attrs_of(node) -> dict:
    return {k: v for k, v in node.attr.items() if not k.startswith("_")}


def assert_folded_nodes(m: cm.ConvModel, result) -> None:
    """Each fold is a convolution with the original's attributes reading a new constant
    filter, then a BiasAdd of a new [C] constant in the convolution's data format; the
    original filter constant is gone."""
    graph = result.fused_graph_def
    nodes = {n.name: n for n in graph.node}
    originals = {n.name: n for n in m.graph_def.node}
    readers = Counter(i.split(":")[0] for n in graph.node for i in n.input)
    new_convs = [n for n in graph.node if n.op in cm.CONVOLUTIONS and n.input[1].endswith("/folded_filter")]
    assert len(new_convs) == m.folds
    for conv in new_convs:
        before = original_conv(m.graph_def, conv)
        assert conv.op == before.op and attrs_of(conv) == attrs_of(before), conv.name
        assert conv.input[0] == before.input[0], conv.name  # upstream outputs keep their names
        assert nodes[conv.input[1]].op == "Const"
        old_filter = before.input[1].split(":")[0]
        while originals[old_filter].op != "Const":
            old_filter = originals[old_filter].input[0].split(":")[0]
        assert old_filter not in nodes, f"{old_filter} (the unfolded filter) is still in the graph"
        output = conv.name  # a 1-D convolution's output is squeezed back (and dilated) before the BiasAdd
        views = [n for n in graph.node if n.op in ("Squeeze", "BatchToSpaceND") and n.input[0] == output]
        while views:
            output = views[0].name
            views = [n for n in graph.node if n.op in ("Squeeze", "BatchToSpaceND") and n.input[0] == output]
        (bias_add,) = [n for n in graph.node if n.op == "BiasAdd" and n.input[0] == output]
        data_format = conv.attr["data_format"].s if "data_format" in conv.attr else b"NHWC"
        assert bias_add.attr["data_format"].s == data_format and bias_add.attr["T"] == conv.attr["T"]
        bias = nodes[bias_add.input[1]]
        filter_shape = [d.size for d in nodes[conv.input[1]].attr["value"].tensor.tensor_shape.dim]
        assert [d.size for d in bias.attr["value"].tensor.tensor_shape.dim] == [
            filter_shape[2] * filter_shape[3] if conv.op == "DepthwiseConv2dNative" else filter_shape[3]]
        assert readers[conv.name] == 1, f"{conv.name} feeds more than its BiasAdd"


# ------------------------------------------------------------------ the builders


@pytest.mark.parametrize("key", list(MODELS))
def test_builder_makes_its_form(key):
    """The builder's graph holds the ops of its form and runs in plain TensorFlow."""
    m = model(key)
    counts = ops(m.graph_def)
    assert set(m.signature) <= set(counts), sorted(set(m.signature) - set(counts))
    if m.pairs:
        assert batch_norm_count(m.graph_def) == m.pairs
        assert (counts["Rsqrt"] > 0) == m.decomposed
    outputs = am.run(m)
    assert outputs and all(np.all(np.isfinite(o)) for o in outputs if "negative_variance" not in key)


# ------------------------------------------------------------------ folds


@pytest.mark.parametrize("key", list(cm.FOLD_FORMS))
def test_conv_batch_norm_is_folded(key):
    m = model(key)
    result = fused(key)
    report = pass_report(result)
    assert report.match_times == m.folds, [r.reason for r in report.refused]
    assert len(report.fused) == m.folds and report.refused == []
    assert result.report.fused_count("DepthwiseConv2dNative") == m.depthwise_folds
    assert result.report.fused_count("Conv2D") == m.folds - m.depthwise_folds
    graph = result.fused_graph_def
    # the folded batch norms are gone (the others stay); every convolution is still there
    assert batch_norm_count(graph) == m.pairs - m.folds
    assert sum(ops(graph)[op] for op in cm.CONVOLUTIONS) == sum(ops(m.graph_def)[op] for op in cm.CONVOLUTIONS)
    assert_folded_nodes(m, result)
    assert_verifies(m, result, **tolerances(m))


@pytest.mark.parametrize("mobilenet_v2", ["keras", "tf_keras"], indirect=True)
def test_mobilenet_v2_every_batch_norm_is_folded(mobilenet_v2):
    m = mobilenet_v2
    # every batch norm of the architecture follows a convolution: 35 Conv2D, 17 DepthwiseConv2D
    assert (m.pairs, m.folds, m.depthwise_folds) == (52, 52, 17)
    result = fuse_alone(m.graph_def)
    report = pass_report(result)
    assert report.match_times == len(report.fused) == 52 and report.refused == []
    assert result.report.fused_count("Conv2D") == m.folds - m.depthwise_folds
    assert result.report.fused_count("DepthwiseConv2dNative") == m.depthwise_folds
    assert batch_norm_count(result.fused_graph_def) == 0
    assert_folded_nodes(m, result)
    assert_verifies(m, result, **tolerances(m))


def test_names_are_kept_where_conv_and_batch_norm_share_a_scope():
    """tf_slim: the convolution and the BiasAdd take the names of the convolution and of
    the batch norm's output; readers are untouched."""
    result = fused("tf_slim[fused,NHWC]")
    nodes = {n.name: n for n in result.fused_graph_def.node}
    assert nodes["conv/Conv2D"].op == "Conv2D" and nodes["dw/depthwise"].op == "DepthwiseConv2dNative"
    assert nodes["conv/BatchNorm/FusedBatchNormV3"].op == "BiasAdd"
    assert nodes["conv/BatchNorm/FusedBatchNormV3"].input[:2] == ["conv/Conv2D",
                                                                  "conv/BatchNorm/FusedBatchNormV3/folded_bias"]
    assert nodes["conv/Relu"].input == ["conv/BatchNorm/FusedBatchNormV3"]
    originals = {n.name: n for n in model("tf_slim[fused,NHWC]").graph_def.node}
    for name in ("head/Conv2D", "head/BiasAdd"):  # no batch norm: untouched
        assert nodes[name] == originals[name]


def test_unscoped_nodes_go_under_the_batch_norms_name():
    """``Conv2D`` and ``FusedBatchNormV3`` share no scope: the new nodes lie under the batch
    norm's name, and the graph output keeps its name through an Identity."""
    m = model("tf_nn_fused_batch_norm")
    result = fused("tf_nn_fused_batch_norm")
    nodes = {n.name: n for n in result.fused_graph_def.node}
    assert [nodes[f"FusedBatchNormV3/{k}"].op for k in ("convolution", "bias_add")] == ["Conv2D", "BiasAdd"]
    assert "Conv2D" not in nodes
    assert all(o.split(":")[0] in nodes for o in m.outputs)
    assert_verifies(m, result, **tolerances(m))


def test_folded_values_are_the_batch_norm_applied_to_the_filter():
    """The new filter and bias of the unscoped model, from its own constants."""
    m = model("tf_nn_fused_batch_norm")
    originals = {n.name: n for n in m.graph_def.node}
    bn = next(n for n in m.graph_def.node if n.op == "FusedBatchNormV3")

    def value(name):
        node = originals[name.split(":")[0]]
        while node.op != "Const":
            node = originals[node.input[0].split(":")[0]]
        return const_value(node)

    w = value(originals[bn.input[0]].input[1])
    gamma, beta, mean, variance = (value(bn.input[k]) for k in range(1, 5))
    scale = gamma / np.sqrt(variance + bn.attr["epsilon"].f)
    nodes = {n.name: n for n in fused("tf_nn_fused_batch_norm").fused_graph_def.node}
    np.testing.assert_allclose(const_value(nodes["FusedBatchNormV3/convolution/folded_filter"]), w * scale,
                               rtol=1e-6)
    np.testing.assert_allclose(const_value(nodes["FusedBatchNormV3/bias_add/folded_bias"]), beta - mean * scale,
                               rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ refusals and look-alikes


@pytest.mark.parametrize("key", list(cm.REFUSED_FORMS))
def test_refused_with_the_reason(key):
    m = model(key)
    result = fused(key)
    report = pass_report(result)
    assert report.fused == []
    assert report.match_times == len(report.refused) == m.refusals
    assert all(m.reason in r.reason for r in report.refused), [r.reason for r in report.refused]
    assert batch_norm_count(result.fused_graph_def) == batch_norm_count(m.graph_def)
    after = {n.name: n for n in result.fused_graph_def.node}
    for conv in (n for n in m.graph_def.node if n.op in cm.CONVOLUTIONS):
        assert after.get(conv.name) == conv, f"{conv.name} changed"
    assert_verifies(m, result, **tolerances(m))


@pytest.mark.parametrize("key", list(cm.LOOK_ALIKES))
def test_batch_norm_after_dense_is_not_matched(key):
    m = model(key)
    result = fused(key)
    report = pass_report(result)
    assert report.match_times == 0 and report.fused == [] and report.refused == []
    assert batch_norm_count(result.fused_graph_def) == batch_norm_count(m.graph_def) == 1


def test_training_mode_reasons_name_the_cause():
    (fused_reason, _) = [r.reason for r in pass_report(fused("tf_slim[fused,training]")).refused]
    assert "'conv/BatchNorm/FusedBatchNormV3' is a batch norm in training mode (is_training=True)" in fused_reason
    (ops_reason, _) = [r.reason for r in pass_report(fused("tf_slim[ops,training]")).refused]
    assert "the batch norm's mean 'conv/BatchNorm/moments/Squeeze' is not a constant" in ops_reason


def test_the_pass_is_not_training_safe():
    assert ConvBatchnormFusionPass.training_safe is False
    assert "training_safe = False" in ConvBatchnormFusionPass.__doc__


def test_a_squeeze_of_the_channel_axis_is_refused():
    """A convolution of one output channel squeezed along its channels too ([1, 3]) then normalized
    along its width: the statistics are no longer per channel, and the pass says why."""
    import tensorflow as tf

    from scopefusion.testing import graph_from_function

    rng = np.random.default_rng(0)
    w = rng.normal(size=(1, 3, 3, 1)).astype(np.float32)
    mean = tf.Variable(rng.normal(size=8).astype(np.float32))  # variables: frozen, read through Identity
    variance = tf.Variable(rng.uniform(0.5, 1.5, 8).astype(np.float32))

    def fn(x):
        y = tf.squeeze(tf.nn.conv2d(x, w, 1, "SAME"), [1, 3])
        return tf.nn.batch_normalization(y, mean, variance, None, None, 1e-3)

    graph_def = graph_from_function(fn, tf.TensorSpec([2, 1, 8, 3], tf.float32, "x"))
    result = fuse_alone(graph_def)
    report = pass_report(result)
    assert report.fused == [] and len(report.refused) == 1
    assert "along [1, 3] of NHWC data: only spatial axes of NHWC data are squeezed" in report.refused[0].reason
