"""The seeds' worked examples, as their users run them: seed 000's ATC flag and session configuration
(with the reference's pass name), seed 002's four switch files, seed 003's two ``in_out_pair``
examples as written (and the same two scenarios on a graph that has the nodes), seed 004's option
table and call example.  Each does here what its seed says, or says clearly what only a device does."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tests.models.detection_models import ssd_postprocess_graph
from tests.models.partition_models import detection_pipeline
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig
from tests.passes.detection.test_detection import od  # noqa: F401 - the OD API install fixture, shared

import scopefusion
from scopefusion.api import load_switch, switch_warnings
from scopefusion.core.graph_fusion.device_passes import DEVICE_PASSES
from scopefusion.core.options import SessionOptionError, npu_options, parse_in_out_pair
from scopefusion.core.partition import PartitionError
from tests.helpers.session_configs import imported, npu_config

tf1 = tf.compat.v1
TOL = 1e-5
REFERENCE_NAME = "DecodeBboxV2ScopeFusionPass"  # seed 000's name for ScopeDecodeBboxV2Pass


def plain_run(graph: tf.Graph, fetches, feeds):
    config = tf1.ConfigProto()
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    with tf1.Session(graph=graph, config=config) as sess:
        return sess.run(fetches, feeds)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scopefusion", *args], check=False, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})


# ------------------------------------------------------------------------------- seed 000
@pytest.fixture(scope="module")
def postprocessor(od):  # noqa: F811 - the fixture
    return ssd_postprocess_graph(od)


def test_seed_000_atc_flag_with_the_reference_pass_name(postprocessor, tmp_path):
    model = tmp_path / "ssd.pb"
    model.write_bytes(postprocessor.graph_def.SerializeToString())
    report = tmp_path / "report.json"
    # --enable_scope_fusion_passes = DecodeBboxV2ScopeFusionPass
    ran = cli("run", str(model), "--enable_scope_fusion_passes", REFERENCE_NAME, "-o", str(tmp_path / "out.pb"),
              "--report", str(report), "--no-hints", "--verify", "--feeds", str(_npz(postprocessor, tmp_path)))
    assert ran.returncode == 0, ran.stderr
    fused = {(f["name"], f["type"]) for p in json.loads(report.read_text())["passes"] for f in p["fused"]}
    assert ("Postprocessor/Decode", "DecodeBboxV2") in fused
    listed = cli("list")
    assert REFERENCE_NAME in listed.stdout


def _npz(model, tmp_path):
    path = tmp_path / "feeds.npz"
    np.savez(path, **{name.split(":")[0]: value for name, value in model.feeds.items()})
    return path


def test_seed_000_session_configuration(postprocessor):
    graph = imported(postprocessor.graph_def)
    config = npu_config(enable_scope_fusion_passes=REFERENCE_NAME)
    with scopefusion.Session(graph=graph, config=config) as sess:  # the reference's name, as in the seed
        decoded = sess.run("Postprocessor/Decode", postprocessor.feeds)  # sess.run(xx_name_scope)
        outputs = sess.run(postprocessor.outputs, postprocessor.feeds)
    assert sess.report.fused_ops["Postprocessor/Decode"] == "DecodeBboxV2"
    assert decoded.shape[-1] == 4
    for got, want in zip(outputs, plain_run(graph, postprocessor.outputs, postprocessor.feeds), strict=True):
        np.testing.assert_allclose(got, want, atol=TOL, rtol=TOL)


# ------------------------------------------------------------------------------- seed 002
SWITCH_FILES = {
    "named": {"Switch": {"GraphFusion": {
        "ConvToFullyConnectionFusionPass": "on", "SoftmaxFusionPass": "on", "ConvConcatFusionPass": "on",
        "MatMulBiasAddFusionPass": "on", "PoolingFusionPass": "on", "ZConcatv2dFusionPass": "on",
        "ZConcatExt2FusionPass": "on", "TfMergeSubFusionPass": "on"},
        "UBFusion": {"FusionVirtualOpSetSwitch": "on"}}},
    "all_off": {"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}},
    "all_off_but": {"Switch": {"GraphFusion": {"ALL": "off", "SoftmaxFusionPass": "on"},
                               "UBFusion": {"ALL": "off", "FusionVirtualOpSetSwitch": "on"}}},
    "all_on_but": {"Switch": {"GraphFusion": {"ALL": "on", "SoftmaxFusionPass": "off"},
                              "UBFusion": {"ALL": "on", "FusionVirtualOpSetSwitch": "off"}}},
}


@pytest.mark.parametrize("name", list(SWITCH_FILES))
def test_seed_002_switch_files(name, bert_encoder, registry, tmp_path):
    path = tmp_path / "fusion_switch.cfg"
    path.write_text(json.dumps(SWITCH_FILES[name]))
    graph = imported(bert_encoder.graph_def)
    config = npu_config(fusion_switch_file=str(path))  # custom_op.parameter_map["fusion_switch_file"]
    with scopefusion.Session(graph=graph, config=config, registry=registry) as sess:
        output = sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
    ran = {p.name for p in sess.report.fusion.passes if p.engine == "graph" and p.ran}
    graph_passes = {p.name for p in registry.graph_passes if getattr(p.cls, "training_safe", True)}  # training
    named = set(registry.canonical_names(list(SWITCH_FILES["named"]["Switch"]["GraphFusion"]), "graph"))
    by_default = {p.name for p in registry.graph_passes if p.default_on}  # ZConcatExt2FusionPass is off unless named
    expected = {"named": graph_passes & (by_default | named), "all_off": set(), "all_off_but": {"SoftmaxFusionPass"},
                "all_on_but": graph_passes - {"SoftmaxFusionPass"}}[name]
    assert ran == expected
    types = set(sess.report.fused_ops.values())
    assert ("MatMulBiasAdd" in types) == ("MatMulBiasAddFusionPass" in expected)
    assert "LayerNorm" in types  # a scope pass: the switch file does not touch it
    np.testing.assert_allclose(output, plain_run(graph, bert_encoder.outputs[0], bert_encoder.inputs),
                               atol=TOL, rtol=TOL)
    if name == "named":  # the names whose passes exist only on the reference's device are explained
        result = scopefusion.fuse(bert_encoder.graph_def, registry=registry, fusion_switch_file=str(path),
                                  hints=False)
        assert not any("not registered" in w for w in result.report.warnings), result.report.warnings
        assert any("'ConvConcatFusionPass' is the reference's device pass" in w for w in result.report.warnings)


def _seed_002_pass_names() -> dict[str, set[str]]:
    """Every pass name seed 002's switch-file examples use, per section (``ALL`` is no pass)."""
    names: dict[str, set[str]] = {"GraphFusion": set(), "UBFusion": set()}
    for example in SWITCH_FILES.values():
        for section, entries in example["Switch"].items():
            names[section].update(n for n in entries if n != "ALL")
    return names


def test_seed_002_every_pass_name_is_a_pass_or_a_device_pass(registry, tmp_path):
    """Each name the seed's examples use is a registered pass of its section (by its own name or the
    reference's), or a pass that exists only on the reference's device, whose warning says what it is
    and why nothing here implements it; none is "not registered", in either file format."""
    names = _seed_002_pass_names()
    assert names["GraphFusion"] >= {"ConvToFullyConnectionFusionPass", "TfMergeSubFusionPass"}  # read them all
    own = {t: {p.name for p in registry.graph_passes if p.fusion_type == t} for t in names}
    aliases = registry.aliases("graph")
    for section, section_names in names.items():
        for pass_name in section_names:
            canonical = aliases.get(pass_name, pass_name)
            device = DEVICE_PASSES.get(pass_name)
            assert canonical in own[section] or (device is not None and device.section == section), pass_name
    legacy = tmp_path / "fusion_switch.cfg"
    legacy.write_text("".join(f"{n}:on\n" for section in names.values() for n in sorted(section)))
    for example in [*SWITCH_FILES.values(), None]:
        switch = load_switch(legacy) if example is None else \
            scopefusion.FusionSwitch.from_text(json.dumps(example))
        warnings = switch_warnings(switch.with_aliases(aliases), registry)
        assert not any("not registered" in w for w in warnings), warnings
        for w in warnings:
            assert "not implemented here: " in w and "the switch file accepts the name, it has no effect" in w, w
    listed = cli("list", "--fusion_switch_file", str(legacy))
    assert listed.returncode == 0 and "not registered" not in listed.stderr, listed.stderr
    assert "TfMergeSubFusionPass' is a pass the reference cannot switch off" in listed.stderr


# ------------------------------------------------------------------------------- seed 003
SEED_003_EXAMPLE_1 = [[["import/conv2d_1/con", "while_1/strided_sli", "while_1/strided_sli", "concat",
                        "while_1/Const", "while_1/Const_4", "while_1/Const_2", "zeros_7", "Const_6", "zeros_4",
                        "ConstantFolding/whi"], ["strided_slice_13"]]]
SEED_003_EXAMPLE_2 = [[["_arg_tf_image_string_0_0", "strided_slice_1/stack", "strided_slice_1/stack_1", "Const",
                        "zeros", "zeros_1", "Const_2"], ["strided_slice_2", "strided_slice_3", "strided_slice_4"]]]


@pytest.fixture(scope="module")
def detector(od):  # noqa: F811 - the fixture
    return detection_pipeline(od)


def test_seed_003_examples_as_written(detector):
    # the seed's strings are read (the repeated 'while_1/strided_sli' taken once) ...
    (pair,) = parse_in_out_pair(str(SEED_003_EXAMPLE_1))
    assert pair.inputs.count("while_1/strided_sli") == 1 and len(pair.inputs) == 10
    options = npu_options(mix_compile_mode=True, in_out_pair=str(SEED_003_EXAMPLE_1))
    assert options.in_out_pair_flag is True
    options = npu_options(mix_compile_mode=True, in_out_pair_flag=False, in_out_pair=str(SEED_003_EXAMPLE_2))
    assert options.in_out_pair[0].outputs == ("strided_slice_2", "strided_slice_3", "strided_slice_4")
    # ... and name nodes of a yolo_v3 graph, cut off: on another graph, one clear line naming them
    graph = imported(detector.graph_def)
    for example, flag in ((SEED_003_EXAMPLE_1, True), (SEED_003_EXAMPLE_2, False)):
        config = npu_config(mix_compile_mode=True, in_out_pair_flag=flag, in_out_pair=str(example))
        with scopefusion.Session(graph=graph, config=config) as sess, pytest.raises(PartitionError) as info:
            sess.run(detector.outputs, detector.inputs)
        message = str(info.value)
        assert "\n" not in message and message.startswith("in_out_pair: pair 1 in_nodes ")
        assert f"{example[0][0][0]!r} is not in the graph" in message
        assert message.endswith("allowed: exact node names of the graph")


def _heads(model) -> list[str]:
    consts = [n.name for n in model.graph_def.node if n.op == "Const" and not n.name.startswith("Preprocessor/")]
    return ["FeatureExtractor/Conv/Conv2D", "FeatureExtractor/Conv/Conv2D", *consts]  # a repeat, as in the seed


def test_seed_003_scenarios_in_a_session(detector):
    graph = imported(detector.graph_def)
    expected = plain_run(graph, detector.outputs, detector.inputs)
    outputs = ["detection_boxes", "detection_scores", "detection_classes", "num_detections"]
    # example 1: the body and the post-processing on the device
    body = npu_config(mix_compile_mode=True, in_out_pair=str([[_heads(detector), outputs]]),
                      enable_scope_fusion_passes="DecodeBboxV2ScopeFusionPass,BatchMultiClassNMSScopeFusionPass")
    # example 2: the pre-processing kept on the host
    pre = npu_config(mix_compile_mode=True, in_out_pair_flag=False,
                     in_out_pair=str([[["image_bytes"], ["Preprocessor/sub"]]]),
                     enable_scope_fusion_passes="ScopeDecodeBboxV2Pass,ScopeBatchMultiClassNMSPass")
    placements = []
    for config in (body, pre):
        with scopefusion.Session(graph=graph, config=config) as sess:
            got = sess.run(detector.outputs, detector.inputs)
        host = {h.name for h in sess.report.placement.host}
        assert {"image_bytes", "Preprocessor/DecodeJpeg", "Preprocessor/MatMul"} <= host
        assert not any(name.startswith("Preprocessor/") for name in sess.report.fused_ops)
        assert sess.report.fused_ops["Postprocessor/Decode"] == "DecodeBboxV2"
        for g, w in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, w, atol=TOL, rtol=TOL)
        placements.append([s.node_names for s in sess.report.placement.segments])
    assert placements[0] == placements[1]  # the same placement, said the other way round


# ------------------------------------------------------------------------------- seed 004
def test_seed_004_option_table_examples(tmp_path):
    """Every configuration example of the table, as the seed writes it."""
    directory = str(tmp_path)
    examples = [
        {"use_off_line": True}, {"enable_data_pre_proc": True}, {"iterations_per_loop": 10},
        {"profiling_mode": True, "profiling_options": '{"output":"/tmp/profiling","training_trace":"on",'
             '"fp_point":"resnet_model/conv2d/Conv2Dresnet_model/batch_normalization/FusedBatchNormV3_Reduce",'
             '"bp_point":"gradients/AddN_70"}'},
        {"enable_dump": True, "dump_path": directory}, {"dump_step": "0|5|10"}, {"dump_step": "0|3-5|10"},
        {"dump_mode": "all"}, {"precision_mode": "allow_mix_precision"}, {"variable_format_optimize": True},
        {"mix_compile_mode": True}, {"hcom_parallel": True}, {"graph_memory_max_size": str(26 * 1024 ** 3)},
        {"variable_memory_max_size": str(5 * 1024 ** 3)}, {"auto_tune_mode": "RL,GA"},
        {"stream_max_parallel_num": "DNN_VM_TF:10,DNN_V100:1"}, {"is_tailing_optimization": True},
        {"graph_run_mode": 1}, {"op_debug_level": 0}, {"enable_scope_fusion_passes": "ScopeLayerNormPass,"
                                                              "ScopeClipBoxesPass"},
        {"enable_exception_dump": 1}, {"op_select_implmode": "high_precision"},
        {"op_select_implmode": "high_precision", "optypelist_for_implmode": "Pooling,SoftmaxV2"},
        {"input_shape": "data:1,1,40,-1;label:1,-1;mask:-1,-1", "dynamic_dims": "20,20,1,1;40,40,2,2;80,60,4,4",
             "dynamic_node_type": 0},
        {"buffer_optimize": "l2_optimize"}, {"enable_small_channel": 1},
        {"fusion_switch_file": "/home/test/fusion_switch.cfg"}, {"op_compiler_cache_mode": "enable"},
        {"op_compiler_cache_dir": "/home/test/kernel_cache"}, {"debug_dir": "/home/test"},
        {"dynamic_input": True}, {"dynamic_graph_execute_mode": "dynamic_execute"},
        {"dynamic_inputs_shape_range": "getnext:[128 ,3~5, 2~128, -1],[64 ,3~5, 2~128, -1];data:[128 ,3~5, "
             "2~128, -1]"},
        {"local_rank_id": 0}, {"local_device_list": "0,1"}, {"session_device_id": 7},
        {"mix_compile_mode": True, "in_out_pair_flag": False,
             "in_out_pair": str([[["import/conv2d_1/convolution"], ["import/conv2d_59/BiasAdd",
                                                                 "import/conv2d_67/BiasAdd",
                                                                 "import/conv2d_75/BiasAdd"]]])},
        {"precision_mode": "allow_mix_precision", "modify_mixlist": "/home/test/ops_info.json"},
        {"op_precision_mode": "/home/test/op_precision.ini"}, {"hccl_timeout": 600}, {"op_wait_timeout": 120},
    ]
    for example in examples:
        options = npu_options(example, environ={})
        assert options.warnings == () and set(options.given) == set(example)
    # the defaults the seed states
    defaults = npu_options()
    assert (defaults.graph_memory_max_size, defaults.variable_memory_max_size) == (26 * 1024 ** 3, 5 * 1024 ** 3)
    assert defaults.op_compiler_cache_mode == "disable" and defaults.dump_mode == "output"
    assert defaults.op_select_implmode == "high_performance" and defaults.buffer_optimize == "l2_optimize"
    # dump_path must be set with enable_dump: "dump_path为None时会产生异常"
    with pytest.raises(SessionOptionError, match="enable_dump = True but dump_path is not set"):
        npu_options(enable_dump=True)


def test_seed_004_call_example(bert_encoder, registry):
    """The call example (use_off_line, remapping and memory_optimization off), with two of the table's
    options a device acts on: the session runs, says which options it only records, and matches."""
    config = npu_config(precision_mode="allow_mix_precision", hccl_timeout=600)
    config.graph_options.rewrite_options.memory_optimization = RewriterConfig.OFF
    graph = imported(bert_encoder.graph_def)
    with scopefusion.Session(graph=graph, config=config, registry=registry) as sess:
        output = sess.run(bert_encoder.outputs[0], bert_encoder.inputs)  # sess.run(cost)
    assert sess.report.acted_on == ["use_off_line"]
    assert sess.report.not_acted_on == ["precision_mode", "hccl_timeout"]  # a device's: validated, recorded
    assert sess.report.fused_ops and sess.report.warnings == []
    np.testing.assert_allclose(output, plain_run(graph, bert_encoder.outputs[0], bert_encoder.inputs),
                               atol=TOL, rtol=TOL)
