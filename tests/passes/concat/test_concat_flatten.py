"""ConcatFlattenFusionPass on concats of concats real code produces (built by
``concat_models``, frozen, random weights).

Each outer ``ConcatV2`` whose inner ``ConcatV2``s join along the same constant axis and
are read by it alone becomes one stock ``ConcatV2`` of all their inputs, in order, and
the result is verified numerically against the original:

* tf_slim's Inception v3 (``Mixed_7b``, ``Mixed_7c``: two inner concats each, axis 3);
* Keras 3 ``Concatenate`` of ``Concatenate``s (axes ``-1`` and ``3`` of a rank-4 tensor: the
  same axis) and tf_keras' (``3`` throughout);
* three ``tf.concat`` in a chain: one level per run, the rest on the next run;
* an outer concat with one inner concat read by it alone (spliced in) and one that is a
  graph output too (kept as an input).

Refused with the reason: Keras' DenseNet (every inner concat also feeds the next
layer), inner and outer concats along different axes, axes that cannot be compared
(unknown rank).  Not matched: an axis that is not a constant.
"""
from __future__ import annotations

import functools

import pytest

from tests.models import concat_models as cm
from tests.helpers.pass_checks import REGISTRY, assert_builds, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion

PASS = "ConcatFlattenFusionPass"
MODELS = {**cm.CONCAT_FORMS, **cm.CONCAT_REFUSALS}


@functools.cache
def model(key: str):
    return MODELS[key]()


def concats(graph_def) -> dict:
    return {n.name: n for n in graph_def.node if n.op == "ConcatV2"}


def data_inputs(node) -> list[str]:
    return [i for i in node.input if not i.startswith("^")]


def flattened_inputs(original: dict, name: str, kept=()) -> list[str]:
    """The inputs of the original concat ``name`` with each inner concat (but those ``kept``)
    replaced by its own inputs (its axis left out), the outer axis last."""
    *values, axis = data_inputs(original[name])
    out = []
    for value in values:
        inner = original.get(value) if value not in kept else None
        out.extend(data_inputs(inner)[:-1] if inner is not None else [value])
    return [*out, axis]


@pytest.mark.parametrize("key", list(MODELS))
def test_builder_makes_its_form(key):
    """The builder's graph holds the ops of its form and runs in plain TensorFlow."""
    assert_builds(model(key))


@pytest.mark.parametrize("key", list(cm.CONCAT_FORMS))
def test_nested_concat_is_flattened(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    report = pass_report(result, PASS)
    before, after = concats(m.graph_def), concats(result.fused_graph_def)
    assert len(report.fused) == m.expected, [r.reason for r in report.refused]
    assert len(after) == len(before) - m.attrs["spliced"]
    for record in report.fused:
        node = after[record.name]
        assert node.attr["N"].i == m.attrs["N"] == len(data_inputs(node)) - 1
        assert data_inputs(node) == flattened_inputs(before, record.name, m.attrs.get("kept", ()))
        old = before[record.name]
        assert (node.attr["T"].type, node.attr["Tidx"].type) == (old.attr["T"].type, old.attr["Tidx"].type)
    assert_verifies(m, result)


def test_a_chain_loses_one_level_per_run():
    """concat(concat(concat(x, 2x), 3x), 4x): the first run flattens the inner pair (the
    outer candidate overlaps it and waits), the second run the rest."""
    m = model("concat_chain")
    first = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    (refusal,) = pass_report(first, PASS).dropped
    assert "overlaps 'concat_1' of pass ConcatFlattenFusionPass" in refusal.reason
    assert refusal.winner == "concat_1 (ConcatFlattenFusionPass)"
    second = scopefusion.fuse(first.fused_graph_def, registry=REGISTRY)
    (node,) = concats(second.fused_graph_def).values()
    assert node.name == "concat_2" and node.attr["N"].i == 4
    assert data_inputs(node) == ["x", "mul", "mul_1", "mul_2", "concat_2/axis"]
    assert_verifies(m, second)


@pytest.mark.parametrize("key", list(cm.CONCAT_REFUSALS))
def test_concats_that_cannot_be_flattened_stay(key):
    m = model(key)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    report = pass_report(result, PASS)
    assert report.fused == []
    assert len(concats(result.fused_graph_def)) == len(concats(m.graph_def))
    assert len(report.refused) == m.attrs["refused"]
    if not m.attrs["refused"]:
        assert report.match_times == 0  # not the pattern at all
    wanted = {
        "keras_densenet": "is also read by",
        "keras_other_axis": "joins along axis 3, the outer one along axis 1",
        "unknown_rank": "to compare its axis 1 with the outer axis -1",
    }
    for refusal in report.refused:
        assert wanted[key] in refusal.reason, refusal.reason
    assert_verifies(m, result)
