"""ScopeLayerNormGradPass on training graphs real code makes (``layer_norm_grad_models``: tf_slim with
``tf.gradients``, tf_keras and Keras 3 ``LayerNormalization`` with ``GradientTape``, random weights).

Each layer norm's gradient (its nodes under ``gradients/<scope>/`` or ``gradient_tape/<scope>/`` and
the AddN nodes summing them) becomes one ``LayerNormGrad(dy, x, variance, mean, gamma)`` whose
``pd_x``, ``pd_gamma`` and ``pd_beta`` replace the gradients of x, gamma and beta, and the fused graph
matches the original (float32, 1e-4).  Its mean and variance are recomputed from x next to it; the
forward, no longer read inside by its gradient, becomes a ``LayerNorm`` in the graph stage (Keras 3's
too: its gradient reads gamma reshaped to x's rank, the fused op takes gamma itself).  With a residual
connection, x's gradient sums the layer norm's ``pd_x`` and the residual's contribution in the fused op's
``AddN``.

Not fused: Keras 3's RMS-scaled ``LayerNormalization`` (its gradient has an RsqrtGrad but no mean),
refused with the reason; an inference graph, where the pass finds nothing.
"""
from __future__ import annotations

import functools

import pytest

from tests.models import layer_norm_grad_models as lg
from tests.helpers.pass_checks import REGISTRY, assert_builds, op_count, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion

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
    (node,) = [n for n in graph.node if n.op == "LayerNormGrad"]
    assert node.attr["begin_norm_axis"].i % 3 == 2 and node.attr["begin_params_axis"].i == -1  # the last axis
    assert node.attr["epsilon"].f == pytest.approx(1e-12 if key.startswith("slim") else 1e-6, rel=1e-6)
    assert op_count(graph, "RsqrtGrad") == 0 and op_count(graph, "LayerNorm") == m.attrs["forward"]
    (forward,) = [n for n in graph.node if n.op == "LayerNorm"]
    assert forward.input[0] == node.input[1]  # the statistics the gradient recomputes are of the forward's x
    assert forward.input[1] == node.input[4]  # and gamma is the forward's gamma, not a reshape of it
    assert_verifies(m, result)


def test_residual_gradient_is_summed_in_the_fused_op():
    result = fused("slim_gradients_residual")
    (record,) = pass_report(result, PASS).fused
    assert "plus 1 other contribution(s) to dx" in record.description
    sums = [n for n in result.fused_graph_def.node if n.op == "AddN" and n.name.startswith(record.name + "/")]
    (total,) = sums
    assert total.input[0].endswith("LayerNormGrad") and len(total.input) == 2


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
