"""Conventions people expect of a command: python -m, --version, --json wherever a result is printed,
-q, documented exit statuses, versions in the report, and a page whose counts link to what they count."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

import scopefusion
from scopefusion.cli import EXAMPLE_MODEL, main

CONFIG = """graph_options { rewrite_options { custom_optimizers {
  name: "NpuOptimizer"
  parameter_map { key: "use_off_line" value { b: true } }
  parameter_map { key: "enable_scope_fusion_passes" value { s: "ScopeInstanceNormPass" } }
} } }
"""


def test_python_dash_m_and_version():
    help_text = subprocess.run([sys.executable, "-m", "scopefusion", "--help"], capture_output=True, text=True,
                               timeout=120)
    assert help_text.returncode == 0 and "usage: scopefusion" in help_text.stdout
    version = subprocess.run([sys.executable, "-m", "scopefusion", "--version"], capture_output=True, text=True,
                             timeout=120)
    assert version.stdout.strip().startswith(f"scopefusion {scopefusion.__version__} (")
    forced = subprocess.run([sys.executable, "-m", "scopefusion", "--version"], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "SCOPEFUSION_PURE_PYTHON": "1"})
    assert forced.stdout.strip() == (f"scopefusion {scopefusion.__version__} "
                                     "(pure-Python core, forced by SCOPEFUSION_PURE_PYTHON)")


def test_verify_json_passes_and_fails_with_the_documented_statuses(tmp_path, capsys):
    fused = tmp_path / "f.pb"
    assert main(["run", "-q", "-o", str(fused)]) == 0
    capsys.readouterr()
    assert main(["verify", str(EXAMPLE_MODEL), str(fused), "--json", "--runs", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is True and data["runs"] == 1
    assert [o["name"] for o in data["outputs"]] == ["bert/pooler/dense/Tanh:0"]
    assert main(["verify", str(EXAMPLE_MODEL), str(fused), "--json", "--runs", "1", "--atol", "0", "--rtol", "0"]) == 1
    assert json.loads(capsys.readouterr().out)["passed"] is False


def test_config_check_json(tmp_path, capsys):
    config = tmp_path / "session.pbtxt"
    config.write_text(CONFIG)
    assert main(["config", "check", str(config), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["option"]: row for row in data["options"]}
    assert rows["use_off_line"]["value"] == "True" and rows["use_off_line"]["source"] == "set"
    assert rows["use_off_line"]["acted_on"] is True and rows["precision_mode"]["source"] == "default"
    assert set(data["set"]) == {"use_off_line", "enable_scope_fusion_passes"}


def test_quiet_prints_only_the_closing_line(tmp_path, capsys):
    assert main(["run", "-q", "-o", str(tmp_path / "o.pb")]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines() == [f"wrote {tmp_path / 'o.pb'} (fused form): 234 -> 129 nodes, "
                                                 "29 fused op(s)"]
    assert captured.err == ""


@pytest.mark.parametrize("argv, status", [
    (["run", "--emit", "xyz"], 2),  # argparse
    (["run", "--enable_scope_fusion_passes", "NoSuchPass"], 2),  # a bad option value
    (["run", "/no/such/model.pb"], 3),  # any other error
])
def test_exit_statuses(argv, status, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code == status
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("scopefusion: error: ") and not line.startswith("scopefusion: error: scopefusion")


def test_the_report_records_the_versions(tmp_path):
    report = tmp_path / "r.json"
    assert main(["run", "-q", "-o", str(tmp_path / "o.pb"), "--report", str(report)]) == 0
    versions = json.loads(report.read_text())["versions"]
    assert versions["scopefusion"] == scopefusion.__version__
    assert set(versions) == {"scopefusion", "tensorflow", "protobuf", "python"}
    assert re.fullmatch(r"\d+\.\d+.*", versions["tensorflow"])


def test_the_pages_counts_link_to_what_they_count(tmp_path):
    page = tmp_path / "run.html"
    assert main(["run", "-q", "-o", str(tmp_path / "o.pb"), "--html", str(page)]) == 0
    html = page.read_text()
    links = re.findall(r'<a href="#([^"]+)">(\d+)</a>', html)
    assert {count for _, count in links} >= {"5", "13", "2", "3"}  # layer norms, MatMul + bias, GELUs, epilogues
    for anchor, _ in links:
        assert f'id="{anchor}"' in html, anchor
    assert f"scopefusion {scopefusion.__version__}, tensorflow " in html
