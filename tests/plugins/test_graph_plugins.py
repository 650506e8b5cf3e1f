"""Graph passes from a real pip-installed plugin (``tests/plugins/packages/sf-test-graph``):
it contributes a graph pass, replaces a built-in one, and the fusion switch file turns
its pass off, through the API and the command line."""
from __future__ import annotations

import json

import pytest
import tensorflow as tf
from tests.helpers.installed_plugins import cli

import scopefusion
from scopefusion import FusionSwitch, PluginError, load_registry
from scopefusion.builtin_passes import BUILTIN_GRAPH_PASSES
from scopefusion.builtin_passes.graph.gelu import GeluFusionPass as BuiltinGeluFusionPass
from scopefusion.testing import graph_from_function

GRAPH_ORIGIN = "sf-test-graph 0.7.0"
BUILTIN_GRAPH_NAMES = [cls.name for cls in BUILTIN_GRAPH_PASSES]


def _block(x):
    """A squared ReLU (Primer), then an exact and a tanh GELU, on one input."""
    h = tf.square(tf.nn.relu(x))
    return tf.nn.gelu(h, approximate=False) + tf.nn.gelu(h * 2.0, approximate=True)


@pytest.fixture(scope="module")
def graph():
    return graph_from_function(_block, tf.TensorSpec([3, 5], tf.float32, "x"))


def _ops(graph_def) -> list[str]:
    return [n.op for n in graph_def.node]


def test_the_plugin_adds_a_graph_pass_and_replaces_a_builtin(use_plugins):
    use_plugins("sf-test-graph")
    reg = load_registry()
    assert reg.graph_pass_names() == [*BUILTIN_GRAPH_NAMES, "SquaredReluFusionPass"]
    gelu = reg.get("GeluFusionPass")
    assert gelu.origin == GRAPH_ORIGIN and gelu.replaces == "built-in" and gelu.cls is not BuiltinGeluFusionPass
    assert reg.get("SquaredReluFusionPass").origin == GRAPH_ORIGIN
    assert any("pass GeluFusionPass: built-in replaced by" in o and GRAPH_ORIGIN in o for o in reg.overrides)
    assert reg.fused_ops["SquaredRelu"].origin == GRAPH_ORIGIN


def test_the_plugin_passes_run_and_verify(use_plugins, graph):
    use_plugins("sf-test-graph")
    reg = load_registry()
    result = scopefusion.fuse(graph, registry=reg)
    ops = _ops(result.fused_graph_def)
    # the replacement fuses only the tanh GELU; the erf one stays as it was
    assert (ops.count("SquaredRelu"), ops.count("Gelu")) == (1, 1)
    assert "Erfc" in ops and "Tanh" not in ops
    (gelu,) = [n for n in result.fused_graph_def.node if n.op == "Gelu"]
    assert gelu.attr["approximate"].b is True
    report = result.report
    assert report.pass_report("SquaredReluFusionPass").origin == GRAPH_ORIGIN
    assert report.pass_report("SquaredReluFusionPass").match_times == 1
    assert any(GRAPH_ORIGIN in o for o in report.overrides)
    scopefusion.verify(graph, result.fused_graph_def, fused_ops=reg.fused_ops).assert_ok()


@pytest.mark.parametrize("text", [
    '{"Switch": {"GraphFusion": {"SquaredReluFusionPass": "off"}}}',
    "SquaredReluFusionPass:off\n",
])
def test_the_switch_file_turns_the_plugin_pass_off(use_plugins, graph, text):
    use_plugins("sf-test-graph")
    result = scopefusion.fuse(graph, registry=load_registry(), fusion_switch_file=FusionSwitch.from_text(text))
    ops = _ops(result.fused_graph_def)
    assert "SquaredRelu" not in ops and ops.count("Square") == 1
    pr = result.report.pass_report("SquaredReluFusionPass")
    assert pr.switch == "off (exact)" and not pr.ran and pr.fused == [] and pr.match_times == 0
    assert ops.count("Gelu") == 1  # the other graph passes still run


def test_blocking_the_plugin_restores_the_builtin(use_plugins, graph):
    use_plugins("sf-test-graph")
    reg = load_registry(block=["sf-test-graph"])
    assert reg.graph_pass_names() == BUILTIN_GRAPH_NAMES
    assert reg.get("GeluFusionPass").cls is BuiltinGeluFusionPass
    result = scopefusion.fuse(graph, registry=reg)
    assert _ops(result.fused_graph_def).count("Gelu") == 2


def test_a_name_used_by_a_scope_pass_and_a_graph_pass_is_an_error(use_plugins):
    from scopefusion import ScopeBasePass, ScopePattern, hookimpl

    class GeluFusionPass(ScopeBasePass):  # a scope pass named like the built-in graph pass
        def define_patterns(self):
            return [[[ScopePattern("X").add_scope_feature(suffix="x")]]]

        def generate_fusion_result(self, scopes, result):
            result.reject("never")

    class Plugin:
        @hookimpl
        def scopefusion_scope_passes(self):
            return [GeluFusionPass]

    with pytest.raises(PluginError, match="pass name 'GeluFusionPass' is used by a graph pass of built-in and a "
                                          "scope pass of plugin 'clash'"):
        load_registry(autoload=False, plugins=[("clash", Plugin())])


def test_cli_list_shows_graph_passes_with_origin_and_switch(plugin_dirs, tmp_path):
    listed = cli(plugin_dirs, ["sf-test-graph"], "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)["graph_passes"]}
    assert rows["GeluFusionPass"]["origin"] == GRAPH_ORIGIN and rows["GeluFusionPass"]["overrides"] == "built-in"
    assert rows["SquaredReluFusionPass"] == {
        "name": "SquaredReluFusionPass", "fusion_type": "GraphFusion", "on": True, "switch": "default",
        "forbidden_close": False, "origin": GRAPH_ORIGIN, "overrides": "",
        "description": "squared ReLU -> SquaredRelu (test plugin)",
    }
    switch = tmp_path / "switch.json"
    switch.write_text('{"Switch": {"GraphFusion": {"ALL": "off", "GeluFusionPass": "on"}}}')
    listed = cli(plugin_dirs, ["sf-test-graph"], "list", "--json", "--fusion_switch_file", str(switch))
    rows = {r["name"]: r for r in json.loads(listed.stdout)["graph_passes"]}
    expected = {cls.name: (False, "ALL") if cls.fusion_type == "GraphFusion" else (True, "default")
                for cls in BUILTIN_GRAPH_PASSES}  # the file switches the GraphFusion section only
    assert {n: (r["on"], r["switch"]) for n, r in rows.items()} == {
        **expected, "GeluFusionPass": (True, "exact"), "SquaredReluFusionPass": (False, "ALL")}
    table = cli(plugin_dirs, ["sf-test-graph"], "list", "--fusion_switch_file", str(switch))
    assert table.returncode == 0 and "Graph fusion passes" in table.stdout and GRAPH_ORIGIN in table.stdout


def test_cli_run_with_a_legacy_switch_file(plugin_dirs, tmp_path, graph):
    model = tmp_path / "model.pb"
    scopefusion.save_graph(graph, model)
    switch = tmp_path / "fusion_switch.cfg"
    switch.write_text("SquaredReluFusionPass:off\nGeluFusionPas:on\n")
    out = tmp_path / "fused.pb"
    ran = cli(plugin_dirs, ["sf-test-graph"], "run", str(model), "-o", str(out), "--fusion_switch_file",
              str(switch), "--verify")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "switched off by the fusion switch file: SquaredReluFusionPass" in ran.stdout
    assert "verified" in ran.stdout
    # an unknown name is a warning with the close match, not an error
    assert "GeluFusionPas" in ran.stderr and "did you mean 'GeluFusionPass'" in ran.stderr
    ops = _ops(scopefusion.load_model(out).graph_def)
    assert "SquaredRelu" not in ops and ops.count("Gelu") == 1


@pytest.mark.parametrize("content,needle", [
    ("", "is empty"),
    ('{"Switch": {"GraphFusion": {"GeluFusionPass": "maybe"}}}', "GeluFusionPass"),
    ("GeluFusionPass on\n", "line 1"),
])
def test_cli_rejects_a_bad_switch_file_before_any_work(plugin_dirs, tmp_path, content, needle):
    switch = tmp_path / "switch.cfg"
    switch.write_text(content)
    out = tmp_path / "fused.pb"
    ran = cli(plugin_dirs, [], "run", str(tmp_path / "no-such-model.pb"), "-o", str(out), "--fusion_switch_file",
              str(switch))
    assert ran.returncode == 2
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("scopefusion: error: fusion switch file") and needle in lines[0]
    assert not out.exists()


def test_a_plugin_whose_graph_hook_raises_is_named_and_skipped():
    from scopefusion import hookimpl

    class Raising:
        @hookimpl
        def scopefusion_graph_passes(self):
            raise ValueError("no graph passes today")

    reg = load_registry(autoload=False, plugins=[("raising", Raising())])
    (error,) = reg.errors
    assert "plugin 'raising'" in error and "scopefusion_graph_passes raised ValueError: no graph passes today" in error
    assert reg.graph_pass_names() == BUILTIN_GRAPH_NAMES
    with pytest.raises(PluginError, match="scopefusion_graph_passes raised ValueError"):
        load_registry(autoload=False, plugins=[("raising", Raising())], strict=True)


@pytest.mark.parametrize("contributed,needle", [
    ("not a class", "which is not a PatternFusionBasePass subclass"),
    (object, "which is not a PatternFusionBasePass subclass"),
])
def test_a_graph_hook_returning_something_else_is_an_error_naming_the_plugin(contributed, needle):
    from scopefusion import hookimpl

    class Wrong:
        @hookimpl
        def scopefusion_graph_passes(self):
            return [contributed]

    with pytest.raises(PluginError, match=needle) as info:
        load_registry(autoload=False, plugins=[("wrong", Wrong())])
    assert "plugin 'wrong'" in str(info.value)


def test_a_scope_pass_returned_by_the_graph_hook_is_an_error():
    from scopefusion import ScopeBasePass, ScopePattern, hookimpl

    class AScopePass(ScopeBasePass):
        def define_patterns(self):
            return [[[ScopePattern("X").add_scope_feature(suffix="x")]]]

        def generate_fusion_result(self, scopes, result):
            result.reject("never")

    class Misfiled:
        @hookimpl
        def scopefusion_graph_passes(self):
            return [AScopePass]

    with pytest.raises(PluginError, match="AScopePass.*not a PatternFusionBasePass subclass"):
        load_registry(autoload=False, plugins=[("misfiled", Misfiled())])
