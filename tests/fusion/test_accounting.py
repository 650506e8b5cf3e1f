"""Every match is accounted for: each pass's matches end fused, refused (with the reason)
or dropped in a conflict (with the winner named), on graphs built by real libraries."""
from __future__ import annotations

import pytest
from tests.helpers.freeze import freeze_graph

import scopefusion
from scopefusion.builtin_passes.graph.gelu import GeluFusionPass
from scopefusion.builtin_passes.scope.layer_norm import ScopeLayerNormPass
from scopefusion.testing import registry_with

INSTANCE = "ScopeInstanceNormPass"


def _within(a: str, b: str) -> bool:
    """Scope ``a`` is ``b`` or lies inside it."""
    return a == b or a.startswith(b + "/")


def assert_accounted(report) -> None:
    """Per pass: matches = fused + refused + dropped, and every scope (or node) its patterns
    matched is named by one of those records (the same scope, one inside it or one holding it)."""
    for p in report.passes:
        if not p.ran or p.error:
            continue
        records = [*p.fused, *p.refused, *p.dropped]
        assert p.matches == len(records), (p.name, p.matches, len(records))
        assert p.matches >= (1 if p.matched_scopes else 0), p.name
        named = [s for r in records for s in r.scopes]
        for scope in p.matched_scopes:
            assert any(_within(scope, s) or _within(s, scope) for s in named), (p.name, scope, named)
        assert all(r.reason for r in [*p.refused, *p.dropped])
        assert all(r.winner for r in p.dropped)
    for entry in report.to_dict()["passes"]:  # the JSON report says the same
        if entry["switch"].startswith("off") or entry["error"]:
            continue
        assert entry["matches"] == len(entry["fused"]) + len(entry["refused"]) + len(entry["dropped"])


@pytest.fixture(scope="module")
def norms_graph():
    """A tf_slim instance_norm next to a tf_keras LayerNormalization (small epsilon: the
    moments form) and a tf_keras BatchNormalization(fused=False) in training: three other
    normalizations whose moments the instance-norm pass's pattern also matches."""
    import tensorflow as tf
    import tf_keras
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 6, 6, 4], name="x")
        h = tf_slim.instance_norm(x)
        h = tf_keras.layers.LayerNormalization(epsilon=1e-6, name="ln")(h)
        h = tf_keras.layers.BatchNormalization(fused=False, name="bn")(h, training=True)
        h = tf_keras.layers.LayerNormalization(axis=[1, 2, 3], epsilon=1e-6, name="ln_all")(h)
        return {}, [tf.identity(h, name="out")]

    return freeze_graph(build)[0]


def test_instance_norm_pass_accounts_for_the_other_normalizations(norms_graph):
    result = scopefusion.fuse(norms_graph, enable_scope_fusion_passes=INSTANCE)
    assert_accounted(result.report)
    inst = result.report.pass_report(INSTANCE)
    assert len(inst.matched_scopes) == inst.matches == 4
    assert [f.name for f in inst.fused] == ["InstanceNorm"]
    refused = {r.name: r.reason for r in inst.refused}
    assert sorted(refused) == ["bn/moments", "ln/moments", "ln_all/moments"]
    assert all(reason.startswith("rejected by the pass: not an instance normalization: ")
               for reason in refused.values())
    assert "including the batch axis 0" in refused["bn/moments"]
    hints = {r.name: r.hint for r in inst.refused}  # the layer norms' moments: where they went
    assert hints == {"bn/moments": "", "ln/moments": "fused by ScopeLayerNormPass as 'ln'",
                     "ln_all/moments": "fused by ScopeLayerNormPass as 'ln_all'"}
    assert inst.dropped == []
    layer = result.report.pass_report("ScopeLayerNormPass")
    assert sorted(f.name for f in layer.fused) == ["ln", "ln_all"]


def test_the_summary_table_adds_up(norms_graph):
    import io

    from rich.console import Console

    from scopefusion.cli.console import print_summary

    result = scopefusion.fuse(norms_graph, enable_scope_fusion_passes=INSTANCE)
    out = Console(width=160, record=True, file=io.StringIO())
    print_summary(result.report, out)
    text = out.export_text()
    row = next(line for line in text.splitlines() if INSTANCE in line and "│" in line)
    cells = [c.strip() for c in row.split("│")[1:-1]]
    tested, matched, fused, refused, dropped = (int(c) for c in cells[2:7])
    assert (matched, fused, refused, dropped) == (4, 1, 3, 0) and tested >= matched
    assert "refused bn/moments (ScopeInstanceNormPass): rejected by the pass: not an instance" in text


class TeamLayerNormPass(ScopeLayerNormPass):
    """A plugin's own copy of the layer-norm pass under another name: it matches the same scopes."""

    name = "TeamLayerNormPass"
    general = True


class TeamGeluPass(GeluFusionPass):
    """A plugin's copy of the GELU pass."""

    name = "TeamGeluPass"


@pytest.fixture(scope="module")
def keras_block():
    """A tf_keras Dense with the exact GELU, then a LayerNormalization (moments form)."""
    import tensorflow as tf
    import tf_keras

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 5, 8], name="x")
        h = tf_keras.layers.Dense(8, activation="gelu", name="ffn")(x)
        return {}, [tf.identity(tf_keras.layers.LayerNormalization(epsilon=1e-6, name="ln")(h), name="out")]

    return freeze_graph(build)[0]


def test_two_passes_on_the_same_place_the_loser_names_the_winner(keras_block):
    registry = registry_with([TeamLayerNormPass, TeamGeluPass], autoload=False)
    result = scopefusion.fuse(keras_block, registry=registry, emit="tf")
    assert_accounted(result.report)
    team = result.report.pass_report("TeamLayerNormPass")
    assert team.fused == [] and team.refused == []
    (lost,) = team.dropped
    assert lost.name == "ln" and lost.winner == "ln (ScopeLayerNormPass)"
    assert "comes first in the run order" in lost.reason
    # a plugin's graph pass runs before the built-ins (priority 6000 < 8000): the built-in loses
    builtin = result.report.pass_report("GeluFusionPass")
    (lost,) = builtin.dropped
    assert lost.name == "ffn/Gelu/mul_2" and lost.winner == "ffn/Gelu/mul_2 (TeamGeluPass)"
    assert builtin.matches == 1 and builtin.fused == builtin.refused == []
    assert [f.name for f in result.report.pass_report("TeamGeluPass").fused] == ["ffn/Gelu/mul_2"]
    check = scopefusion.verify(keras_block, result.fused_graph_def, fused_ops=registry.fused_ops)
    check.assert_ok()
