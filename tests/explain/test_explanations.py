"""Reasons in the user's terms: what a layer lacks (center=False), dtypes by name, and hints
naming the registered pass that would fuse a place, on graphs built by real libraries."""
from __future__ import annotations

import re

import pytest
from tests.helpers.freeze import freeze_graph

import scopefusion
from scopefusion.core.graph_fusion.switch import FusionSwitch
from scopefusion.testing import graph_from_function

DTYPE_NUMBER = re.compile(r"\b(T|dtype|SrcT|DstT) = \d")


def _traced(fn, shape):
    import tensorflow as tf

    return graph_from_function(fn, tf.TensorSpec(shape, tf.float32, "x"))


def _all_notes(report):
    return [(p.name, r) for p in report.passes for r in (*p.refused, *p.dropped, *p.near_misses)]


@pytest.mark.parametrize("epsilon", [1e-6, 1e-3], ids=["moments", "fused_batch_norm"])
@pytest.mark.parametrize("options,reason", [
    ({"center": False}, "no beta (center=False)"),
    ({"scale": False}, "no gamma (scale=False)"),
    ({"center": False, "scale": False}, "no gamma and no beta (scale=False, center=False)"),
])
def test_tf_keras_layer_norm_without_parameters_is_refused_for_what_it_lacks(options, reason, epsilon):
    """A small epsilon takes tf_keras' moments path: without beta (or gamma) tf.nn.batch_normalization
    has a Neg for the Sub (or a Mul less), and the scope is still recognised and refused for that; a
    larger one its FusedBatchNormV3 path."""
    import tensorflow as tf
    import tf_keras

    layer = tf_keras.layers.LayerNormalization(epsilon=epsilon, name="ln", **options)
    result = scopefusion.fuse(_traced(lambda x: tf.tanh(layer(x)), [2, 5, 16]))
    report = result.report.pass_report("ScopeLayerNormPass")
    (refusal,) = report.refused
    assert refusal.name == "ln" and reason in refusal.reason
    assert report.near_misses == [] and report.matches == 1
    # the reshape - FusedBatchNormV3 - reshape trick is tf_keras' own, so the reason can name the layer; the
    # moments form is what tf.nn.moments + tf.nn.batch_normalization write for any library: no claim
    named = refusal.reason.startswith("rejected by the pass: tf_keras LayerNormalization (its FusedBatchNormV3 path): ")
    assert named == (epsilon == 1e-3) and ("tf_keras" in refusal.reason) == named
    assert not any(DTYPE_NUMBER.search(r.reason) for _, r in _all_notes(result.report))


def test_other_libraries_layer_norms_are_not_called_tf_keras():
    """Keras 3 and tf_slim layer norms without beta: refused for that, with no layer named."""
    import keras
    import tensorflow as tf
    import tf_slim

    layer = keras.layers.LayerNormalization(center=False, name="k3")
    layer.build((2, 5, 16))
    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 5, 16], name="x")
        return {}, [tf.identity(tf_slim.layer_norm(x, center=False, begin_norm_axis=-1), name="out")]

    for graph in (_traced(lambda x: layer(x), [2, 5, 16]), freeze_graph(build)[0]):
        (refusal,) = scopefusion.fuse(graph).report.pass_report("ScopeLayerNormPass").refused
        assert "no beta (center=False)" in refusal.reason and "tf_keras" not in refusal.reason


@pytest.fixture(scope="module")
def slim_instance_norm():
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 6, 6, 4], name="x")
        return {}, [tf.identity(tf_slim.instance_norm(x), name="out")]

    return freeze_graph(build)[0]


def test_an_instance_norm_near_miss_of_the_layer_norm_pass_names_the_pass_to_enable(slim_instance_norm):
    result = scopefusion.fuse(slim_instance_norm)
    assert result.report.fused == []
    (near,) = [r for r in result.report.pass_report("ScopeLayerNormPass").near_misses if r.name == "InstanceNorm"]
    # the dtype by name, and what lies where, not the raw attribute numbers
    assert "T = float32, float64, bfloat16 or float16 wanted; none lies directly in it (1 in its sub-scopes)" \
        in near.reason
    assert near.hint == ("ScopeInstanceNormPass would fuse it as InstanceNorm: enable ScopeInstanceNormPass "
                         "(--enable_scope_fusion_passes ScopeInstanceNormPass)")
    (refusal,) = result.report.pass_report("LayerNormFusionPass").refused
    assert "ScopeInstanceNormPass would fuse it" in refusal.hint
    assert result.report.hints == [
        "ScopeInstanceNormPass is not enabled; it would fuse 1 place(s) ('InstanceNorm'): enable "
        "ScopeInstanceNormPass (--enable_scope_fusion_passes ScopeInstanceNormPass)"]
    assert not any(DTYPE_NUMBER.search(r.reason) for _, r in _all_notes(result.report))
    # the probe left the graph alone
    assert not any(n.op == "InstanceNorm" for n in result.fused_graph_def.node)

    enabled = scopefusion.fuse(slim_instance_norm, enable_scope_fusion_passes="ScopeInstanceNormPass")
    assert enabled.report.fused_count("InstanceNorm") == 1 and enabled.report.hints == []
    notes = _all_notes(enabled.report)
    assert notes and all(r.hint == "fused by ScopeInstanceNormPass as 'InstanceNorm'" for _, r in notes)


@pytest.fixture(scope="module")
def keras_gelu_block():
    import tensorflow as tf
    import tf_keras

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [2, 5, 8], name="x")
        h = tf_keras.layers.Dense(8, activation="gelu", name="ffn")(x)
        return {}, [tf.identity(tf_keras.layers.Dense(4, activation="tanh", name="out_proj")(h), name="out")]

    return freeze_graph(build)[0]


def test_a_gelu_the_switch_file_turned_off_is_mentioned(keras_gelu_block):
    off = FusionSwitch.from_text("GeluFusionPass:off")
    result = scopefusion.fuse(keras_gelu_block, fusion_switch_file=off)
    assert result.report.pass_report("GeluFusionPass").switch.startswith("off")
    assert result.report.hints == [
        "GeluFusionPass is switched off; it would fuse 1 place(s) ('ffn/Gelu/mul_2'): turn GeluFusionPass on "
        "in the fusion switch file"]
    assert not any(n.op == "Gelu" for n in result.fused_graph_def.node)
    assert scopefusion.fuse(keras_gelu_block).report.hints == []  # on: fused, nothing to hint


def test_a_pattern_no_pass_knows_gets_no_hint():
    """A hand-written RMS-like scaling with a mean of absolute values: no registered pass fuses it."""
    import tensorflow as tf

    def fn(x):
        with tf.name_scope("norm"):
            return x / (tf.reduce_mean(tf.abs(x), axis=-1, keepdims=True) + 1e-5)

    result = scopefusion.fuse(_traced(fn, [2, 5, 16]))
    assert result.report.fused == [] and result.report.hints == []
    assert all(r.hint == "" for _, r in _all_notes(result.report))


def test_hints_can_be_left_out(slim_instance_norm):
    result = scopefusion.fuse(slim_instance_norm, hints=False)
    assert result.report.hints == [] and "hints" not in result.report.stage_seconds
    assert all(r.hint == "" for _, r in _all_notes(result.report)) and _all_notes(result.report)


def test_the_command_line_can_leave_hints_out(slim_instance_norm, tmp_path, capsys):
    from scopefusion.cli import main
    from scopefusion.core.graph.io import save_graph

    model = tmp_path / "inst.pb"
    save_graph(slim_instance_norm, model)
    assert main(["run", str(model), "-o", str(tmp_path / "a.pb"), "--report", str(tmp_path / "a.json")]) == 0
    assert "would fuse" in capsys.readouterr().out
    assert main(["run", str(model), "-o", str(tmp_path / "b.pb"), "--report", str(tmp_path / "b.json"),
                 "--no-hints"]) == 0
    assert "would fuse" not in capsys.readouterr().out
    import json

    assert json.loads((tmp_path / "a.json").read_text())["hints"] != []
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["hints"] == [] and "hints" not in report["stage_seconds"]
