"""The registry, against real pip-installed plugin distributions.

Each package under ``tests/plugins/packages`` is installed once per session
into its own target directory; a test puts the directories it needs on
``sys.path`` (or on ``PYTHONPATH`` of a subprocess), so the ``scopefusion``
entry-point group holds exactly those plugins.
"""
from __future__ import annotations

import json
import sys

import importlib_metadata
import pytest
from tests.helpers.installed_plugins import (cli, cli_env, group_names, loaded_plugin_modules, reset_import_state,
                                            run_command)

from scopefusion import OptionError, PluginError
from scopefusion.core.fusion.options import FusionOptions
from scopefusion.core.scope.pass_manager import ScopePassManager
from scopefusion.builtin_passes import BUILTIN_FUSED_OPS, BUILTIN_PASSES
from scopefusion.builtin_passes.scope.layer_norm import ScopeLayerNormPass as BuiltinLayerNormPass
from scopefusion.plugins.registry import (
    ALLOW_ENV,
    BLOCK_ENV,
    BUILTIN,
    ENTRY_POINT_GROUP,
    NO_AUTOLOAD_ENV,
    discover_entry_points,
    load_registry,
)

#: The built-in passes, in registration order; plugin passes come after them.
BUILTIN_NAMES = [cls.name for cls in BUILTIN_PASSES]
BUILTIN_OPS = [op.name for op in BUILTIN_FUSED_OPS]

EXTRA_ORIGIN = "sf-test-extra 1.2.3"
OVERRIDE_DESCRIPTION = "LayerNorm as overridden by sf-test-extra"


# ------------------------------------------------------------------- built-ins
def test_builtins_only_without_plugin_dirs(use_plugins):
    assert group_names() == set()
    reg = load_registry()
    assert reg.pass_names() == BUILTIN_NAMES
    spec = reg.get("ScopeLayerNormPass")
    assert spec.cls is BuiltinLayerNormPass
    assert spec.origin == BUILTIN == "built-in"
    assert spec.general is True
    assert spec.replaces is None
    assert "LayerNorm" in reg.fused_ops
    assert reg.fused_op_origins["LayerNorm"] == BUILTIN
    assert reg.fused_ops["LayerNorm"].signature() == "LayerNorm(x, gamma, beta) -> (y, mean, variance)"
    assert reg.plugins == []
    assert reg.overrides == []


# ---------------------------------------------------------------- a plugin
def test_installed_plugin_is_in_the_entry_point_group(use_plugins):
    use_plugins("sf-test-extra")
    eps = list(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP))
    assert [(ep.name, ep.value, ep.dist.name, ep.dist.version) for ep in eps] == [
        ("extra", "sf_test_extra.plugin", "sf-test-extra", "1.2.3")
    ]


def test_plugin_passes_fused_op_and_override(use_plugins):
    use_plugins("sf-test-extra")
    reg = load_registry()
    # The plugin's hook lists TestExtraPass first; the override still takes the built-in's slot.
    assert reg.pass_names() == [*BUILTIN_NAMES, "TestExtraPass", "TestExtraLatePass"]

    ln = reg.passes[0]
    assert ln.origin == EXTRA_ORIGIN
    assert ln.replaces == "built-in"
    assert ln.cls is not BuiltinLayerNormPass
    assert ln.cls.__module__ == "sf_test_extra.plugin"
    assert issubclass(ln.cls, BuiltinLayerNormPass)
    assert ln.description == OVERRIDE_DESCRIPTION
    assert ln.general is True

    assert len(reg.overrides) == 1
    line = reg.overrides[0]
    assert "ScopeLayerNormPass" in line and "sf-test-extra" in line and "1.2.3" in line

    for name in ("TestExtraPass", "TestExtraLatePass"):
        spec = reg.get(name)
        assert spec.general is False
        assert spec.origin == EXTRA_ORIGIN
        assert spec.replaces is None

    assert list(reg.fused_ops) == [*BUILTIN_OPS, "TestExtra"]
    assert reg.fused_op_origins == {**{op: BUILTIN for op in BUILTIN_OPS}, "TestExtra": EXTRA_ORIGIN}

    [info] = reg.plugins
    assert (info.name, info.distribution, info.version, info.value) == (
        "extra", "sf-test-extra", "1.2.3", "sf_test_extra.plugin")
    assert info.blocked is False
    assert info.origin == EXTRA_ORIGIN
    assert info.passes == ["TestExtraPass", "ScopeLayerNormPass", "TestExtraLatePass"]
    assert info.fused_ops == ["TestExtra"]


@pytest.mark.parametrize("path_order", [("sf-test-more", "sf-test-extra"), ("sf-test-extra", "sf-test-more")])
def test_registration_order_is_deterministic(use_plugins, path_order):
    """Built-ins first, then plugins by distribution name (not path order, not entry-point name)."""
    use_plugins(*path_order)
    discovered = [ep.name for ep in discover_entry_points()]
    assert discovered == ["extra", "aaa_more"]
    reg = load_registry()
    assert reg.pass_names() == [*BUILTIN_NAMES, "TestExtraPass", "TestExtraLatePass", "TestMorePass"]
    assert [p.distribution for p in reg.plugins] == ["sf-test-extra", "sf-test-more"]
    assert reg.get("TestMorePass").origin == "sf-test-more 0.5.0"
    assert load_registry().pass_names() == reg.pass_names()


def test_removing_the_plugin_restores_the_builtin(use_plugins):
    [extra_dir] = use_plugins("sf-test-extra")
    assert load_registry().get("ScopeLayerNormPass").origin == EXTRA_ORIGIN

    sys.path.remove(str(extra_dir))
    reset_import_state()
    reg = load_registry()
    assert reg.pass_names() == BUILTIN_NAMES
    spec = reg.get("ScopeLayerNormPass")
    assert spec.cls is BuiltinLayerNormPass
    assert spec.origin == BUILTIN
    assert spec.replaces is None
    assert reg.overrides == []
    assert "TestExtra" not in reg.fused_ops
    assert reg.plugins == []


# -------------------------------------------------------------------- errors
@pytest.mark.parametrize("path_order", [("sf-test-dup", "sf-test-extra"), ("sf-test-extra", "sf-test-dup")])
def test_same_pass_name_from_two_plugins_is_an_error_naming_both(use_plugins, path_order):
    use_plugins(*path_order)
    with pytest.raises(PluginError) as info:
        load_registry()
    message = str(info.value)
    assert "'TestExtraPass'" in message
    assert "sf-test-dup 0.4.0" in message
    assert "sf-test-extra 1.2.3" in message


def test_plugin_that_fails_to_import(use_plugins):
    use_plugins("sf-test-broken")
    with pytest.raises(PluginError) as info:
        load_registry()
    message = str(info.value)
    assert "sf-test-broken" in message
    assert "sf_test_broken.plugin" in message  # the entry point's value
    assert "ImportError" in message and "no_such_dependency_xyz" in message
    assert isinstance(info.value.__cause__, ImportError)


def test_hook_that_raises_skips_that_plugin_and_strict_makes_it_an_error(use_plugins):
    use_plugins("sf-test-badhook", "sf-test-extra")
    registry = load_registry()
    (error,) = registry.errors
    assert "'badhook'" in error and "sf-test-badhook 0.2.0" in error
    assert "scopefusion_scope_passes" in error
    assert "RuntimeError" in error and "hook exploded" in error and error.endswith("skipped")
    (bad,) = [p for p in registry.plugins if p.name == "badhook"]
    assert bad.error == error and bad.passes == [] and bad.fused_ops == []
    assert "TestExtraPass" in registry.pass_names()  # the other plugin still loads
    with pytest.raises(PluginError) as info:
        load_registry(strict=True)
    message = str(info.value)
    assert "'badhook'" in message and "sf-test-badhook 0.2.0" in message and "hook exploded" in message
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_generator_hook_that_raises_is_skipped_like_any_other():
    from scopefusion import hookimpl

    class GeneratorPlugin:
        @hookimpl
        def scopefusion_scope_passes(self):
            raise ValueError("generator exploded")
            yield  # pragma: no cover - makes this a generator

    registry = load_registry(autoload=False, plugins=[("sf_generator", GeneratorPlugin())])
    (error,) = registry.errors
    assert "'sf_generator'" in error and "raised ValueError: generator exploded" in error
    with pytest.raises(PluginError, match="generator exploded"):
        load_registry(autoload=False, plugins=[("sf_generator", GeneratorPlugin())], strict=True)


def test_cli_reports_a_plugin_whose_hook_raises(plugin_dirs, tmp_path):
    from scopefusion.cli import EXAMPLE_MODEL

    listed = cli(plugin_dirs, ["sf-test-badhook"], "list", "--plugins")
    assert listed.returncode == 0, listed.stderr
    assert "skipped: hook raised" in listed.stdout
    assert "scopefusion: error: plugin 'badhook' (distribution sf-test-badhook 0.2.0" in listed.stderr
    out = tmp_path / "o.pb"
    ran = cli(plugin_dirs, ["sf-test-badhook"], "run", str(EXAMPLE_MODEL), "-o", str(out))
    assert ran.returncode == 0, ran.stderr
    assert "hook exploded" in ran.stdout and "29 fused op(s)" in ran.stdout
    strict = cli(plugin_dirs, ["sf-test-badhook"], "run", str(EXAMPLE_MODEL), "-o", str(tmp_path / "s.pb"),
                  "--strict")
    assert strict.returncode == 3
    (line,) = strict.stderr.strip().splitlines()
    assert line.startswith("scopefusion: error: plugin 'badhook'") and "hook exploded" in line
    assert not (tmp_path / "s.pb").exists()


def test_hook_that_returns_a_non_pass(use_plugins):
    use_plugins("sf-test-notpass")
    with pytest.raises(PluginError) as info:
        load_registry()
    message = str(info.value)
    assert "'notpass'" in message and "sf-test-notpass 0.3.0" in message
    assert "NotAPass" in message and "not a ScopeBasePass subclass" in message


# ------------------------------------------------------------------ blocking
@pytest.mark.parametrize(
    "how, value",
    [
        ("argument", "sf-test-broken"),
        ("argument", "broken"),  # entry-point name
        ("env", "sf-test-broken"),
        ("env", " sf-test-other , broken ,"),
        ("argument", "SF_Test.Broken"),  # distribution names are normalised
    ],
)
def test_blocked_plugin_is_skipped(use_plugins, monkeypatch, how, value):
    use_plugins("sf-test-broken", "sf-test-extra")
    if how == "env":
        monkeypatch.setenv(BLOCK_ENV, value)
        reg = load_registry()
    else:
        reg = load_registry(block=[value])
    assert reg.pass_names() == [*BUILTIN_NAMES, "TestExtraPass", "TestExtraLatePass"]
    status = {p.distribution: p.blocked for p in reg.plugins}
    assert status == {"sf-test-broken": True, "sf-test-extra": False}
    broken = next(p for p in reg.plugins if p.distribution == "sf-test-broken")
    assert (broken.name, broken.value, broken.passes) == ("broken", "sf_test_broken.plugin", [])
    assert "sf_test_broken.plugin" not in sys.modules
    assert "sf_test_extra.plugin" in sys.modules


def test_block_argument_and_env_add_up(use_plugins, monkeypatch):
    use_plugins("sf-test-broken", "sf-test-badhook", "sf-test-extra")
    monkeypatch.setenv(BLOCK_ENV, "badhook")
    reg = load_registry(block=["sf-test-broken"])
    assert {p.distribution for p in reg.plugins if p.blocked} == {"sf-test-broken", "sf-test-badhook"}
    assert reg.get("ScopeLayerNormPass").origin == EXTRA_ORIGIN


@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_autoload_switched_off_by_env(use_plugins, monkeypatch, value):
    use_plugins("sf-test-broken", "sf-test-extra")
    monkeypatch.setenv(NO_AUTOLOAD_ENV, value)
    reg = load_registry()
    assert reg.pass_names() == BUILTIN_NAMES
    assert reg.get("ScopeLayerNormPass").cls is BuiltinLayerNormPass
    assert reg.plugins == []
    assert loaded_plugin_modules() == set()


def test_autoload_env_set_to_false_still_loads(use_plugins, monkeypatch):
    use_plugins("sf-test-extra")
    monkeypatch.setenv(NO_AUTOLOAD_ENV, "0")
    assert load_registry().get("ScopeLayerNormPass").origin == EXTRA_ORIGIN


def test_autoload_argument(use_plugins):
    use_plugins("sf-test-broken", "sf-test-extra")
    reg = load_registry(autoload=False)
    assert reg.pass_names() == BUILTIN_NAMES
    assert reg.plugins == []
    assert loaded_plugin_modules() == set()


@pytest.mark.parametrize("allowed", [["sf-test-extra"], ["extra"], ["extra", "not-installed"]])
def test_allow_list_argument(use_plugins, allowed):
    use_plugins("sf-test-broken", "sf-test-badhook", "sf-test-extra")
    reg = load_registry(only=allowed)
    assert reg.pass_names() == [*BUILTIN_NAMES, "TestExtraPass", "TestExtraLatePass"]
    status = {p.distribution: p.blocked for p in reg.plugins}
    assert status == {"sf-test-badhook": True, "sf-test-broken": True, "sf-test-extra": False}
    assert loaded_plugin_modules() == {"sf_test_extra", "sf_test_extra.plugin"}


def test_allow_list_env(use_plugins, monkeypatch):
    use_plugins("sf-test-broken", "sf-test-extra")
    monkeypatch.setenv(ALLOW_ENV, " extra ,")
    reg = load_registry()
    assert {p.distribution: p.blocked for p in reg.plugins} == {"sf-test-broken": True, "sf-test-extra": False}
    assert reg.get("TestExtraPass").origin == EXTRA_ORIGIN


# -------------------------------------------------------------- pass manager
def _manager(reg, enable=None) -> ScopePassManager:
    options = FusionOptions() if enable is None else FusionOptions(enable_scope_fusion_passes=enable)
    return ScopePassManager(reg.passes, reg.fused_ops, options)


def test_non_general_plugin_pass_is_off_by_default(use_plugins):
    use_plugins("sf-test-extra")
    manager = _manager(load_registry())
    assert [s.name for s in manager.enabled] == ["ScopeLayerNormPass", "ScopeLayerNormGradPass"]
    assert manager.enabled[0].origin == EXTRA_ORIGIN


def test_enabling_a_plugin_pass(use_plugins):
    use_plugins("sf-test-extra")
    manager = _manager(load_registry(), " TestExtraPass , ,")
    assert manager.options.enable_scope_fusion_passes == ["TestExtraPass"]
    assert [s.name for s in manager.enabled] == ["ScopeLayerNormPass", "ScopeLayerNormGradPass", "TestExtraPass"]
    assert manager.enabled[2].origin == EXTRA_ORIGIN


def test_unknown_pass_name_suggests_the_plugin_pass(use_plugins):
    use_plugins("sf-test-extra")
    with pytest.raises(OptionError) as info:
        _manager(load_registry(), "TestExtraPas")
    message = str(info.value)
    assert "'TestExtraPas'" in message
    assert "did you mean 'TestExtraPass'" in message


def test_plugin_pass_name_is_unknown_without_the_plugin(use_plugins):
    with pytest.raises(OptionError, match="unknown pass 'TestExtraPass'"):
        _manager(load_registry(), "TestExtraPass")


@pytest.mark.parametrize("enable", ["TestExtraLatePass,TestExtraPass", "TestExtraPass,TestExtraLatePass"])
def test_option_order_does_not_change_run_order(use_plugins, enable):
    use_plugins("sf-test-extra")
    manager = _manager(load_registry(), enable)
    assert [s.name for s in manager.enabled] == ["ScopeLayerNormPass", "ScopeLayerNormGradPass", "TestExtraPass",
                                                 "TestExtraLatePass"]


def _extra_graph():
    from tests.helpers.graph_helpers import make_graph

    return make_graph([
        ("x", "Placeholder", [], {"dtype": _attr(type=1)}),
        ("net/extra_block/a", "Relu", ["x"]),
        ("net/extra_block/b", "Relu", ["net/extra_block/a"]),
        ("net/late_block/r", "Relu", ["net/extra_block/b"]),
        ("out", "Identity", ["net/late_block/r"]),
    ])


def _attr(**kw):
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

    return AttrValue(**kw)


@pytest.mark.parametrize("enable", ["TestExtraLatePass,TestExtraPass", "TestExtraPass,TestExtraLatePass"])
def test_enabled_plugin_passes_run_in_registration_order(use_plugins, enable):
    use_plugins("sf-test-extra")
    reg = load_registry()
    outcome = _manager(reg, enable).run(_extra_graph())
    report = outcome.report
    assert [p.name for p in report.passes] == ["ScopeLayerNormPass", "ScopeLayerNormGradPass", "TestExtraPass",
                                               "TestExtraLatePass"]
    extra = report.passes[2]
    assert extra.origin == EXTRA_ORIGIN
    assert [(f.name, f.type) for f in extra.fused] == [("net/extra_block", "TestExtra")]
    late = report.passes[3]
    assert late.fused == []
    assert [r.reason for r in late.refused] == ["rejected by the pass: TestExtraLatePass never fuses"]
    nodes = {n.name: n for n in outcome.graph_def.node}
    assert nodes["net/extra_block"].op == "TestExtra"
    assert list(nodes["net/extra_block"].input) == ["x"]
    assert list(nodes["net/late_block/r"].input) == ["net/extra_block"]
    assert "net/extra_block/a" not in nodes and "net/extra_block/b" not in nodes


def test_plugin_pass_does_not_run_unless_enabled(use_plugins):
    use_plugins("sf-test-extra")
    reg = load_registry()
    outcome = _manager(reg).run(_extra_graph())
    assert [p.name for p in outcome.report.passes] == ["ScopeLayerNormPass", "ScopeLayerNormGradPass"]
    assert {n.op for n in outcome.graph_def.node} == {"Placeholder", "Relu", "Identity"}


# ----------------------------------------------------------------------- CLI
def test_cli_list_json_shows_the_override(plugin_dirs):
    proc = cli(plugin_dirs, ["sf-test-extra"], "list", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    rows = {r["name"]: r for r in data["passes"]}
    assert [r["name"] for r in data["passes"]] == [*BUILTIN_NAMES, "TestExtraPass", "TestExtraLatePass"]
    assert rows["ScopeLayerNormPass"] == {
        "name": "ScopeLayerNormPass", "general": True, "enabled": True, "origin": EXTRA_ORIGIN,
        "overrides": "built-in", "description": OVERRIDE_DESCRIPTION,
    }
    assert rows["TestExtraPass"]["general"] is False and rows["TestExtraPass"]["enabled"] is False
    assert data["plugins"] == [{
        "name": "extra", "distribution": "sf-test-extra", "version": "1.2.3",
        "entry_point": "sf_test_extra.plugin", "blocked": False, "error": None,
        "passes": ["TestExtraPass", "ScopeLayerNormPass", "TestExtraLatePass"], "graph_passes": [],
        "fused_ops": ["TestExtra"],
    }]
    assert data["fused_ops"] == {**{op: "built-in" for op in BUILTIN_OPS}, "TestExtra": EXTRA_ORIGIN}
    assert len(data["overrides"]) == 1 and "sf-test-extra 1.2.3" in data["overrides"][0]


def test_cli_list_json_enable(plugin_dirs):
    proc = cli(plugin_dirs, ["sf-test-extra"], "list", "--json", "--enable_scope_fusion_passes", "TestExtraPass")
    assert proc.returncode == 0, proc.stderr
    enabled = {r["name"]: r["enabled"] for r in json.loads(proc.stdout)["passes"]}
    builtins = {cls.name: cls.general for cls in BUILTIN_PASSES}
    assert enabled == {**builtins, "TestExtraPass": True, "TestExtraLatePass": False}


def test_cli_list_table_shows_the_override(plugin_dirs):
    proc = cli(plugin_dirs, ["sf-test-extra"], "list")
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if "ScopeLayerNormPass" in line and "│" in line)
    assert EXTRA_ORIGIN in row and "built-in" in row
    assert OVERRIDE_DESCRIPTION.split(" sf-test-extra")[0] in row  # the column may wrap the rest
    assert ("override: pass ScopeLayerNormPass: built-in replaced by plugin 'extra' "
            "(distribution sf-test-extra 1.2.3") in proc.stdout


def test_cli_list_without_plugins(plugin_dirs):
    proc = cli(plugin_dirs, [], "list", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [(r["name"], r["origin"], r["overrides"]) for r in data["passes"]] == [
        (name, "built-in", "") for name in BUILTIN_NAMES]
    assert data["plugins"] == [] and data["overrides"] == []


@pytest.mark.parametrize("how", ["--block-plugin", "--block_plugin", "env"])
def test_cli_block_plugin(plugin_dirs, how):
    if how == "env":
        proc = cli(plugin_dirs, ["sf-test-broken", "sf-test-extra"], "list", "--json",
                    **{BLOCK_ENV: "sf-test-broken"})
    else:
        proc = cli(plugin_dirs, ["sf-test-broken", "sf-test-extra"], "list", "--json", how, "sf-test-broken")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {p["distribution"]: p["blocked"] for p in data["plugins"]} == {
        "sf-test-broken": True, "sf-test-extra": False}
    assert data["passes"][0]["origin"] == EXTRA_ORIGIN


@pytest.mark.parametrize("args", [["list"], ["list", "--json"]])
def test_cli_broken_plugin_is_one_line_error(plugin_dirs, args):
    proc = cli(plugin_dirs, ["sf-test-broken", "sf-test-extra"], *args)
    assert proc.returncode == 3
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("scopefusion: error:")
    assert "sf-test-broken" in lines[0] and "sf_test_broken.plugin" in lines[0]
    assert "Traceback" not in proc.stderr


def test_cli_unknown_pass_is_one_line_error(plugin_dirs):
    proc = cli(plugin_dirs, ["sf-test-extra"], "list", "--enable_scope_fusion_passes", "TestExtraPas")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("scopefusion: error:"), proc.stderr
    assert "did you mean 'TestExtraPass'" in lines[0]


NO_TF_SCRIPTS = {
    "list": "from scopefusion.cli import main; assert main(['list']) == 0",
    "list --json --plugins": "from scopefusion.cli import main; assert main(['list', '--json', '--plugins']) == 0",
    "build_parser": "from scopefusion.cli import build_parser; build_parser().format_help()",
    "--help": (
        "from scopefusion.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "else:\n    raise AssertionError('--help did not exit')"
    ),
    "list --help": (
        "from scopefusion.cli import main\n"
        "try:\n    main(['list', '--help'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "else:\n    raise AssertionError('list --help did not exit')"
    ),
}


@pytest.mark.parametrize("what", list(NO_TF_SCRIPTS))
def test_cli_list_and_help_do_not_import_tensorflow(plugin_dirs, what):
    script = (
        "import sys\n" + NO_TF_SCRIPTS[what] + "\n"
        "loaded = sorted(m for m in sys.modules if m == 'tensorflow' or m.startswith('tensorflow.'))\n"
        "assert not loaded, loaded[:5]\n"
        "assert 'sf_test_extra.plugin' in sys.modules or " + repr(what) + ".endswith(('help', 'parser'))\n"
        "print('NO-TF-OK')\n"
    )
    proc = run_command([sys.executable, "-c", script], cli_env(plugin_dirs, "sf-test-extra"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("NO-TF-OK")


# ------------------------------------------------------------ hook validation
def test_hook_with_a_wrong_signature_is_a_plugin_error(use_plugins):
    import types

    from scopefusion import hookimpl

    module = types.ModuleType("sf_wrong_signature")

    @hookimpl
    def scopefusion_scope_passes(graph):  # the spec takes no argument
        return []

    module.scopefusion_scope_passes = scopefusion_scope_passes
    with pytest.raises(PluginError, match="sf_wrong_signature.* cannot be registered"):
        load_registry(autoload=False, plugins=[("sf_wrong_signature", module)])


def test_misspelled_hook_is_a_plugin_error(use_plugins):
    import types

    from scopefusion import hookimpl

    module = types.ModuleType("sf_misspelled")

    @hookimpl
    def scopefusion_scope_pass():
        return []

    module.scopefusion_scope_pass = scopefusion_scope_pass
    with pytest.raises(PluginError, match="'sf_misspelled'.* unknown hook"):
        load_registry(autoload=False, plugins=[("sf_misspelled", module)])
