"""Verification: the API, the CLI, feeds and tolerances."""
from __future__ import annotations

import numpy as np
import pytest

import scopefusion
from scopefusion import OptionError
from scopefusion.builtin_passes.scope.layer_norm import LAYER_NORM, ScopeLayerNormPass
from scopefusion.cli import EXAMPLE_MODEL, main
from scopefusion.core.verify.feeds import DEFAULT_DIM, parse_input_shapes
from scopefusion.core.verify.verify import verify
from scopefusion.plugins.registry import load_registry
from scopefusion import hookimpl, save_graph


class WrongEpsilonLayerNormPass(ScopeLayerNormPass):
    """Deliberately broken: a plausible but wrong epsilon."""

    name = "ScopeLayerNormPass"

    def generate_fusion_result(self, scopes, result):
        super().generate_fusion_result(scopes, result)
        result.set_attr("epsilon", 0.5)


class SwappedPortsLayerNormPass(ScopeLayerNormPass):
    """Deliberately broken: gamma and beta swapped in the port map."""

    name = "ScopeLayerNormPass"

    def generate_fusion_result(self, scopes, result):
        super().generate_fusion_result(scopes, result)
        gamma_key = next(k for k, v in result.input_map.items() if 1 in v)
        beta_key = next(k for k, v in result.input_map.items() if 2 in v)
        result.input_map[gamma_key] = [2 if i == 1 else i for i in result.input_map[gamma_key]]
        result.input_map[beta_key] = [1 if i == 2 else i for i in result.input_map[beta_key]]


def _broken_registry(cls):
    class Plugin:
        @hookimpl
        def scopefusion_scope_passes(self):
            return [cls]

    return load_registry(autoload=False, plugins=[("broken", Plugin())])


def test_verify_api_passes_on_a_correct_fusion(bert_encoder, registry):
    fused = scopefusion.fuse(bert_encoder.graph_def, registry=registry).graph_def  # fused form
    result = verify(bert_encoder.graph_def, fused, fused_ops=registry.fused_ops, runs=2)
    assert result.passed and result.runs == 2
    (out,) = result.outputs
    assert out.name == bert_encoder.outputs[0] and out.dtype == "float32" and out.shape == [16, 64]
    assert out.max_abs_error <= 1e-4 and (out.atol, out.rtol) == (1e-4, 1e-4)
    result.assert_ok()
    assert "pass" in result.table()


@pytest.mark.parametrize("broken", [WrongEpsilonLayerNormPass, SwappedPortsLayerNormPass])
def test_broken_pass_is_caught(bert_encoder, broken):
    registry = _broken_registry(broken)
    assert registry.get("ScopeLayerNormPass").cls is broken
    fused = scopefusion.fuse(bert_encoder.graph_def, registry=registry)
    assert fused.report.fused_count("LayerNorm") == 7  # it "worked"...
    result = verify(bert_encoder.graph_def, fused.graph_def, fused_ops=registry.fused_ops)
    assert not result.passed  # ...but computes something else
    assert result.failures[0].max_abs_error > 1e-3
    with pytest.raises(AssertionError, match="FAIL"):
        result.assert_ok()


def test_cli_verify_exit_codes(tmp_path, bert_encoder, capsys):
    original = tmp_path / "original.pb"
    save_graph(bert_encoder.graph_def, original)
    good = tmp_path / "good.pb"
    assert main(["run", str(original), "-o", str(good), "--verify", "--runs", "2"]) == 0
    assert "verified: 1 output(s) match" in capsys.readouterr().out
    assert main(["verify", str(original), str(good)]) == 0
    capsys.readouterr()
    registry = _broken_registry(WrongEpsilonLayerNormPass)
    bad = scopefusion.fuse(bert_encoder.graph_def, registry=registry, emit="tf").graph_def
    save_graph(bad, tmp_path / "bad.pb")
    assert main(["verify", str(original), str(tmp_path / "bad.pb")]) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "verification failed: 1 of 1 output(s) differ" in captured.err


def test_an_output_present_in_one_graph_only_fails(bert_encoder, registry):
    fused = scopefusion.fuse(bert_encoder.graph_def, registry=registry).graph_def
    fused.node.add(name="extra_output", op="Identity", input=[bert_encoder.outputs[0].split(":")[0]]).attr[
        "T"].type = 1
    result = verify(bert_encoder.graph_def, fused, fused_ops=registry.fused_ops, runs=1)
    assert not result.passed
    assert result.output("extra_output:0").note == "only in the fused graph"
    assert result.output(bert_encoder.outputs[0]).passed


def _dynamic_graph():
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 4], name="x")
        ids = tf1.placeholder(tf.int32, [None], name="ids")
        flag = tf1.placeholder(tf.bool, [], name="flag")
        table = tf.constant(np.arange(20, dtype=np.float32).reshape(5, 4))
        picked = tf.gather(table, ids)
        tf.where(flag, x + picked, x - picked, name="out")
    return graph.as_graph_def()


def test_feeds_defaults_input_shape_and_int_range(tmp_path):
    graph = _dynamic_graph()
    result = verify(graph, graph, fused_ops={}, runs=2, int_range=(0, 5))
    assert result.passed and result.output("out").shape == [DEFAULT_DIM, 4]
    assert any("input x: unknown dimensions set to 2" in n for n in result.notes)
    result = verify(graph, graph, fused_ops={}, input_shapes="x:3,4;ids:3", runs=1, int_range=(0, 5))
    assert result.passed and result.output("out").shape == [3, 4] and result.notes == []
    result = verify(graph, graph, fused_ops={}, input_shapes="x:-1,-1;ids:-1", runs=1, int_range=(0, 5))
    assert result.passed and result.output("out").shape == [DEFAULT_DIM, 4]  # x's 4 is the graph's
    assert any("input x: dynamic dimensions (-1) set to 2: [2, 4]" in n for n in result.notes)
    with pytest.raises(scopefusion.ScopeFusionError, match="running the original graph failed"):
        verify(graph, graph, fused_ops={}, runs=1, int_range=(5, 9))  # ids out of range for the table
    with pytest.raises(OptionError, match="contradicts"):
        verify(graph, graph, fused_ops={}, input_shapes="x:3,5;ids:3")
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.ones((1, 4), np.float32), ids=np.array([4], np.int32), flag=np.array(True))
    result = verify(graph, graph, fused_ops={}, feeds=str(feeds))
    assert result.runs == 1 and result.output("out").shape == [1, 4]


def test_parse_input_shape_syntax():
    assert parse_input_shapes("data:1,1,40,8;label:1,8; mask:0") == {
        "data": [1, 1, 40, 8], "label": [1, 8], "mask": []}
    with pytest.raises(OptionError):
        parse_input_shapes("data")
    assert parse_input_shapes("data:1,-1") == {"data": [1, -1]}  # dynamic: the graph's or the default
    for bad in ("data:1,-2", "data:0,3"):
        with pytest.raises(OptionError, match="positive, or -1"):
            parse_input_shapes(bad)


def test_tolerances_can_be_set(bert_encoder, registry):
    registry_bad = _broken_registry(WrongEpsilonLayerNormPass)
    bad = scopefusion.fuse(bert_encoder.graph_def, registry=registry_bad, emit="tf").graph_def
    strict = verify(bert_encoder.graph_def, bad, fused_ops=registry.fused_ops, runs=1)
    loose = verify(bert_encoder.graph_def, bad, fused_ops=registry.fused_ops, runs=1, atol=10.0, rtol=10.0)
    assert not strict.passed and loose.passed
    assert loose.outputs[0].atol == 10.0


def test_example_model_verifies_from_the_cli(tmp_path, capsys):
    out = tmp_path / "o.pb"
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(out), "--verify", "--emit", "tf"]) == 0
    assert "verified" in capsys.readouterr().out
    assert LAYER_NORM.name == "LayerNorm"
