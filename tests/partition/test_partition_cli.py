"""The command line of mixed computation (``scopefusion partition`` and ``run``'s mixed options),
through the functions ``cli.py`` wires: a parser built the way it builds its sub-commands."""
from __future__ import annotations

import argparse
import json

import pytest
from tests.models.partition_models import text_features_model

import scopefusion
from scopefusion import OptionError
from scopefusion.core.graph.io import load_model, save_graph
from scopefusion.core.options import SessionOptionError
from scopefusion.cli.partition import (
    add_partition_arguments,
    add_run_partition_arguments,
    cmd_partition,
    partition_options_from_args,
    write_run_partition,
)

CONFIG = """graph_options {
  rewrite_options {
    custom_optimizers {
      name: "NpuOptimizer"
      parameter_map { key: "mix_compile_mode" value { b: true } }
      parameter_map { key: "in_out_pair" value { s: "[[['mlp/Rsqrt'], ['scores']]]" } }
    }
  }
}
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scopefusion")
    sub = p.add_subparsers(dest="command")
    add_partition_arguments(sub.add_parser("partition"))
    run = sub.add_parser("run")
    run.add_argument("model")
    add_run_partition_arguments(run)
    return p


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    model = text_features_model()
    path = tmp_path_factory.mktemp("models") / "text.pb"
    save_graph(model.graph_def, path)
    return path


def test_partition_prints_segments_and_why_host_nodes_stay(model_file, capsys):
    assert cmd_partition(parser().parse_args(["partition", str(model_file)])) == 0
    out = capsys.readouterr().out
    assert "Segments (run by the back end)" in out and "GeOp0_1" in out
    assert "2 segment(s); 44 of 54 node(s) on the back end, 10 on the host" in out
    assert "host, unsupported op (3 node(s)):" in out
    assert ("  parse/StringToNumber (StringToNumber): string op StringToNumber: host-only in the default supported "
            "set") in out
    assert "  parse/tokens (Identity): string edge with host node 'parse/StringToNumber' (StringToNumber)" in out


def test_partition_json_and_in_out_pair_options(model_file, capsys):
    args = parser().parse_args(["partition", str(model_file), "--json", "--in_out_pair",
                                "[[['text'], ['parse/StringToNumber', 'parse/Size']]]", "--in_out_pair_flag", "false"])
    assert cmd_partition(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mode"] == "in_out_pair ranges on the host (in_out_pair_flag False)"
    (segment,) = report["segments"]
    assert segment["inputs"] == ["parse/Size", "parse/StringToNumber"] and segment["outputs"] == ["scores"]
    assert "node_names" not in segment
    reasons = {h["name"]: h["reason"] for h in report["host"]}
    assert reasons["parse/tokens"] == "inside the in/out range of pair 1 (in_out_pair_flag False)"


@pytest.mark.parametrize("options,error,message", [
    (["--in_out_pair_flag", "maybe"], OptionError,
     "--in_out_pair_flag: 'maybe' is not a truth value; allowed: true or false"),
    (["--in_out_pair", "[[['text'], ['scores']]"], SessionOptionError,
     "NpuOptimizer option in_out_pair: \"[[['text'], ['scores']]\" is not a Python literal"),
    (["--in_out_pair", "[[['txt'], ['scores']]]"], OptionError,
     "in_out_pair: pair 1 in_nodes 'txt' is not in the graph (close: 'text')"),
])
def test_partition_option_mistakes(model_file, options, error, message):
    with pytest.raises(error) as caught:
        cmd_partition(parser().parse_args(["partition", str(model_file), *options]))
    assert str(caught.value).startswith(message)


def test_run_options_become_fuse_arguments(model_file, tmp_path):
    ops = tmp_path / "ops.json"
    ops.write_text(json.dumps({op: {"isGray": False, "isHeavy": False} for op in ("MatMul", "BiasAdd", "Mul")}))
    args = parser().parse_args(["run", str(model_file), "--mix_compile_mode", "--in_out_pair_flag", "FALSE",
                                "--in_out_pair", "[[['text'], ['parse/StringToNumber']]]", "--supported_ops_file",
                                str(ops)])
    options = partition_options_from_args(args)
    assert options == {"mix_compile_mode": True, "in_out_pair": "[[['text'], ['parse/StringToNumber']]]",
                       "in_out_pair_flag": False, "supported_ops_file": str(ops), "session_options": None}
    result = scopefusion.fuse(str(model_file), **options)
    report = result.partition.report
    assert report.reason("mlp/Rsqrt") == f"op Rsqrt is not in the back end's supported ops (supported-ops file {ops})"
    # a back end of MatMul, BiasAdd and Mul: dense layers fuse, GELUs (Erfc, Neg on the host) do not
    assert [f.name for f in result.report.pass_report("MatMulBiasAddFusionPass").fused] == [
        "mlp/dense_0/BiasAdd", "mlp/dense_1/BiasAdd", "mlp/logits/BiasAdd"]
    assert "lie outside the nodes the back end runs" in result.report.pass_report("GeluFusionPass").refused[0].reason
    assert [s.ops for s in report.segments] == [{"Mul": 1, "MatMulBiasAdd": 1}, {"Mul": 1},
                                                {"Mul": 2, "MatMulBiasAdd": 1}, {"Mul": 1},
                                                {"Mul": 2, "MatMulBiasAdd": 1}]


def test_run_reads_the_session_configuration_and_flags_override_it(model_file, tmp_path):
    config = tmp_path / "session.pbtxt"
    config.write_text(CONFIG)
    from_config = partition_options_from_args(parser().parse_args(["run", str(model_file), "--config", str(config)]))
    report = scopefusion.fuse(str(model_file), **from_config).partition.report
    assert report.mode == "in_out_pair ranges on the back end (in_out_pair_flag True)"
    assert report.where("mlp/mul") == "GeOp0_0" and report.where("parse/StringStrip") == "host"
    overridden = partition_options_from_args(parser().parse_args(
        ["run", str(model_file), "--config", str(config), "--in_out_pair", "[[['text'], ['parse/StringToNumber']]]",
         "--in_out_pair_flag", "false"]))
    report = scopefusion.fuse(str(model_file), **overridden).partition.report
    assert report.where("mlp/mul") == "GeOp0_0" and report.where("parse/tokens") == "host"
    assert report.mode == "in_out_pair ranges on the host (in_out_pair_flag False)"


def test_segments_dir_writes_each_segment_as_a_graph(model_file, tmp_path, capsys):
    out_dir = tmp_path / "segments"
    args = parser().parse_args(["run", str(model_file), "--mix_compile_mode", "--segments-dir", str(out_dir)])
    result = scopefusion.fuse(str(model_file), **partition_options_from_args(args))
    write_run_partition(args, result)
    manifest = json.loads((out_dir / "segments.json").read_text())
    assert [s["name"] for s in manifest["segments"]] == ["GeOp0_0", "GeOp0_1"]
    second = manifest["segments"][1]
    assert [i["tensor"] for i in second["inputs"]] == ["parse/Size", "parse/StringToNumber"]
    assert second["outputs"] == [{"identity": "scores_0_retval", "tensor": "scores", "dtype": "float32"}]
    graph = load_model(out_dir / "GeOp0_1.pb").graph_def
    assert {n.op for n in graph.node if n.name.endswith("_arg")} == {"Placeholder"}
    assert "wrote 2 segment graph(s)" in capsys.readouterr().err
    with pytest.raises(OptionError, match="--segments-dir .*: given without --mix_compile_mode"):
        partition_options_from_args(parser().parse_args(["run", str(model_file), "--segments-dir", str(out_dir)]))


def test_the_command_line_partitions_and_runs_mixed(model_file, tmp_path, capsys):
    """Through scopefusion.cli.main: `partition` prints the placement, `run --mix_compile_mode
    --verify` writes the partitioned graph and verifies its TensorFlow-runnable form."""
    from scopefusion.cli import main

    assert main(["partition", str(model_file)]) == 0
    out = capsys.readouterr().out
    assert "Segments (run by the back end)" in out and "host" in out
    from scopefusion.cli import EXAMPLE_MODEL  # numeric inputs: verify makes random feeds for them

    written = tmp_path / "mixed.pb"
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(written), "--mix_compile_mode", "--verify"]) == 0
    captured = capsys.readouterr()
    assert "verified" in captured.out
    graph = load_model(written).graph_def
    assert any(n.op == "GeOp" for n in graph.node) and graph.library.function
