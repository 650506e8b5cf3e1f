"""The plugin kit: the example plugin package, the new-plugin scaffold and the
pytest plugin, each installed with pip and tested the way a pass author would."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scopefusion.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "scopefusion-example-plugin"


def _pip_install(src: Path, target: Path) -> None:
    staged = target.parent / f"src-{src.name}"
    shutil.copytree(src, staged, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
           "--disable-pip-version-check", "--target", str(target), str(staged)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PIP_ROOT_USER_ACTION="ignore"))
    assert proc.returncode == 0, proc.stderr


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    env.pop("SCOPEFUSION_BLOCK_PLUGINS", None)
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


@pytest.fixture(scope="session")
def example_site(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("example") / "site"
    _pip_install(EXAMPLE, target)
    return target


def test_example_plugin_is_listed_with_distribution_and_version(example_site):
    out = _run(["-m", "scopefusion.cli", "list", "--json"], _env(example_site))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    passes = {p["name"]: p for p in data["passes"]}
    assert passes["ScopeL2NormalizePass"]["origin"] == "scopefusion-example-plugin 0.1.0"
    assert not passes["ScopeL2NormalizePass"]["general"] and not passes["ScopeL2NormalizePass"]["enabled"]
    assert passes["ScopeLayerNormPass"]["origin"] == "scopefusion-example-plugin 0.1.0"
    assert passes["ScopeLayerNormPass"]["overrides"] == "built-in"
    (plugin,) = data["plugins"]
    assert plugin["distribution"] == "scopefusion-example-plugin" and plugin["version"] == "0.1.0"
    assert plugin["passes"] == ["ScopeL2NormalizePass", "ScopeLayerNormPass"]
    assert plugin["fused_ops"] == ["L2Normalize", "LayerNormV2"]
    table = _run(["-m", "scopefusion.cli", "list", "--plugins"], _env(example_site))
    assert "scopefusion-example-plugin" in table.stdout and "L2Normalize" in table.stdout


def test_example_plugin_passes_its_own_tests(example_site):
    out = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")], _env(example_site))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout


def test_uninstalled_example_leaves_the_builtin(example_site):
    out = _run(["-m", "scopefusion.cli", "list", "--json"], _env())
    passes = {p["name"]: p for p in json.loads(out.stdout)["passes"]}
    assert "ScopeL2NormalizePass" not in passes
    assert passes["ScopeLayerNormPass"]["origin"] == "built-in"
    blocked = _run(["-m", "scopefusion.cli", "list", "--json", "--block-plugin", "scopefusion-example-plugin"],
                   _env(example_site))
    data = json.loads(blocked.stdout)
    assert {p["origin"] for p in data["passes"]} == {"built-in"}
    assert "ScopeL2NormalizePass" not in {p["name"] for p in data["passes"]}
    assert data["plugins"][0]["blocked"] is True
    others_only = _run(["-m", "scopefusion.cli", "list", "--json", "--only-plugins", "some-other-plugin"],
                       _env(example_site))
    assert json.loads(others_only.stdout)["plugins"][0]["blocked"] is True
    allowed = _run(["-m", "scopefusion.cli", "list", "--json", "--only-plugins", "example"], _env(example_site))
    assert "ScopeL2NormalizePass" in {p["name"] for p in json.loads(allowed.stdout)["passes"]}


def test_scaffolded_plugin_installs_and_passes_its_tests(tmp_path, capsys):
    assert main(["new-plugin", "acme-norms", "--dir", str(tmp_path)]) == 0
    root = tmp_path / "acme-norms"
    assert "wrote" in capsys.readouterr().out
    assert (root / "src" / "acme_norms" / "passes.py").is_file()
    site = tmp_path / "site"
    _pip_install(root, site)
    listed = json.loads(_run(["-m", "scopefusion.cli", "list", "--json"], _env(site)).stdout)
    assert {p["name"]: p["origin"] for p in listed["passes"]}["AcmeNormsScaleShiftPass"] == "acme-norms 0.1.0"
    out = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests")], _env(site), cwd=root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout


def test_scaffold_refuses_bad_names_and_existing_directories(tmp_path, capsys):
    assert main(["new-plugin", "9lives", "--dir", str(tmp_path)]) == 1
    assert "plugin name '9lives'" in capsys.readouterr().err
    assert main(["new-plugin", "ok-name", "--dir", str(tmp_path)]) == 0
    assert main(["new-plugin", "ok-name", "--dir", str(tmp_path)]) == 1
    assert "already exists" in capsys.readouterr().err


def test_assert_helpers_report_what_went_wrong():
    import tensorflow as tf
    from scale_shift import SCALE_SHIFT, ScaleShiftPass

    from scopefusion.testing import PassTester, assert_fused, graph_from_function

    def model(x):
        with tf.name_scope("blk"):
            return x * 2.0 + 1.0

    graph = graph_from_function(model, tf.TensorSpec([2, 2], tf.float32, "x"))
    tester = PassTester().with_passes([ScaleShiftPass], [SCALE_SHIFT])
    result = tester.run(graph, only=["ScaleShiftPass"])
    assert_fused(result, "ScaleShift", 1, scale=2.0, shift=1.0)
    with pytest.raises(AssertionError, match="expected 2 fused ScaleShift node"):
        assert_fused(result, "ScaleShift", 2)
    with pytest.raises(AssertionError, match="shift is 1.0, expected 3.0"):
        assert_fused(result, "ScaleShift", 1, shift=3.0)
    with pytest.raises(AssertionError, match="scope 'blk' was fused"):
        tester.assert_not_matched(result, "blk")
    tester.assert_verified(graph, result)
