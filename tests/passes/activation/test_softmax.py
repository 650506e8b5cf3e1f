"""SoftmaxFusionPass on the softmaxes real code writes out as ops (built by
``softmax_models``, frozen, random inputs).

Fused into TensorFlow's own ``Softmax`` op each (no declaration needed: a stock op) and
verified numerically against the original:

* openai GPT-2's ``softmax()`` in its masked multi-head attention (``x - max``, ``exp``,
  ``/ sum``), also on float16;
* tf_keras ``activations.softmax`` over a tuple of axes (``(-1,)``, ``(2,)`` of a rank-3
  tensor), which ``backend.softmax`` writes out the same way;
* the formula TensorFlow's documentation gives, without the maximum (``exp`` twice).

Accepted without the maximum: softmax is unchanged by a shift along its axis, so the
forms agree to rounding wherever the original is finite, and where its ``exp``
overflows the stock op (which subtracts the maximum itself) still gives the right
answer (``test_without_the_max_the_stock_op_is_right_where_the_original_overflows``).

Refused with the reason: another axis than the last, several axes, the maximum over a
different axis than the sum, an input of unknown rank with a positive axis, complex
numbers, an exponential read elsewhere too.  Not
matched: Keras 3's multi-axis ``Softmax`` (exp minus log-sum-exp), ``tf.nn.softmax``
itself, a masked exponential, a sum plus epsilon, a sum without ``keepdims``.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.models import softmax_models as sm
from tests.helpers.pass_checks import REGISTRY, assert_builds, op_count, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion

PASS = "SoftmaxFusionPass"
#: the softmax pass alone: the attention pass would take an attention block's softmax into its fused op
NO_ATTENTION = scopefusion.FusionSwitch.from_text("AttentionFusionPass:off")
MODELS = {**sm.SOFTMAX_FORMS, **sm.SOFTMAX_REFUSALS, **sm.SOFTMAX_LOOK_ALIKES}
DECOMPOSED = ("Max", "Exp", "Sum", "RealDiv")


@functools.cache
def model(key: str) -> sm.PassModel:
    return MODELS[key]()


@pytest.mark.parametrize("key", list(MODELS))
def test_builder_makes_its_form(key):
    """The builder's graph holds the ops of its form and runs in plain TensorFlow."""
    assert_builds(model(key))


@pytest.mark.parametrize("key", list(sm.SOFTMAX_FORMS))
def test_softmax_form_is_fused(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=NO_ATTENTION)
    fused = result.fused_graph_def
    softmaxes = [n for n in fused.node if n.op == "Softmax"]
    report = pass_report(result, PASS)
    assert op_count(m.graph_def, "Softmax") == 0
    assert len(softmaxes) == len(report.fused) == m.expected, [r.reason for r in report.refused]
    assert report.refused == []
    for node in softmaxes:
        assert node.attr["T"].type == m.attrs.get("T", 1), node.name
        assert len([i for i in node.input if not i.startswith("^")]) == 1, node.name
    # every Exp, Max, Sum and RealDiv of the models belonged to a softmax
    assert op_count(fused, *DECOMPOSED) == 0
    assert_verifies(m, result)


@pytest.mark.parametrize("key", list(sm.SOFTMAX_REFUSALS))
def test_softmax_the_stock_op_cannot_be_is_refused_with_the_reason(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    report = pass_report(result, PASS)
    assert op_count(result.fused_graph_def, "Softmax") == 0 and report.fused == []
    (refusal,) = report.refused
    wanted = {
        "axis_1": "a softmax over axis 1 of a rank-3 tensor: the stock Softmax normalizes over the last axis (2) only",
        "tf_keras_axis_1": "a softmax over axis 1 of a rank-3 tensor",
        "tf_keras_axes_1_2": "a softmax over axes [1, 2] of a rank-3 tensor: the stock Softmax normalizes over one "
                             "axis, the last",
        "max_other_axis": "the maximum is taken over axes [1] but the sum over axes [2]: not a softmax",
        "unknown_rank": "cannot tell the rank of 'mul', to tell whether axes [1] are the last",
        "complex": "a softmax of a complex64 tensor: Softmax takes floating-point input",
        "exp_read_elsewhere": "'Exp' is also read by",
    }[key]
    assert wanted in refusal.reason
    assert result.fused_graph_def == m.graph_def  # nothing else to fuse: the graph is as it was


@pytest.mark.parametrize("key", list(sm.SOFTMAX_LOOK_ALIKES))
def test_look_alike_is_not_matched(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    assert pass_report(result, PASS).match_times == 0
    assert op_count(result.fused_graph_def, "Softmax") == op_count(m.graph_def, "Softmax")
    assert result.report.nodes_after == result.report.nodes_before  # nothing else to fuse either
    assert_verifies(m, result)


def test_without_the_max_the_stock_op_is_right_where_the_original_overflows():
    """The documented form of exp(x) / sum(exp(x)) overflows past x ~ 88 in float32 and
    gives NaN; the Softmax it is fused into gives the softmax."""
    import tensorflow as tf

    m = model("documented")
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype(np.float32)
    x[0, 0, :2] = [50.0, 49.0]  # exp(2 * 50) is past float32's largest number
    expected = np.exp(2 * x - (2 * x).max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    outputs = []
    for graph_def in (m.graph_def, result.fused_graph_def):
        graph = tf.Graph()
        with graph.as_default():
            tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as sess:
            outputs.append(sess.run(m.outputs[0], {"x:0": x}))
    original, fused = outputs
    assert np.isnan(original[0, 0, :2]).all()
    np.testing.assert_allclose(original[1], expected[1], atol=1e-6)  # elsewhere the two agree
    np.testing.assert_allclose(fused, expected, atol=1e-6)
