"""docs/writing-a-pass.md is executable: every code block in it is run here."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest

from scopefusion import save_graph
from scopefusion.testing import PassTester

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "writing-a-pass.md"


def _blocks() -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", GUIDE.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def guide() -> types.ModuleType:
    """The guide's Python blocks (all but the package's plugin module), run in order in one namespace."""
    module = types.ModuleType("guide")
    for lang, code in _blocks():
        if lang == "python" and not code.startswith("# my_passes/plugin.py"):
            exec(compile(code, str(GUIDE), "exec"), module.__dict__)
    return module


def test_every_block_is_one_this_test_knows():
    kinds = [lang for lang, _ in _blocks()]
    assert kinds == ["python"] * 12 + ["toml", "bash"]


def test_the_guide_test_functions_pass(guide):
    guide.test_gelu_is_fused_and_verified(PassTester())
    guide.test_a_look_alike_is_refused_with_a_reason(PassTester())
    guide.test_hard_swish_is_fused_and_verified(PassTester())
    guide.test_the_switch_file_turns_it_off(PassTester())


def test_the_graph_pass_fuses_the_keras_spelling_too(guide):
    """Keras writes x * relu6(x + 3) / 6; the pass's second alternative is that."""
    import tensorflow as tf

    def keras_style(x):
        return x * tf.nn.relu6(x + 3.0) / 6.0

    helper = PassTester().with_passes([guide.HardSwishFusionPass], [guide.HARD_SWISH])
    graph = helper.graph_from_function(keras_style, tf.TensorSpec([2, 5], tf.float32, "x"))
    result = helper.run(graph)
    helper.assert_fused(result, "HardSwish", 1)
    helper.assert_verified(graph, result)


def test_the_inner_graph_variant_applies_and_approximates(guide):
    helper = PassTester().with_passes([guide.ScopeGeluAsSigmoidPass], [guide.GELU_TANH])
    # only this pass: the built-in SwishFusionPass would fuse its x * sigmoid(1.702 x) inner graph again
    result = helper.run(guide.graph_def, only="ScopeGeluAsSigmoidPass")
    names = {n.name for n in result.graph_def.node}
    assert {"ffn/gelu/k", "ffn/gelu/kx", "ffn/gelu/gate", "ffn/gelu/y"} <= names
    assert result.report.fused[0].inner_nodes == 4
    helper.assert_verified(guide.graph_def, result, atol=0.05, rtol=0.05)
    with pytest.raises(AssertionError):  # it is an approximation: the default tolerance sees it
        helper.assert_verified(guide.graph_def, result)


def test_the_published_package_installs_lists_and_runs(guide, tmp_path):
    blocks = _blocks()
    gelu = next(code for lang, code in blocks if code.startswith("# my_passes/gelu.py"))
    hard_swish = next(code for lang, code in blocks if code.startswith("# my_passes/hard_swish.py"))
    plugin = next(code for lang, code in blocks if code.startswith("# my_passes/plugin.py"))
    pyproject = next(code for lang, code in blocks if lang == "toml")
    commands = next(code for lang, code in blocks if lang == "bash").strip().splitlines()
    assert tomllib.loads(pyproject)["project"]["entry-points"]["scopefusion"] == {"my_passes": "my_passes.plugin"}

    src = tmp_path / "my-passes"
    (src / "my_passes").mkdir(parents=True)
    (src / "pyproject.toml").write_text(pyproject)
    (src / "my_passes" / "__init__.py").write_text("")
    (src / "my_passes" / "gelu.py").write_text(gelu)
    (src / "my_passes" / "hard_swish.py").write_text(hard_swish)
    (src / "my_passes" / "plugin.py").write_text(plugin)
    site = tmp_path / "site"
    env = dict(os.environ, PYTHONPATH=str(site), PIP_ROOT_USER_ACTION="ignore")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=tmp_path)

    # the three commands of the guide, the install going to a private target
    assert commands[0] == "pip install ."
    done = run("-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
               "--target", str(site), str(src))
    assert done.returncode == 0, done.stderr
    assert commands[1] == "scopefusion list --plugins"
    listed = run("-m", "scopefusion.cli", "list", "--plugins")
    assert listed.returncode == 0 and "my-passes" in listed.stdout and "GeluTanh" in listed.stdout
    data = json.loads(run("-m", "scopefusion.cli", "list", "--json").stdout)
    assert {p["name"]: p["origin"] for p in data["passes"]}["ScopeGeluTanhPass"] == "my-passes 0.1.0"
    assert {p["name"]: p["origin"] for p in data["graph_passes"]}["HardSwishFusionPass"] == "my-passes 0.1.0"
    assert commands[2].split()[:3] == ["scopefusion", "run", "model.pb"]
    save_graph(guide.graph_def, tmp_path / "model.pb")
    fused = run("-m", "scopefusion.cli", *commands[2].split()[1:])
    assert fused.returncode == 0, fused.stdout + fused.stderr
    assert "verified" in fused.stdout and (tmp_path / "model_fused.pb").is_file()
    shutil.rmtree(src)
