"""SoftmaxTransposeFusionPass (fusion by partition; off by default, on by the switch file) on the
softmaxes over an axis other than the last that real code writes out (``softmax_models``): GPT-2's
``softmax()`` over axis 1 of a rank-3 tensor and tf_keras' ``activations.softmax`` with
``axis=(1,)``.  Each becomes ``Transpose`` (axes 1 and 2 swapped), the stock ``Softmax``,
``Transpose`` back, and matches the original numerically.

Refused with the reason: a softmax over several axes (tf_keras ``axis=(1, 2)``), the maximum over
another axis than the sum, a tensor of unknown rank, a softmax over the last axis (which
``SoftmaxFusionPass`` makes the stock op, in the same run).  Off by default: see
``test_softmax.py``, whose refused softmaxes stay as they are without a switch file.
"""
from __future__ import annotations

import functools

import pytest

from tests.models import softmax_models as sm
from tests.helpers.pass_checks import REGISTRY, op_count, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion
from scopefusion.core.graph.tensor_codec import make_ndarray

PASS = "SoftmaxTransposeFusionPass"
ON = scopefusion.FusionSwitch.from_text('{"Switch": {"GraphFusion": {"%s": "on"}}}' % PASS)
PARTITIONED = ("axis_1", "tf_keras_axis_1")
MODELS = {**sm.SOFTMAX_FORMS, **sm.SOFTMAX_REFUSALS}


@functools.cache
def model(key: str):
    return MODELS[key]()


def fuse(m):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=ON)


@pytest.mark.parametrize("key", PARTITIONED)
def test_softmax_over_another_axis_is_partitioned(key):
    m = model(key)
    result = fuse(m)
    (record,) = pass_report(result, PASS).fused
    assert "a softmax over axis 1 of a rank-3 tensor" in record.description
    fused = result.fused_graph_def
    assert op_count(fused, "Softmax") == 1 and op_count(fused, "Transpose") == 2
    assert op_count(fused, "Exp", "Sum", "Max", "RealDiv") == 0
    nodes = {n.name: n for n in fused.node}
    (softmax,) = [n for n in fused.node if n.op == "Softmax"]
    before = nodes[softmax.input[0]]
    after = next(n for n in fused.node if n.op == "Transpose" and n.input[0] == softmax.name)
    assert before.op == "Transpose" and before.input[1] == after.input[1]  # the same swap, undone
    assert make_ndarray(nodes[before.input[1]].attr["value"].tensor).tolist() == [0, 2, 1]
    assert after.name == record.name  # the softmax's output keeps its name
    assert_verifies(m, result)


@pytest.mark.parametrize("key, reason", [
    ("tf_keras_axes_1_2", "a softmax over axes [1, 2] of a rank-3 tensor: one Softmax normalizes over one axis"),
    ("max_other_axis", "the maximum is taken over axes [1] but the sum over axes [2]: not a softmax"),
    ("unknown_rank", "cannot tell the rank of 'mul', to place axes [1] last"),
    ("documented", "a softmax over the last axis (2): the stock Softmax, no transposes needed"),
])
def test_others_are_refused_with_the_reason(key, reason):
    m = model(key)
    result = fuse(m)
    report = pass_report(result, PASS)
    assert report.fused == []
    (refusal,) = report.refused
    assert reason in refusal.reason, refusal.reason
    assert op_count(result.fused_graph_def, "Transpose") == op_count(m.graph_def, "Transpose")
    if key == "documented":  # the stock op's form: SoftmaxFusionPass fuses it in the same run
        assert len(pass_report(result, "SoftmaxFusionPass").fused) == 1
    assert_verifies(m, result)


def test_off_by_default():
    m = model("axis_1")
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    assert PASS not in [p.name for p in result.report.passes]  # not asked for: not in the run's report
    assert result.fused_graph_def == m.graph_def
