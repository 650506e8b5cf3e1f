"""A session configuration steers fusion: its enable_scope_fusion_passes, fusion_switch_file,
graph_run_mode and use_off_line apply to ``fuse`` (and ``scopefusion run --config``) unless an
argument gives the same option; the report says which source set each."""
from __future__ import annotations

import functools

import activation_models as am
import conv_models as cm
from pass_checks import REGISTRY, op_count, pass_report

import scopefusion
from scopefusion.cli import main
from scopefusion.core.graph.io import load_model, save_graph
from scopefusion.core.session import npu_options

GELU = "GeluFusionPass"
FOLD = "ConvBatchnormFusionPass"
GELU_OFF = '{"Switch": {"GraphFusion": {"GeluFusionPass": "off"}, "UBFusion": {"ALL": "off"}}}'
GRAPH_STAGE_ONLY = scopefusion.FusionSwitch.from_text('{"Switch": {"UBFusion": {"ALL": "off"}}}')


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
    assert result.report.nodes_after == result.report.nodes_before
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
