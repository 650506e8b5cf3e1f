"""The scopefusion command, driven in-process through cli.main."""
from __future__ import annotations

import json

import pytest

from scopefusion import load_model
from scopefusion.cli import EXAMPLE_MODEL, main


def test_run_without_a_model_fuses_the_built_in_example(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run"]) == 0
    out = capsys.readouterr()
    assert "built-in example" in out.err
    # 5 layer norms (scope fusion), then 13 MatMul + bias and 2 GELUs (graph fusion), then 3 of those
    # MatMulBiasAdd with the activation after them (the two GELUs, the pooler's Tanh), the 4 layer norms
    # of residual sums with their add, and the two attention blocks (UB fusion)
    assert "ScopeLayerNormPass" in out.out and "GeluFusionPass" in out.out and "29 fused op(s)" in out.out
    written = tmp_path / "bert_tiny_fused.pb"
    graph = load_model(written).graph_def
    ops = [n.op for n in graph.node]
    assert [ops.count(op) for op in ("LayerNorm", "AddLayerNorm", "MatMulBiasAdd", "Gelu", "MatMulBiasAddActivation")
            ] == [1, 4, 10, 0, 3]


def test_run_with_options_report_and_text_output(tmp_path, capsys):
    out = tmp_path / "fused.pbtxt"
    report = tmp_path / "report.json"
    code = main(["run", str(EXAMPLE_MODEL), "-o", str(out), "--emit", "tf", "--report", str(report),
                 "--enable-scope-fusion-passes", " , ScopeLayerNormPass ,"])
    assert code == 0
    loaded = load_model(out)
    assert loaded.format == "pbtxt"
    calls = [n.attr["_scopefusion_op"].s.decode() for n in loaded.graph_def.node if n.op == "PartitionedCall"]
    assert sorted(set(calls)) == ["AddLayerNorm", "LayerNorm", "MatMulBiasAdd", "MatMulBiasAddActivation",
                                  "ScaledDotProductAttention"]
    assert (calls.count("LayerNorm"), calls.count("AddLayerNorm")) == (1, 4)  # 4 of the 5 read a residual sum
    data = json.loads(report.read_text())
    passes = {p["name"]: p for p in data["passes"]}
    ln, matmul, gelu = passes["ScopeLayerNormPass"], passes["MatMulBiasAddFusionPass"], passes["GeluFusionPass"]
    epilogue = passes["EpilogueFusionPass"]
    assert epilogue["fusion_type"] == "UBFusion" and epilogue["effect_times"] == 3
    assert ln["name"] == "ScopeLayerNormPass" and len(ln["fused"]) == 5 and ln["seconds"] >= 0
    assert (matmul["name"], matmul["fusion_type"], matmul["switch"]) == ("MatMulBiasAddFusionPass", "GraphFusion", "on")
    assert matmul["match_times"] == matmul["effect_times"] == len(matmul["fused"]) == 13
    assert gelu["name"] == "GeluFusionPass" and gelu["match_times"] == gelu["effect_times"] == 2
    assert set(data["stage_seconds"]) >= {"index", "scope.tree", "scope.match", "scope.apply", "scope.validate",
                                           "graph.index", "graph.match", "graph.apply", "graph.validate",
                                           "ub.index", "ub.match", "ub.apply", "ub.validate", "emit_tf"}


@pytest.mark.parametrize("argv,needle,status", [
    (["run", str(EXAMPLE_MODEL), "--enable_scope_fusion_passes", "ScopeLayerNormPas"],
     "did you mean 'ScopeLayerNormPass'", 2),  # a usage error
    (["run", "/nonexistent/model.pb"], "no such file", 3),  # any other error
    (["run", str(EXAMPLE_MODEL), "--outputs", "missing:0"], "missing:0", 2),
])
def test_errors_are_one_line_with_non_zero_exit(tmp_path, monkeypatch, capsys, argv, needle, status):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == status
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("scopefusion: error:") and needle in err[0]
    assert "Traceback" not in err[0]
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_malformed_model_and_refusing_to_overwrite_the_input(tmp_path, capsys):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x01\x02 not a graph")
    assert main(["run", str(bad), "-o", str(tmp_path / "o.pb")]) == 3
    assert "bad.pb: not a GraphDef" in capsys.readouterr().err
    model = tmp_path / "m.pb"
    model.write_bytes(EXAMPLE_MODEL.read_bytes())
    assert main(["run", str(model), "-o", str(model)]) == 2
    assert "refusing to overwrite the input" in capsys.readouterr().err
    assert model.read_bytes() == EXAMPLE_MODEL.read_bytes()


def test_debug_shows_the_traceback(tmp_path):
    from scopefusion import OptionError

    with pytest.raises(OptionError):
        main(["run", str(EXAMPLE_MODEL), "-o", str(tmp_path / "o.pb"), "--enable_scope_fusion_passes", "Nope",
              "--debug"])


def test_list_shows_the_builtin_pass(capsys):
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (ln,) = [p for p in data["passes"] if p["name"] == "ScopeLayerNormPass"]
    assert ln["general"] and ln["enabled"] and ln["origin"] == "built-in"
    assert data["fused_ops"]["LayerNorm"] == "built-in"


def test_the_console_script_prints_nothing_but_its_own_lines(tmp_path):
    """TensorFlow's native start-up notices (oneDNN, CUDA drivers, ...) stay off the terminal."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, "-m", "scopefusion.cli", "run", "-o", str(tmp_path / "o.pb"), "--verify"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == ["No model given: fusing the built-in example bert_tiny.pb"]
    assert "29 fused op(s)" in proc.stdout and "verified: 1 output(s) match" in proc.stdout


def test_nothing_it_writes_may_overwrite_the_input(tmp_path, capsys):
    model = tmp_path / "m.pb"
    model.write_bytes(EXAMPLE_MODEL.read_bytes())
    saved = tmp_path / "sm"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(b"the SavedModel's own file")
    cases = [
        (["run", str(model), "-o", str(tmp_path / "o.pb"), "--report", str(model)],
         f"{model}: refusing to overwrite the input model"),
        (["run", str(saved), "-o", str(saved / "saved_model.pb")],
         "refusing to overwrite the input model (it lies inside the SavedModel directory)"),
        (["run", str(saved), "-o", str(tmp_path / "o.pb"), "--report", str(saved / "variables.json")],
         "it lies inside the SavedModel directory"),
        (["run", str(model), "-o", str(tmp_path / "o.pb"), "--report", str(tmp_path / "o.pb")],
         "the report and the fused graph cannot go to the same file"),
        (["run", str(model), "-o", str(tmp_path / "o.pb"), "--report", str(tmp_path)],
         "is a directory; give a file name for the report"),
        (["run", str(model), "-o", str(tmp_path)], "is a directory; give a file name for the output"),
        (["run", str(model), "-o", str(tmp_path / "o.pb"), "--report", str(tmp_path / "no" / "r.json")],
         "does not exist"),
        (["run", str(model), "-o", str(tmp_path / "o.pb"), "--signature", "serving_default"],
         "is not a SavedModel directory"),
    ]
    for argv, needle in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("scopefusion: error:") and needle in err[0], (argv, err)
    assert model.read_bytes() == EXAMPLE_MODEL.read_bytes()
    assert (saved / "saved_model.pb").read_bytes() == b"the SavedModel's own file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pb", "sm"]  # checked before any work


@pytest.mark.parametrize("content", [b"", b"  \n", b"# a comment only\n"])
def test_a_model_without_nodes_is_an_error(tmp_path, capsys, content):
    empty = tmp_path / "empty.pbtxt"
    empty.write_bytes(content)
    assert main(["run", str(empty), "-o", str(tmp_path / "o.pb")]) == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("scopefusion: error:") and "the graph has no nodes" in line
    assert not (tmp_path / "o.pb").exists()


@pytest.mark.parametrize("argv,needle", [
    (["run", "m.pb", "--emit", "xyz"], "scopefusion: error: run: argument --emit: invalid choice: 'xyz'"),
    (["run", "m.pb", "--bogus-flag"], "unrecognized arguments: --bogus-flag"),
    (["verify", "m.pb"], "scopefusion: error: verify: the following arguments are required: fused"),
])
def test_usage_errors_are_one_line_with_status_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("scopefusion: error:") and needle in line and "--help" in line


def test_a_reader_that_goes_away_is_no_error(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(f"{sys.executable} -m scopefusion.cli list --json | head -c 1", shell=True,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.stdout == "{"
    assert "Error" not in proc.stderr and "error" not in proc.stderr


def test_unknown_plugin_names_in_block_and_only_are_warned_about(capsys):
    assert main(["list", "--json", "--block-plugin", "nosuch-plugin,other"]) == 0
    err = capsys.readouterr().err
    assert "warning: --block-plugin nosuch-plugin: no installed plugin has that" in err
    assert "warning: --block-plugin other:" in err


def test_verify_names_a_fused_op_nobody_declares(tmp_path, capsys):
    from scopefusion import load_model, save_graph

    graph = load_model(EXAMPLE_MODEL).graph_def
    node = next(n for n in graph.node if n.op == "Rsqrt")
    node.op = "MysteryFusedOp"
    save_graph(graph, tmp_path / "fused.pb")
    assert main(["verify", str(EXAMPLE_MODEL), str(tmp_path / "fused.pb")]) == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "neither TensorFlow ops nor declared fused ops: MysteryFusedOp (node" in line
    assert "is the plugin that declares them installed" in line


CONFIG = """graph_options {
  rewrite_options {
    custom_optimizers {
      name: "NpuOptimizer"
      parameter_map { key: "use_off_line" value { %s } }
      parameter_map { key: "enable_scope_fusion_passes" value { s: "ScopeInstanceNormPass" } }
    }
  }
}
"""


def test_config_check_prints_the_effective_options(tmp_path, capsys):
    config = tmp_path / "session.pbtxt"
    config.write_text(CONFIG % "b: true")
    assert main(["config", "check", str(config)]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:5]]
            for line in out.splitlines() if line.startswith("│")}
    assert rows["use_off_line"] == ["True", "set", "acted on"]
    assert rows["enable_scope_fusion_passes"] == ["ScopeInstanceNormPass", "set", "acted on"]
    assert rows["precision_mode"][1:] == ["default", "recorded"]


def test_config_check_rejects_a_wrong_value_kind_in_one_line(tmp_path, capsys):
    config = tmp_path / "session.pbtxt"
    config.write_text(CONFIG % "i: 3")
    assert main(["config", "check", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("scopefusion: error:") and "use_off_line" in err[0]
    assert "given an int (.i) = 3" in err[0] and "allowed: a bool (.b)" in err[0]
