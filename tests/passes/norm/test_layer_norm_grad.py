"""ScopeLayerNormGradPass on training graphs real code makes (``layer_norm_grad_models``: tf_slim with
``tf.gradients``, tf_keras and Keras 3 ``LayerNormalization`` with ``GradientTape``, random weights;
tf_keras' at its default epsilon too, whose gradient is a ``FusedBatchNormGradV3``).

Each layer norm's gradient (its nodes under ``gradients/<scope>/`` or ``gradient_tape/<scope>/`` and
the AddN nodes summing them) becomes one ``LayerNormGrad(dy, x, variance, mean, gamma)`` whose
``pd_x``, ``pd_gamma`` and ``pd_beta`` replace the gradients of x, gamma and beta, and the fused graph
matches the original (float32, 1e-4).  Its mean and variance are recomputed from x next to it; the
forward, no longer read inside by its gradient, becomes a ``LayerNorm`` in the graph stage (Keras 3's
too: its gradient reads gamma reshaped to x's rank, the fused op takes gamma itself).  With a residual
connection, x's gradient sums the layer norm's ``pd_x`` and the residual's contribution in the fused op's
``AddN``.

Not fused: Keras 3's RMS-scaled ``LayerNormalization`` (its gradient has an RsqrtGrad but no mean) and
training-mode ``fused_batch_norm`` gradients (batch norms), refused with the reason; an inference
graph, where the pass finds nothing, whatever the session's ``graph_run_mode``.
"""
from __future__ import annotations

import functools

import pytest

from tests.models import layer_norm_grad_models as lg
from tests.helpers.pass_checks import REGISTRY, assert_builds, op_count, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion
from scopefusion.core.options import npu_options

PASS = "ScopeLayerNormGradPass"
MODELS = {**lg.GRAD_FORMS, **lg.GRAD_LOOK_ALIKES}


@functools.cache
def model(key: str):
    return MODELS[key]()


@functools.cache
def fused(key: str):
    return scopefusion.fuse(model(key).graph_def, registry=REGISTRY)


@pytest.mark.parametrize("key", list(MODELS))
def test_builder_makes_its_form(key):
    assert_builds(model(key), "LayerNormGrad", "LayerNorm")


@pytest.mark.parametrize("key", list(lg.GRAD_FORMS))
def test_layer_norm_gradient_becomes_layer_norm_grad(key):
    m = model(key)
    result = fused(key)
    report = pass_report(result, PASS)
    assert len(report.fused) == m.expected, [r.reason for r in report.refused]
    assert report.refused == []
    graph = result.fused_graph_def
    grads = [n for n in graph.node if n.op == "LayerNormGrad"]
    assert len(grads) == m.expected
    epsilon = m.attrs.get("epsilon", 1e-12 if key.startswith("slim") else 1e-6)
    forwards = {n.input[0]: n for n in graph.node if n.op == "LayerNorm"}
    assert len(forwards) == m.attrs["forward"]
    for node in grads:
        assert node.attr["begin_norm_axis"].i % 3 == 2 and node.attr["begin_params_axis"].i == -1  # the last axis
        assert node.attr["epsilon"].f == pytest.approx(epsilon, rel=1e-6)
        if m.attrs["forward"]:  # the statistics the gradient recomputes are of its forward's x
            forward = forwards[node.input[1]]
            assert forward.input[1] == node.input[4]  # and gamma is the forward's gamma, not a reshape of it
    assert len({n.input[1] for n in grads}) == len(grads)  # each the gradient of another call
    assert op_count(graph, "RsqrtGrad") == 0 and op_count(graph, "FusedBatchNormGradV3") == 0
    assert_verifies(m, result)


def test_fused_path_gradient_reads_x_and_gamma_not_the_batch_statistics():
    """tf_keras' FusedBatchNormV3 path: the LayerNormGrad takes x (the forward reshaped it for the batch
    norm) and gamma; the forward op's reserve spaces and its reshaped input and output, which the
    gradient read, are read by nothing but the forward now."""
    result = fused("tf_keras_fused_tape")
    graph = result.fused_graph_def
    nodes = {n.name: n for n in graph.node}
    (grad,) = [n for n in graph.node if n.op == "LayerNormGrad"]
    (fbn,) = [n for n in graph.node if n.op == "FusedBatchNormV3"]  # the forward, as it was
    squeeze = nodes[fbn.input[0]]
    assert squeeze.op == "Reshape" and grad.input[1] == squeeze.input[0]
    assert nodes[grad.input[4]].op in ("Identity", "Const")  # gamma itself
    readers = [i for n in graph.node for i in n.input if i.split(":")[0] == fbn.name]
    assert readers and all(not i.startswith(fbn.name + ":") for i in readers)  # y only: no batch statistics
    (record,) = pass_report(result, PASS).fused
    assert "6 inner tensors the gradient read recomputed from x" in record.description, record.description
    (refusal,) = pass_report(result, "ScopeLayerNormPass").refused  # the forward, while its gradient read it
    assert "(its batch statistics) is read by its gradient (a training graph)" in refusal.reason, refusal.reason


def test_residual_gradient_is_summed_in_the_fused_op():
    result = fused("slim_gradients_residual")
    (record,) = pass_report(result, PASS).fused
    assert "plus 1 other contribution(s) to dx" in record.description
    sums = [n for n in result.fused_graph_def.node if n.op == "AddN" and n.name.startswith(record.name + "/")]
    (total,) = sums
    assert total.input[0].endswith("LayerNormGrad") and len(total.input) == 2


@pytest.mark.parametrize("key", ["batch_norm_trick_tape", "batch_norm_nhwc_tape", "tf_keras_twice_same_input_tape"])
def test_batch_norm_gradient_is_refused_with_the_reason(key):
    """A training-mode fused_batch_norm's gradient, the tf_keras trick's reshapes with a learnt per-row scale
    or NHWC over the features, is a batch norm's, not a layer norm's; two calls of a tf_keras layer on one
    input, whose gradients read the same x and dy in one scope, are not told apart."""
    m = model(key)
    report = pass_report(fused(key), PASS)
    assert report.fused == []
    (refusal,) = report.refused
    assert m.attrs["reason"] in refusal.reason, refusal.reason
    assert op_count(fused(key).fused_graph_def, "LayerNormGrad") == 0
    assert_verifies(m, fused(key))


def test_rms_norm_gradient_is_refused_with_the_reason():
    m = model("keras_rms_tape")
    report = pass_report(fused("keras_rms_tape"), PASS)
    assert report.fused == []
    (refusal,) = report.refused
    assert m.attrs["reason"] in refusal.reason, refusal.reason
    assert_verifies(m, fused("keras_rms_tape"))


def test_inference_graph_has_nothing_to_do():
    result = fused("inference")
    report = result.report.pass_report(PASS)
    assert report.matches == 0 and report.fused == [] and report.refused == []
    assert len(pass_report(result, "ScopeLayerNormPass").fused) == 1


def test_forward_refusal_in_the_scope_stage_says_why():
    (refusal,) = pass_report(fused("slim_gradients"), "ScopeLayerNormPass").refused
    assert "are read by its gradient (a training graph)" in refusal.reason


@pytest.mark.parametrize("mode", [1, 0])
def test_the_gradient_decides_not_graph_run_mode(mode):
    """``graph_run_mode`` 1 (training) or 0 (online inference) from a session configuration: the pass
    fuses the gradient either way, as the reference's scope passes, which run when the graph is parsed,
    before the run mode means anything; what makes a training graph here is the gradient in it.  The
    mode still steers the graph passes not safe for training (skipped in mode 1 only)."""
    m = model("slim_gradients")
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY, session_options=npu_options(graph_run_mode=mode))
    assert result.report.option_sources == {"graph_run_mode": "session configuration"}
    assert len(pass_report(result, PASS).fused) == 1
    assert op_count(result.fused_graph_def, "LayerNormGrad") == 1 and op_count(result.fused_graph_def, "RsqrtGrad") == 0
    skipped = [p.name for p in result.report.passes if p.switch.startswith("off (training")]
    assert ("ConvBatchnormFusionPass" in skipped) == (mode == 1), skipped
    assert_verifies(m, result)
    inference = scopefusion.fuse(model("inference").graph_def, registry=REGISTRY,
                                 session_options=npu_options(graph_run_mode=mode))
    report = inference.report.pass_report(PASS)
    assert report.matches == 0 and report.fused == [] and report.refused == []
    assert op_count(inference.fused_graph_def, "LayerNormGrad") == 0
