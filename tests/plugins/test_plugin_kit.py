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

ROOT = Path(__file__).resolve().parents[2]
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
    assert main(["new-plugin", "9lives", "--dir", str(tmp_path)]) == 2
    assert "plugin name '9lives'" in capsys.readouterr().err
    assert main(["new-plugin", "ok-name", "--dir", str(tmp_path)]) == 0
    assert main(["new-plugin", "ok-name", "--dir", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_assert_helpers_report_what_went_wrong():
    import tensorflow as tf
    from tests.helpers.scale_shift import SCALE_SHIFT, ScaleShiftPass

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


# ------------------------------------------------- review fixes: helper and scaffold
def _blk_graph():
    import tensorflow as tf

    from scopefusion.testing import graph_from_function

    def model(x):
        with tf.name_scope("blk"):
            y = x * 2.0 + 1.0
        with tf.name_scope("other"):
            return tf.nn.relu(y)

    return graph_from_function(model, tf.TensorSpec([2, 2], tf.float32, "x"))


def test_helper_runs_strict_and_assertions_show_pass_errors():
    from tests.helpers.scale_shift import SCALE_SHIFT, ScaleShiftPass

    from scopefusion.core.errors import PassError
    from scopefusion.testing import PassTester, assert_fused, assert_not_matched

    class KeyErrorPass(ScaleShiftPass):
        name = "KeyErrorPass"

        def generate_fusion_result(self, scopes, result):
            raise KeyError("no such attr")

    graph = _blk_graph()
    tester = PassTester().with_passes([KeyErrorPass], [SCALE_SHIFT])
    with pytest.raises(PassError, match=r"pass KeyErrorPass \(test-passes local\) raised KeyError") as caught:
        tester.run(graph)
    assert isinstance(caught.value.__cause__, KeyError)

    lenient = tester.run(graph, strict=False)
    assert lenient.report.pass_report("KeyErrorPass").error
    with pytest.raises(AssertionError, match=r"found 0, but 1 pass\(es\) raised .*KeyError: 'no such attr'"):
        assert_fused(lenient, "ScaleShift", 1)
    with pytest.raises(AssertionError, match="KeyError"):  # a count of 0 is no proof either
        assert_fused(lenient, "ScaleShift", 0)
    with pytest.raises(AssertionError, match=r"scope 'blk' was not fused, but .*KeyErrorPass.*KeyError"):
        assert_not_matched(lenient, "blk")

    working = PassTester().with_passes([ScaleShiftPass], [SCALE_SHIFT]).run(graph)
    assert_fused(working, "ScaleShift", 1)  # no error: the strict default changes nothing


def test_assert_not_matched_checks_the_scope_exists_and_says_why():
    import tensorflow as tf
    from tests.helpers.scale_shift import SCALE_SHIFT, ScaleShiftPass, build_graph

    from scopefusion.testing import PassTester, assert_not_matched, graph_from_function

    tester = PassTester().with_passes([ScaleShiftPass], [SCALE_SHIFT])

    # a near miss: blk subtracts instead of adding
    near_graph, _, _ = build_graph("near")
    near = tester.run(near_graph, only=["ScaleShiftPass"])
    assert assert_not_matched(near, "blk") == (
        "ScaleShiftPass: pattern ScaleShift: exactly 1 AddV2 node(s) wanted, 0 found")
    with pytest.raises(AssertionError, match=r"no scope named 'blkk' in the graph; scopes with a similar name: 'blk'"):
        assert_not_matched(near, "blkk")
    with pytest.raises(AssertionError,
                       match=r"no scope named 'nowhere' in the graph; scopes with a similar name: none"):
        assert_not_matched(near, "nowhere")

    # a scope that exists but no pattern came near
    plain = tester.run(_blk_graph(), only=["ScaleShiftPass"])
    assert assert_not_matched(plain, "other") == "no pattern matched it"
    # a typo of a nested scope's name suggests the full name
    with pytest.raises(AssertionError, match=r"scopes with a similar name: 'model/blk'"):
        assert_not_matched(tester.run(build_graph("plain")[0], only=["ScaleShiftPass"]), "model/blkk")

    # a scope inside a fused scope was fused with it
    def nested(x):
        with tf.name_scope("blk"):
            with tf.name_scope("inner"):
                m = x * 2.0
            return m + 1.0

    fused = tester.run(graph_from_function(nested, tf.TensorSpec([2], tf.float32, "x")))
    with pytest.raises(AssertionError,
                       match=r"scope 'blk/inner' lies inside scope 'blk', which was fused as ScaleShift"):
        assert_not_matched(fused, "blk/inner")

    # matched and refused: the refusal reason
    def variable_shift(x):
        with tf.name_scope("blk"):
            return x * 2.0 + tf.reduce_sum(x)

    refused = tester.run(graph_from_function(variable_shift, tf.TensorSpec([2], tf.float32, "x")))
    assert refused.report.pass_report("ScaleShiftPass").matched_scopes == ["blk"]
    assert assert_not_matched(refused, "blk") == (
        "ScaleShiftPass: rejected by the pass: scale or shift is not constant")


def test_only_runs_the_named_passes_general_or_not():
    from tests.helpers.scale_shift import SCALE_SHIFT, ScaleShiftPass

    from scopefusion.testing import PassTester, assert_fused

    class OptInPass(ScaleShiftPass):
        name = "OptInPass"
        general = False

    graph = _blk_graph()
    tester = PassTester().with_passes([ScaleShiftPass, OptInPass], [SCALE_SHIFT])
    result = tester.run(graph, only=["OptInPass"])
    assert [p.name for p in result.report.passes] == ["OptInPass"]
    assert_fused(result, "ScaleShift", 1)
    assert [p.name for p in tester.run(graph, only="OptInPass, ScaleShiftPass").report.passes] == [
        "ScaleShiftPass", "OptInPass"]
    default = [p.name for p in tester.run(graph).report.passes]
    assert "ScaleShiftPass" in default and "OptInPass" not in default


WITH_PASSES_SCRIPT = '''
import json
import tensorflow as tf
from scopefusion.testing import PassTester, graph_from_function
from scopefusion_example_plugin.l2_normalize import L2_NORMALIZE, ScopeL2NormalizePass

def model(x):
    with tf.name_scope("head"):
        return tf.math.l2_normalize(x, axis=-1)

graph = graph_from_function(model, tf.TensorSpec([2, 4], tf.float32, "x"))
out = {}
for autoload in (False, True):
    helper = PassTester().with_passes([ScopeL2NormalizePass], [L2_NORMALIZE], autoload=autoload)
    result = helper.run(graph, enable="ScopeL2NormalizePass")
    helper.assert_fused(result, "L2Normalize", 1)
    out[str(autoload)] = {
        "origins": {p.name: p.origin for p in helper.registry.passes},
        "plugins": {p.distribution: p.blocked for p in helper.registry.plugins},
    }
print(json.dumps(out))
'''


def test_with_passes_works_once_the_same_plugin_is_installed(example_site, tmp_path):
    more = tmp_path / "more"
    _pip_install(ROOT / "tests" / "plugins" / "packages" / "sf-test-more", more)
    out = _run(["-c", WITH_PASSES_SCRIPT], _env(example_site, more))
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(out.stdout.strip().splitlines()[-1])
    # default: the built-ins plus exactly the given passes; no installed plugin
    not_builtin = {name: origin for name, origin in data["False"]["origins"].items() if origin != "built-in"}
    assert not_builtin == {"ScopeL2NormalizePass": "test-passes local"}
    assert data["False"]["origins"]["ScopeLayerNormPass"] == "built-in"
    assert data["False"]["plugins"] == {"test-passes": False}
    # autoload=True: other plugins load, the installed copy of the given one does not
    origins = data["True"]["origins"]
    assert origins["ScopeL2NormalizePass"] == "test-passes local"
    assert origins["ScopeLayerNormPass"] == "built-in"  # the example's override went with its plugin
    assert origins["TestMorePass"] == "sf-test-more 0.5.0"
    assert data["True"]["plugins"] == {"scopefusion-example-plugin": True, "sf-test-more": False, "test-passes": False}


@pytest.mark.parametrize("name, message", [
    ("foo-", "plugin name 'foo-' is not a valid distribution name"),
    ("x_", "plugin name 'x_' is not a valid distribution name"),
    ("_foo", "plugin name '_foo' is not a valid distribution name"),
    ("my plugin", "plugin name 'my plugin' is not a valid distribution name"),
    ("class", "module name 'class', which is not a valid Python identifier"),
    ("typing", "its module 'typing' would shadow the standard-library module 'typing'"),
    ("numpy", "its module 'numpy' would shadow the installed module 'numpy'"),
    ("PyTest", "its module 'pytest' would shadow the installed module 'pytest'"),
    ("scopefusion", "its module 'scopefusion' would shadow the installed module 'scopefusion'"),
    ("protobuf", "a distribution protobuf"),  # module name free, distribution name taken
])
def test_scaffold_rejects_names_with_one_line(name, message, tmp_path, capsys):
    assert main(["new-plugin", name, "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scopefusion: error: ") and err.count("\n") == 1, err
    assert message in err
    assert list(tmp_path.iterdir()) == []


def test_scaffold_names_and_directories(tmp_path, capsys):
    from scopefusion.core.errors import ScopeFusionError
    from scopefusion.cli.new_plugin import check_name, new_plugin

    assert check_name("Acme_Norms.v2") == ("acme-norms-v2", "acme_norms_v2")
    assert check_name("a") == ("a", "a")
    a_file = tmp_path / "file"
    a_file.write_text("")
    for target, status in ((a_file, 2), (a_file / "sub", 3)):  # a bad --dir; a directory the system cannot make
        assert main(["new-plugin", "acme-norms", "--dir", str(target)]) == status
        err = capsys.readouterr().err
        assert err.startswith("scopefusion: error: ") and err.count("\n") == 1, err
        assert "Error:" not in err and "not a directory" in err.lower()
    (tmp_path / "acme-norms").mkdir()
    with pytest.raises(ScopeFusionError, match="already exists"):
        new_plugin("acme_norms", tmp_path)  # same distribution name, other spelling
    assert list((tmp_path / "acme-norms").iterdir()) == []
