"""ZConcatExt2FusionPass (off by default, turned on by the switch file) on concats real code produces:
every ``ConcatV2`` with a constant axis becomes a ``ConcatV2D`` with the axis as attribute
``concat_dim``, and one of more inputs than a ConcatV2D takes (63 with every shape known, 48
otherwise) a tree of them; the fused graph matches the original numerically.

* tf_slim's Inception v3: 15 concats; with ``ConcatFlattenFusionPass`` (``ZConcatv2dFusionPass``)
  on, the 2 nested blocks are flattened by it (it contains the concats this pass matches there)
  and the 9 others become ConcatV2D; with it off, all 15;
* Keras 3 ``Concatenate`` of 130 tensors: runs of 63, 63 and 4 under a root ConcatV2D, or of 48,
  48 and 34 when the batch is unknown.

Refused with the reason: an axis that is fed (not a constant).  Off by default: nothing changes
without a switch file that turns it on.
"""
from __future__ import annotations

import functools
import json

import pytest

from tests.models import concat_models as cm
from tests.helpers.pass_checks import REGISTRY, op_count, pass_report
from tests.helpers.verify import assert_verifies

import scopefusion

PASS = "ZConcatExt2FusionPass"


def switch(**entries: str) -> scopefusion.FusionSwitch:
    return scopefusion.FusionSwitch.from_text(json.dumps({"Switch": {"GraphFusion": {PASS: "on", **entries}}}))


@functools.cache
def model(key: str):
    return {"inception": cm.slim_inception_v3, "wide": cm.keras_wide_concat,
            "wide_dynamic": functools.partial(cm.keras_wide_concat, None), "fed_axis": cm.fed_axis}[key]()


def fuse(m, **entries: str):
    return scopefusion.fuse(m.graph_def, registry=REGISTRY, fusion_switch_file=switch(**entries))


def test_off_by_default():
    m = model("inception")
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    assert PASS not in [p.name for p in result.report.passes]  # not asked for: not in the run's report
    assert op_count(result.fused_graph_def, "ConcatV2D") == 0


@pytest.mark.parametrize("flatten", ["on", "off"])
def test_inception_concats_take_their_axis_as_attribute(flatten):
    m = model("inception")
    result = fuse(m, ConcatFlattenFusionPass=flatten)
    report = pass_report(result, PASS)
    expected = 9 if flatten == "on" else 15
    assert len(report.fused) == expected and report.refused == []
    nodes = [n for n in result.fused_graph_def.node if n.op == "ConcatV2D"]
    assert len(nodes) == expected
    assert op_count(result.fused_graph_def, "ConcatV2") == (2 if flatten == "on" else 0)
    original = {n.name: n for n in m.graph_def.node}
    for node in nodes:
        old = original[node.name]
        assert node.attr["concat_dim"].i == 3 and node.attr["N"].i == old.attr["N"].i
        assert list(node.input) == list(old.input)[:-1]  # the same values in order, the axis gone
    assert_verifies(m, result)


@pytest.mark.parametrize("key", ["wide", "wide_dynamic"])
def test_a_concat_past_the_limit_becomes_a_tree(key):
    m = model(key)
    result = fuse(m)
    (record,) = pass_report(result, PASS).fused
    nodes = {n.name: n for n in result.fused_graph_def.node if n.op == "ConcatV2D"}
    runs = m.attrs["runs"]
    assert len(nodes) == len(runs) + 1
    root = next(n for n in nodes.values() if all(i in nodes for i in n.input))
    assert root.attr["N"].i == len(runs)
    assert [nodes[i].attr["N"].i for i in root.input] == runs
    leaves = [v for i in root.input for v in nodes[i].input]
    original = next(n for n in m.graph_def.node if n.op == "ConcatV2")
    assert leaves == list(original.input)[:-1]
    assert f"at most {max(runs)} per node" in record.description
    assert_verifies(m, result)


def test_fed_axis_is_refused():
    m = model("fed_axis")
    result = fuse(m)
    report = pass_report(result, PASS)
    assert report.fused == [] and len(report.refused) == 2
    for refusal in report.refused:
        assert "is not a constant: ConcatV2D takes its axis as an attribute" in refusal.reason
    assert op_count(result.fused_graph_def, "ConcatV2D") == 0
