"""A session configuration steers fusion: its enable_scope_fusion_passes, fusion_switch_file,
graph_run_mode and use_off_line apply to ``fuse`` (and ``scopefusion run --config``) unless an
argument gives the same option; the report says which source set each."""
from __future__ import annotations

import functools

from tests.models import activation_models as am
from tests.models import conv_models as cm
from tests.models import layer_norm_models as lm
import pytest
from tests.models.norm_models import HIDDEN
from tests.helpers.pass_checks import REGISTRY, op_count, pass_report

import scopefusion
from scopefusion.cli import main
from scopefusion.core.graph.io import load_model, save_graph
from scopefusion.core.parameters import ParameterError
from scopefusion.core.options import npu_options
from scopefusion.api import verify

GELU = "GeluFusionPass"
FOLD = "ConvBatchnormFusionPass"
GELU_OFF = '{"Switch": {"GraphFusion": {"GeluFusionPass": "off"}, "UBFusion": {"ALL": "off"}}}'
GRAPH_STAGE_ONLY = scopefusion.FusionSwitch.from_text('{"Switch": {"UBFusion": {"ALL": "off"}}}')
#: A layer norm of a residual sum ends as the UBFusion stage's AddLayerNorm: both hold one layer norm.
LAYER_NORMS = ("LayerNorm", "AddLayerNorm")


def config_text(**params: str) -> str:
    """A ConfigProto (text format) whose NpuOptimizer has ``params`` (each an AttrValue in text)."""
    entries = "".join(f'      parameter_map {{ key: "{k}" value {{ {v} }} }}\n' for k, v in params.items())
    return ("graph_options {\n  rewrite_options {\n    custom_optimizers {\n      name: \"NpuOptimizer\"\n"
            f"{entries}    }}\n  }}\n}}\n")


@functools.cache
def gelu_model() -> am.ActivationModel:
    return am.bert_erf()


def test_the_configurations_switch_file_applies_and_an_argument_overrides_it(tmp_path):
    switch = tmp_path / "switch.json"
    switch.write_text(GELU_OFF)
    config = tmp_path / "session.pbtxt"
    config.write_text(config_text(fusion_switch_file=f's: "{switch}"'))
    graph = gelu_model().graph_def
    baseline = scopefusion.fuse(graph, registry=REGISTRY, fusion_switch_file=GRAPH_STAGE_ONLY)
    assert op_count(baseline.fused_graph_def, "Gelu") == gelu_model().gelus

    steered = scopefusion.fuse(graph, registry=REGISTRY, session_options=str(config))
    assert op_count(steered.fused_graph_def, "Gelu") == 0
    assert pass_report(steered, GELU).switch.startswith("off")
    assert steered.report.option_sources == {"fusion_switch_file": "session configuration"}

    argument = scopefusion.fuse(graph, registry=REGISTRY, session_options=str(config),
                                fusion_switch_file=GRAPH_STAGE_ONLY)
    assert op_count(argument.fused_graph_def, "Gelu") == gelu_model().gelus
    assert argument.report.option_sources == {"fusion_switch_file": "argument"}


def test_use_off_line_false_fuses_nothing():
    graph = gelu_model().graph_def
    options = npu_options(use_off_line=False)
    result = scopefusion.fuse(graph, registry=REGISTRY, session_options=options)
    assert result.report.passes == []
    # nothing fused: the graph as given, plus the node recording the options for a back end
    assert result.report.options_node == "NpuOptimizer"
    assert result.report.nodes_after == result.report.nodes_before + 1
    assert [n for n in result.fused_graph_def.node if n.name != "NpuOptimizer"] == list(graph.node)
    assert result.report.option_sources == {"use_off_line": "session configuration"}


def test_graph_run_mode_training_skips_passes_unsafe_for_training():
    m = cm.FOLD_FORMS["tf_keras_convnet[channels_last]"]()
    inference = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    assert pass_report(inference, FOLD).fused
    training = scopefusion.fuse(m.graph_def, registry=REGISTRY,
                                session_options=npu_options(graph_run_mode=1))
    assert pass_report(training, FOLD).fused == []
    assert "training" in pass_report(training, FOLD).switch
    assert training.report.option_sources == {"graph_run_mode": "session configuration"}
    # online inference (0) is what a run without a configuration does
    online = scopefusion.fuse(m.graph_def, registry=REGISTRY,
                              session_options=npu_options(graph_run_mode=0))
    assert len(pass_report(online, FOLD).fused) == len(pass_report(inference, FOLD).fused)


def test_the_configuration_enables_scope_passes(tmp_path):
    options = npu_options(enable_scope_fusion_passes="ScopeInstanceNormPass")
    result = scopefusion.fuse(gelu_model().graph_def, registry=REGISTRY, session_options=options)
    assert "ScopeInstanceNormPass" in [p.name for p in result.report.passes]
    assert result.report.option_sources == {"enable_scope_fusion_passes": "session configuration"}
    default = scopefusion.fuse(gelu_model().graph_def, registry=REGISTRY)
    assert "ScopeInstanceNormPass" not in [p.name for p in default.report.passes]


def test_run_config_on_the_command_line(tmp_path, capsys):
    switch = tmp_path / "switch.json"
    switch.write_text(GELU_OFF)
    config = tmp_path / "session.pbtxt"
    config.write_text(config_text(fusion_switch_file=f's: "{switch}"'))
    model = tmp_path / "bert.pb"
    save_graph(gelu_model().graph_def, model)
    out = tmp_path / "fused.pb"
    assert main(["run", str(model), "--config", str(config), "-o", str(out)]) == 0
    fused = load_model(out).graph_def
    assert op_count(fused, "Gelu") == 0


# ---------------------------------------------------------------- input_shape and its gears
def shapeless_layer_norms():
    """Two hand-written layer norms over axis 2 (a positive axis, as tf_slim and transformers
    write it) of an input exported without a shape: nothing can tell the input's rank."""
    m = lm.hand_written_layer_norm("rsqrt", axis=2)
    graph = type(m.graph_def)()
    graph.CopyFrom(m.graph_def)
    for node in graph.node:
        if node.op == "Placeholder":
            node.attr["shape"].shape.Clear()
            node.attr["shape"].shape.unknown_rank = True
        node.attr.pop("_output_shapes", None)
    return m, graph


DYNAMIC = dict(input_shape=f'x:-1,-1,{HIDDEN}', dynamic_dims="2,4;3,5;1,7", dynamic_node_type=1)


def placeholder_dims(graph, name="x"):
    shape = next(n for n in graph.node if n.name == name).attr["shape"].shape
    return None if shape.unknown_rank else [d.size for d in shape.dim]


def test_declared_input_shapes_let_a_positive_axis_be_checked():
    m, graph = shapeless_layer_norms()
    plain = scopefusion.fuse(graph, registry=REGISTRY)
    assert op_count(plain.fused_graph_def, *LAYER_NORMS) == 0
    assert "cannot tell the rank of the input" in pass_report(plain, "LayerNormFusionPass").refused[0].reason

    declared = scopefusion.fuse(graph, registry=REGISTRY, input_shapes=f"x:-1,-1,{HIDDEN}")
    assert op_count(declared.fused_graph_def, *LAYER_NORMS) == m.graph_layer_norms == 2
    assert declared.report.input_shapes == {"x": [-1, -1, HIDDEN]}
    assert declared.report.option_sources == {"input_shape": "argument"}
    assert placeholder_dims(declared.fused_graph_def) == [-1, -1, HIDDEN]  # the promise fusion relied on
    assert placeholder_dims(graph) is None  # the caller's graph is not changed
    assert verify(graph, declared.fused_graph_def, registry=REGISTRY, input_shapes=f"x:3,5,{HIDDEN}").passed

    configured = scopefusion.fuse(graph, registry=REGISTRY, config=npu_options(**DYNAMIC))
    assert op_count(configured.fused_graph_def, *LAYER_NORMS) == 2
    assert configured.report.option_sources == {"input_shape": "session configuration"}
    # dataset inputs (dynamic_node_type 0) are not placeholders: nothing declared, and said so
    dataset = scopefusion.fuse(graph, registry=REGISTRY, config=npu_options(**{**DYNAMIC, "dynamic_node_type": 0}))
    assert op_count(dataset.fused_graph_def, *LAYER_NORMS) == 0 and dataset.report.input_shapes == {}
    assert any("dynamic_node_type 0" in w for w in dataset.report.warnings)


def test_declared_input_shapes_are_checked_against_the_graph():
    m, graph = shapeless_layer_norms()
    with pytest.raises(ParameterError, match=r"input_shapes: y: no placeholder of the graph has that name; "
                       r"placeholders: x"):
        scopefusion.fuse(graph, registry=REGISTRY, input_shapes="y:-1,4")
    with pytest.raises(ParameterError, match=r"has rank 2, the graph's x has rank 3"):
        scopefusion.fuse(m.graph_def, registry=REGISTRY, input_shapes="x:2,4")  # the original keeps its shape
    with pytest.raises(ParameterError, match=r"contradicts the graph's shape \[2, 4, 16\]"):
        scopefusion.fuse(m.graph_def, registry=REGISTRY, input_shapes="x:-1,5,-1")
    with pytest.raises(ParameterError, match="dimensions must be positive, or -1"):
        scopefusion.fuse(graph, registry=REGISTRY, input_shapes="x:-2,4,16")


def test_run_verifies_once_per_gear(tmp_path, capsys):
    _, graph = shapeless_layer_norms()
    model = tmp_path / "shapeless.pb"
    save_graph(graph, model)
    config = tmp_path / "session.pbtxt"
    config.write_text(config_text(input_shape=f's: "{DYNAMIC["input_shape"]}"', dynamic_dims='s: "2,4;3,5;1,7"',
                                  dynamic_node_type="i: 1"))
    out = tmp_path / "fused.pb"
    assert main(["run", str(model), "--config", str(config), "-o", str(out), "--verify", "--runs", "1"]) == 0
    printed = capsys.readouterr().out
    for k, gear in enumerate(("x:2,4,16", "x:3,5,16", "x:1,7,16"), 1):
        assert f"Verification, gear {k} of 3: {gear} (1 run)" in printed
    assert printed.count("verified: 1 output(s) match") == 3
    assert "from the session configuration: input_shape" in printed
    assert f"input shapes declared (-1: dynamic), kept on the fused graph's placeholders: x:-1,-1,{HIDDEN}" in printed
    assert op_count(load_model(out).graph_def, *LAYER_NORMS) == 2
    # a shape given on the command line wins over the configuration's gears: one verification
    assert main(["run", str(model), "--config", str(config), "-o", str(out), "--verify", "--runs", "1",
                 "--input_shape", f"x:2,3,{HIDDEN}"]) == 0
    printed = capsys.readouterr().out
    assert "gear" not in printed and printed.count("verified: 1 output(s) match") == 1


# ------------------------------------------------------- options only a back end uses: recorded
BACK_END_ONLY = dict(graph_memory_max_size=str(8 << 30), op_compiler_cache_mode="enable",
                     hcom_parallel=True, precision_mode="allow_mix_precision")


def test_options_a_back_end_uses_are_recorded_in_the_output_graph():
    graph = gelu_model().graph_def
    result = scopefusion.fuse(graph, registry=REGISTRY, config=npu_options(**BACK_END_ONLY), emit="tf",
                              fusion_switch_file=GRAPH_STAGE_ONLY)
    report = result.report
    assert sorted(report.recorded_options) == sorted(BACK_END_ONLY)
    assert report.options_node == "NpuOptimizer"
    for graph_def in (result.fused_graph_def, result.graph_def):  # both forms carry them
        node = next(n for n in graph_def.node if n.name == "NpuOptimizer")
        assert node.op == "NoOp" and not node.input
        attrs = {k: v.s.decode() for k, v in node.attr.items()}
        assert attrs["_graph_memory_max_size"] == str(8 << 30)
        assert attrs["_op_compiler_cache_mode"] == "enable"
        assert attrs["_hcom_parallel"] == "1"
        assert attrs["_precision_mode"] == "allow_mix_precision"
        assert attrs["_use_off_line"] == "1" and attrs["_NpuOptimizer"] == "NpuOptimizer"
    assert op_count(result.fused_graph_def, "Gelu") == gelu_model().gelus  # fusion went on as usual
    assert verify(graph, result.graph_def, registry=REGISTRY).passed  # TensorFlow runs the recorded node
    # without a configuration nothing is recorded
    plain = scopefusion.fuse(graph, registry=REGISTRY)
    assert plain.report.options_node is None and plain.report.recorded_options == []
    assert not any(n.name.startswith("NpuOptimizer") for n in plain.fused_graph_def.node)


def test_the_record_node_takes_a_free_name_and_config_is_given_once():
    graph = gelu_model().graph_def
    taken = type(graph)()
    taken.CopyFrom(graph)
    taken.node.add(name="NpuOptimizer", op="NoOp")
    result = scopefusion.fuse(taken, registry=REGISTRY, config=npu_options(hcom_parallel=True))
    assert result.report.options_node == "NpuOptimizer_1"
    with pytest.raises(ParameterError, match="config: give the session configuration once"):
        scopefusion.fuse(graph, registry=REGISTRY, config=npu_options(), session_options=npu_options())


def test_run_prints_what_was_recorded(tmp_path, capsys):
    model = tmp_path / "bert.pb"
    save_graph(gelu_model().graph_def, model)
    config = tmp_path / "session.pbtxt"
    config.write_text(config_text(op_compiler_cache_mode='s: "enable"', hcom_parallel="b: true"))
    assert main(["run", str(model), "--config", str(config), "-o", str(tmp_path / "out.pb")]) == 0
    printed = capsys.readouterr().out
    assert ("session options written on node NpuOptimizer for a back end; set there and not acted on here: "
            "hcom_parallel, op_compiler_cache_mode") in " ".join(printed.split())
