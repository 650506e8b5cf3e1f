"""Mixed computation on real graphs: the seed's two ``in_out_pair`` scenarios on an OD API
detector, a graph with string pre-processing, a model whose TF1 loop holds a host-only op, and a
back end declared by a plugin.  Each checks the placement, that fusion happened only inside
the device segments, and that the TensorFlow-runnable output computes what the original does."""
from __future__ import annotations

import types

import numpy as np
import pytest
from tests.models.partition_models import detection_pipeline, loop_model, text_features_model
from tests.passes.detection.test_detection import od  # noqa: F401 - the OD API install fixture

import scopefusion
from scopefusion import hookimpl
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.partition import SEGMENT_OP, TF_CALL_OP, SupportedOps
from scopefusion.core.verify.execute import run_graph_def
from scopefusion.core.verify.tf_form import to_tf_runnable
from scopefusion.plugins.registry import load_registry

DETECTION_OUTPUTS = ["detection_boxes", "detection_scores", "detection_classes", "num_detections"]
DETECTION_PASSES = "ScopeDecodeBboxV2Pass,ScopeBatchMultiClassNMSPass"


@pytest.fixture(scope="module")
def registry():
    return load_registry(autoload=False)


@pytest.fixture(scope="module")
def detector(od):  # noqa: F811
    return detection_pipeline(od)


# ------------------------------------------------------------------------------ helpers
def segment_bodies(graph_def) -> dict[str, list]:
    """Call node name -> the nodes of its body, for every segment call (either form)."""
    library = {f.signature.name: f for f in graph_def.library.function}
    calls = {}
    for node in graph_def.node:
        if node.op == SEGMENT_OP:
            calls[node.name] = list(library[node.attr["function"].func.name].node_def)
        elif node.op == TF_CALL_OP and "_mix_compile_mode" in node.attr:
            calls[node.name] = list(library[node.attr["f"].func.name].node_def)
    return calls


def assert_fused_only_in_segments(result, registry) -> dict[str, str]:
    """No fused op on the host, fused-op nodes in the segment bodies, and every fusion the report
    records made of nodes the placement gave the back end.  Returns body node -> segment."""
    fused_types = set(registry.fused_ops)
    assert [n.name for n in result.fused_graph_def.node if n.op in fused_types] == []
    bodies = segment_bodies(result.fused_graph_def)
    assert any(n.op in fused_types for body in bodies.values() for n in body), "nothing fused in the segments"
    host = {h.name for h in result.partition.report.host}
    assert result.report.fused and not [f.name for f in result.report.fused if f.name in host]
    return {n.name: call for call, body in bodies.items() for n in body}


def refusal(result, name: str) -> str:
    (reason,) = [r.reason for r in result.report.refused if r.name == name]
    return reason


def verify(model, result, registry, **options):
    outcome = scopefusion.verify(model.graph_def, result.graph_def, fused_ops=registry.fused_ops,
                                 feeds=model.inputs, **options)
    outcome.assert_ok()
    assert {o.name for o in outcome.outputs} >= {t for t in model.outputs}
    return outcome


def host_names(report, code: str) -> set[str]:
    return {h.name for h in report.host if h.code == code}


def detection_heads(model) -> list[str]:
    """Scenario 1's in nodes: the body's first convolution and the graph's constants outside the
    pre-processing (as the seed lists its constants and zeros among the in nodes)."""
    consts = [n.name for n in model.graph_def.node if n.op == "Const" and not n.name.startswith("Preprocessor/")]
    return ["FeatureExtractor/Conv/Conv2D", *consts]


# ------------------------------------------------------------- the seed's two scenarios
def test_seed_scenario_body_and_postprocessing_on_the_device(detector, registry):
    pairs = [[detection_heads(detector), DETECTION_OUTPUTS]]
    result = scopefusion.fuse(detector.graph_def, registry=registry, emit="tf", mix_compile_mode=True,
                              in_out_pair=pairs, enable_scope_fusion_passes=DETECTION_PASSES)
    report = result.partition.report
    (segment,) = report.segments
    assert segment.inputs == ["Preprocessor/sub"] and segment.outputs == DETECTION_OUTPUTS
    preprocessing = {n.name for n in detector.graph_def.node if n.name.startswith("Preprocessor/") and n.op != "Const"}
    assert preprocessing | {"image_bytes"} <= host_names(report, "outside the in/out range")
    assert report.reason("Preprocessor/DecodeJpeg") == "outside the in/out range (in_out_pair_flag True)"
    where = assert_fused_only_in_segments(result, registry)
    assert where["Postprocessor/Decode"] == where["Postprocessor/BatchMultiClassNonMaxSuppression"] == "GeOp0_0"
    assert "lie outside the nodes the back end runs" in refusal(result, "Preprocessor/add")  # colour matmul + bias
    call = next(n for n in result.fused_graph_def.node if n.op == SEGMENT_OP)
    assert call.attr["_mix_compile_mode"].s == b"1" and call.attr["_in_out_pair_flag"].s == b"1"
    assert call.attr["_in_out_pair"].s.decode().startswith("[[['FeatureExtractor/Conv/Conv2D'")
    assert call.attr["data_format"].s == b"NHWC" and len(call.attr["Tout"].list.type) == 4
    assert {n.op for n in result.graph_def.node} == {"Placeholder", "DecodeJpeg", "Cast", "ExpandDims",
                                                    "ResizeBilinear", "Reshape", "MatMul", "AddV2", "RealDiv",
                                                    "Sub", "Const", TF_CALL_OP, "Identity"}
    verify(detector, result, registry, atol=0.0, rtol=0.0)


def test_seed_scenario_preprocessing_kept_on_the_host(detector, registry):
    flipped = scopefusion.fuse(detector.graph_def, registry=registry, emit="tf", mix_compile_mode=True,
                               in_out_pair="[[['image_bytes'], ['Preprocessor/sub']]]", in_out_pair_flag=False,
                               enable_scope_fusion_passes=DETECTION_PASSES)
    report = flipped.partition.report
    assert report.reason("Preprocessor/MatMul") == "inside the in/out range of pair 1 (in_out_pair_flag False)"
    assert report.reason("image_bytes") == report.reason("Preprocessor/DecodeJpeg") == report.reason(
        "Preprocessor/MatMul")
    # the same placement as the first scenario, said the other way round
    pairs = [[detection_heads(detector), DETECTION_OUTPUTS]]
    ranged = scopefusion.partition(detector.graph_def, registry=registry, in_out_pair=pairs)
    flipped_plain = scopefusion.partition(detector.graph_def, registry=registry, in_out_pair_flag="false",
                                          in_out_pair="[[['image_bytes'], ['Preprocessor/sub']]]")
    assert [s.node_names for s in ranged.segments] == [s.node_names for s in flipped_plain.segments]
    where = assert_fused_only_in_segments(flipped, registry)
    assert where["Postprocessor/BatchMultiClassNonMaxSuppression"] == "GeOp0_0"
    assert "lie outside the nodes the back end runs" in refusal(flipped, "Preprocessor/add")
    verify(detector, flipped, registry, atol=0.0, rtol=0.0)


def test_default_placement_of_the_detector_keeps_only_the_jpeg_decoder_on_the_host(detector, registry):
    result = scopefusion.fuse(detector.graph_def, registry=registry, emit="tf", mix_compile_mode=True,
                              enable_scope_fusion_passes=DETECTION_PASSES)
    report = result.partition.report
    assert {(h.name, h.code) for h in report.host} == {("image_bytes", "graph input"),
                                                      ("Preprocessor/DecodeJpeg", "unsupported op")}
    assert report.reason("Preprocessor/DecodeJpeg") == "string op DecodeJpeg: host-only in the default supported set"
    (segment,) = report.segments
    assert segment.inputs == ["Preprocessor/DecodeJpeg"]
    where = assert_fused_only_in_segments(result, registry)
    assert where["Preprocessor/add"] == "GeOp0_0"  # on the device now, so the colour transform is fused
    assert result.report.refused == []
    verify(detector, result, registry, atol=0.0, rtol=0.0)


# ------------------------------------------------------------------ string pre-processing
def test_string_preprocessing_stays_on_the_host_and_spreads_along_string_edges(registry):
    model = text_features_model()
    result = scopefusion.fuse(model.graph_def, registry=registry, emit="tf", mix_compile_mode=True)
    report = result.partition.report
    assert host_names(report, "unsupported op") == {"parse/StringStrip", "parse/StringSplit/StringSplitV2",
                                                    "parse/StringToNumber"}
    assert report.reason("parse/tokens") == ("string edge with host node 'parse/StringToNumber' "
                                             "(StringToNumber)")  # an Identity of strings
    assert report.reason("parse/Size").startswith("string edge with host node 'parse/tokens'")
    assert report.where("parse/RaggedToTensor/RaggedTensorToTensor") == "host"
    # the split's row lengths are integers: the back end runs them, between two host steps
    first, second = report.segments
    assert set(first.node_names) == {"parse/StringSplit/strided_slice", "parse/StringSplit/strided_slice_1"}
    assert second.inputs == ["parse/Size", "parse/StringToNumber"] and second.outputs == ["scores"]
    assert_fused_only_in_segments(result, registry)
    assert [f.name for f in result.report.pass_report("GeluFusionPass").fused] == [
        "mlp/dense_0/Gelu/mul_2", "mlp/dense_1/Gelu/mul_2"]
    verify(model, result, registry)


# ------------------------------------------------------------------ a loop with a host op
def test_a_loop_holding_a_string_op_runs_whole_on_the_host(registry):
    model = loop_model()
    result = scopefusion.fuse(model.graph_def, registry=registry, emit="tf", mix_compile_mode=True)
    report = result.partition.report
    loop_nodes = {n.name for n in model.graph_def.node if n.name.startswith("formatted/")}
    culprits = {"formatted/AsString", "formatted/StringToNumber"}
    assert host_names(report, "loop") == loop_nodes - culprits
    assert report.reason("formatted/Merge_1") == ("in while loop 'formatted/while_context', which holds host node "
                                                  "'formatted/StringToNumber' (StringToNumber)")
    first, second = report.segments
    assert first.inputs == ["x"] and second.inputs == ["formatted/Exit_1"] and second.outputs == ["y"]
    bodies = segment_bodies(result.fused_graph_def)
    second_ops = {n.op for n in bodies[second.name]}
    assert {"Enter", "Merge", "Switch", "LoopCond", "NextIteration", "Exit"} <= second_ops  # the loop 'refine'
    assert_fused_only_in_segments(result, registry)
    for name in ("formatted/formatted_dense/BiasAdd", "formatted/formatted_dense/Gelu/mul_2"):
        assert "lie outside the nodes the back end runs" in refusal(result, name)
    assert [f.name for f in result.report.pass_report("GeluFusionPass").fused if f.name.startswith("refine/")]
    verify(model, result, registry)


# ------------------------------------------------------------ a back end from a plugin
def toy_backend_plugin() -> types.ModuleType:
    """A back end that runs a transformer's dense, normalisation and attention ops, but not
    Tanh, and Softmax only outside mixed mode (gray)."""
    plugin = types.ModuleType("toy_npu")
    ops = ["MatMul", "BiasAdd", "AddV2", "Mul", "Sub", "Neg", "Erfc", "RealDiv", "Mean", "SquaredDifference",
           "Rsqrt", "StopGradient", "Reshape", "Transpose", "BatchMatMulV2", "Identity"]

    @hookimpl
    def scopefusion_supported_ops():
        table = {op: {"isGray": False, "isHeavy": op in ("MatMul", "BatchMatMulV2")} for op in ops}
        table["Softmax"] = {"isGray": True, "isHeavy": False}
        return table

    plugin.scopefusion_supported_ops = scopefusion_supported_ops
    return plugin


def test_a_plugin_declares_what_its_back_end_runs(bert_encoder):
    registry = load_registry(autoload=False, plugins=[("toy-npu", toy_backend_plugin())])
    assert registry.supported_ops["Softmax"].is_gray and registry.supported_ops["MatMul"].origin == "toy-npu local"
    assert next(p for p in registry.plugins if p.name == "toy-npu").supported_ops[:2] == ["MatMul", "BiasAdd"]
    result = scopefusion.fuse(bert_encoder.graph_def, registry=registry, emit="tf", mix_compile_mode=True)
    report = result.partition.report
    softmax = {n.name for n in bert_encoder.graph_def.node if n.op == "Softmax"}
    assert host_names(report, "unsupported op") == softmax | {"bert/pooler/dense/Tanh"}
    assert report.reason(sorted(softmax)[0]).startswith("op Softmax is gray (isGray) in toy-npu local")
    assert report.reason("bert/pooler/dense/Tanh") == "op Tanh is not in the back end's supported ops (toy-npu local)"
    assert len(report.segments) == len(softmax) + 1  # each host softmax splits the encoder
    placed = scopefusion.partition(bert_encoder.graph_def, registry=registry)  # before fusion
    assert len(placed.segments) == len(report.segments)
    assert sum(s.heavy_ops for s in placed.segments) == sum(
        n.op in ("MatMul", "BatchMatMulV2") for n in bert_encoder.graph_def.node)
    bodies = segment_bodies(result.fused_graph_def)
    assert_fused_only_in_segments(result, registry)
    assert sum(n.op == "LayerNorm" for body in bodies.values() for n in body) == bert_encoder.layer_norms
    verify(bert_encoder, result, registry)


def test_declared_fused_ops_count_as_supported(bert_encoder):
    registry = load_registry(autoload=False, plugins=[("toy-npu", toy_backend_plugin())])
    fused = scopefusion.fuse(bert_encoder.graph_def, registry=registry).fused_graph_def  # not mixed
    report = scopefusion.partition(fused, registry=registry)
    # 6 of the 7 layer norms normalise a residual sum: AddLayerNorm (UB stage), each holding one
    layer_norms = [n.name for n in fused.node if n.op in ("LayerNorm", "AddLayerNorm")]
    assert len(layer_norms) == bert_encoder.layer_norms
    assert all(report.where(name).startswith("GeOp0_") for name in layer_norms)
    assert SupportedOps.build(plugin_table=registry.supported_ops, fused_ops=registry.fused_ops).why_not(
        "LayerNorm") is None


# ------------------------------------------------------------------ standalone segments
def test_standalone_segments_compute_what_the_graph_computes_between_their_borders(registry):
    model = text_features_model()
    result = scopefusion.fuse(model.graph_def, registry=registry, mix_compile_mode=True)
    graphs = result.partition.segment_graphs
    assert [g.name for g in graphs] == [s.name for s in result.partition.report.segments]
    for graph in graphs:
        assert [t for _, t, _ in graph.inputs] == result.partition.report.segment(graph.name).inputs
        runnable = to_tf_runnable(graph.graph_def, registry.fused_ops)
        GraphIndex(runnable)
        sources = run_graph_def(model.graph_def, model.inputs, [f"{t}:0" if ":" not in t else t
                                                                for _, t, _ in graph.inputs])
        feeds = {f"{holder}:0": value for (holder, _, _), value in zip(graph.inputs, sources, strict=True)}
        got = run_graph_def(runnable, feeds, [f"{identity}:0" for identity, _, _ in graph.outputs])
        want = run_graph_def(model.graph_def, model.inputs, [f"{t}:0" if ":" not in t else t
                                                             for _, t, _ in graph.outputs])
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
