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
    assert "ScopeLayerNormPass" in out.out and "5 fused op(s)" in out.out
    written = tmp_path / "bert_tiny_fused.pb"
    graph = load_model(written).graph_def
    assert sum(n.op == "LayerNorm" for n in graph.node) == 5


def test_run_with_options_report_and_text_output(tmp_path, capsys):
    out = tmp_path / "fused.pbtxt"
    report = tmp_path / "report.json"
    code = main(["run", str(EXAMPLE_MODEL), "-o", str(out), "--emit", "tf", "--report", str(report),
                 "--enable-scope-fusion-passes", " , ScopeLayerNormPass ,"])
    assert code == 0
    loaded = load_model(out)
    assert loaded.format == "pbtxt"
    assert sum(n.op == "PartitionedCall" for n in loaded.graph_def.node) == 5
    data = json.loads(report.read_text())
    (ln,) = data["passes"]
    assert ln["name"] == "ScopeLayerNormPass" and len(ln["fused"]) == 5 and ln["seconds"] >= 0
    assert set(data["stage_seconds"]) >= {"index", "scope_graph", "match", "apply", "validate", "emit_tf"}


@pytest.mark.parametrize("argv,needle", [
    (["run", str(EXAMPLE_MODEL), "--enable_scope_fusion_passes", "ScopeLayerNormPas"],
     "did you mean 'ScopeLayerNormPass'"),
    (["run", "/nonexistent/model.pb"], "no such file"),
    (["run", str(EXAMPLE_MODEL), "--outputs", "missing:0"], "missing:0"),
])
def test_errors_are_one_line_with_non_zero_exit(tmp_path, monkeypatch, capsys, argv, needle):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("scopefusion: error:") and needle in err[0]
    assert "Traceback" not in err[0]
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_malformed_model_and_refusing_to_overwrite_the_input(tmp_path, capsys):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x01\x02 not a graph")
    assert main(["run", str(bad), "-o", str(tmp_path / "o.pb")]) == 1
    assert "bad.pb: not a GraphDef" in capsys.readouterr().err
    model = tmp_path / "m.pb"
    model.write_bytes(EXAMPLE_MODEL.read_bytes())
    assert main(["run", str(model), "-o", str(model)]) == 1
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
    proc = subprocess.run([sys.executable, "-m", "scopefusion.cli", "run", "-o", str(tmp_path / "o.pb")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == ["No model given: fusing the built-in example bert_tiny.pb"]
    assert "5 fused op(s)" in proc.stdout
