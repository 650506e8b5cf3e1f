"""The detection stage passes (NormalizeBBox, ToAbsoluteBBox, ROIAlign, KeepRatioResizeBilinear,
RpnProposals, FastrcnnPredictions) on the stages of the OD API's Faster R-CNN meta-architecture,
built with the OD API's own functions the way the meta-architecture calls them (see
``detection_stage_models.py`` and ``detection_postprocess_models.py``: a whole meta-architecture
cannot be built from the ``object-detection`` package under TensorFlow 2)."""
from __future__ import annotations

import numpy as np
import pytest
from tests.models.detection_models import import_object_detection, install_object_detection
from tests.models.detection_postprocess_models import first_stage_postprocess_graph, second_stage_postprocess_graph
from tests.models.detection_stage_models import (
    coordinate_lookalikes_graph,
    coordinate_variants_graph,
    crop_only_graph,
    normalize_proposals_graph,
    preprocess_graph,
    roi_align_scope_graph,
    second_stage_input_graph,
)

import scopefusion
from scopefusion.builtin_passes.scope.box_coordinates import (
    NORMALIZE_BBOX,
    TO_ABSOLUTE_BBOX,
    ScopeNormalizeBBoxPass,
    ScopeToAbsoluteBBoxPass,
)
from scopefusion.builtin_passes.scope.keep_ratio_resize import (
    KEEP_RATIO_RESIZE_BILINEAR,
    ScopeKeepRatioResizeBilinearPass,
)
from scopefusion.builtin_passes.scope.roi_align import ROI_ALIGN, ScopeROIAlignPass
from scopefusion.core.graph.attrs import attr_value_to_python
from scopefusion.core.graph.index import GraphIndex
from scopefusion.testing import assert_fused, assert_not_matched, registry_with

NORMALIZE = "ScopeNormalizeBBoxPass"
ABSOLUTE = "ScopeToAbsoluteBBoxPass"
ROI = "ScopeROIAlignPass"
RESIZE = "ScopeKeepRatioResizeBilinearPass"
ALL = [NORMALIZE, ABSOLUTE, ROI, RESIZE]


@pytest.fixture(scope="session")
def od(tmp_path_factory):
    """The OD API from PyPI (``object-detection``, installed with ``--no-deps``), imported under
    ``tf.compat.v1``."""
    site = install_object_detection(tmp_path_factory.mktemp("object-detection"))
    return import_object_detection(site)


@pytest.fixture(scope="module")
def registry():
    return registry_with(
        [ScopeNormalizeBBoxPass, ScopeToAbsoluteBBoxPass, ScopeROIAlignPass, ScopeKeepRatioResizeBilinearPass],
        [NORMALIZE_BBOX, TO_ABSOLUTE_BBOX, ROI_ALIGN, KEEP_RATIO_RESIZE_BILINEAR])


def fuse(model, registry, enable=ALL):
    return scopefusion.fuse(model.graph_def, registry=registry, enable_scope_fusion_passes=enable)


def verify_exact(model, result, registry, *, random_runs=0):
    """The fused graph gives exactly the original's outputs on the model's feeds (and on random
    feeds of the same shapes); returns the comparisons of the first."""
    own = scopefusion.verify(model.graph_def, result.fused_graph_def, fused_ops=registry.fused_ops,
                             feeds=model.feeds, atol=0.0, rtol=0.0)
    own.assert_ok()
    assert {o.name for o in own.outputs} == set(model.outputs)
    if random_runs:
        shapes = {k.split(":")[0]: list(v.shape) for k, v in model.feeds.items()}
        scopefusion.verify(model.graph_def, result.fused_graph_def, fused_ops=registry.fused_ops,
                           input_shapes=shapes, runs=random_runs, atol=0.0, rtol=0.0).assert_ok()
    return own


def fused(result, op_type):
    return [n for n in result.fused_graph_def.node if n.op == op_type]


def attrs(node):
    return {k: attr_value_to_python(v) for k, v in node.attr.items() if not k.startswith("_")}


# ------------------------------------------------------------ NormalizeBBox / ToAbsoluteBBox
@pytest.mark.parametrize("batch", [2, 3, None], ids=["batch2", "batch3", "dynamic-batch"])
def test_first_stage_normalization_is_fused_per_image(od, registry, batch):
    m = normalize_proposals_graph(od, batch=batch)
    result = fuse(m, registry, [NORMALIZE])
    assert result.report.refused == []
    assert_fused(result, "NormalizeBBox", batch or 1, Tsize=3)  # one per image; one in the loop body
    for node in fused(result, "NormalizeBBox"):
        assert "/ToNormalizedCoordinates" in node.name
    assert not any("/Scale/" in n.name for n in result.fused_graph_def.node)
    GraphIndex(result.fused_graph_def)
    verify_exact(m, result, registry)


def test_coordinate_variants_constant_float_and_checked(od, registry):
    m = coordinate_variants_graph(od)
    result = fuse(m, registry)
    (anchors,) = fused(result, "NormalizeBBox")
    (absolute,) = fused(result, "ToAbsoluteBBox")
    assert anchors.name == "Anchors/ToNormalizedCoordinates" and absolute.name == "Absolute/ToAbsoluteCoordinates"
    assert attrs(anchors)["Tsize"] == 3  # Python ints: int32 constants, cast in the scope
    assert attrs(absolute)["Tsize"] == 1  # float32 sizes: nothing cast
    consts = {n.name: n for n in result.fused_graph_def.node if n.op == "Const"}
    assert [consts[i].attr["value"].tensor.int_val[0] for i in anchors.input[1:]] == [30, 40]
    assert absolute.input[1:] == ["Absolute/strided_slice", "Absolute/strided_slice_1"]
    refused = {r.name: r.reason for r in result.report.refused}
    assert set(refused) == {"Checked/ToAbsoluteCoordinates", "Checked/ToNormalizedCoordinates"}
    assert all("asserts the range of the boxes (check_range=True)" in r for r in refused.values())
    verify_exact(m, result, registry, random_runs=0)  # random boxes would fail the kept range checks


def test_coordinate_lookalikes_are_not_fused(registry):
    m = coordinate_lookalikes_graph()
    result = fuse(m, registry)
    assert result.report.fused == []
    # divided, not multiplied by the reciprocals: another rounding, one feature away from the pattern
    assert assert_not_matched(result, "Divided/ToNormalizedCoordinates") == (
        "ScopeNormalizeBBoxPass: pattern NormalizeBBox: exactly 4 Mul node(s) wanted, 0 found")
    assert "not box_list_ops' ToAbsoluteCoordinates" in assert_not_matched(result, "Mixed/ToAbsoluteCoordinates")


def test_coordinate_passes_are_off_unless_enabled(od, registry):
    m = normalize_proposals_graph(od)
    assert scopefusion.fuse(m.graph_def, registry=registry).report.fused == []
    assert fuse(m, registry, [ABSOLUTE]).report.fused == []


# ----------------------------------------------------------------------------- ROIAlign
@pytest.mark.parametrize("kernel,stride,crop", [(2, 2, 6), (3, 1, 5), (1, 1, 4)])
def test_second_stage_input_feature_maps_become_roi_align(od, registry, kernel, stride, crop):
    m = second_stage_input_graph(od, kernel=kernel, stride=stride, crop=crop)
    result = fuse(m, registry, [ROI])
    assert result.report.refused == []
    (node,) = assert_fused(result, "ROIAlign", 1, crop_size=[crop, crop], pooling="max", method="bilinear",
                           ksize=[1, kernel, kernel, 1], strides=[1, stride, stride, 1], padding="VALID")
    assert node.name == "CropAndResize"
    assert list(node.input) == ["FeatureExtractor/Relu", "proposal_boxes_normalized"]
    names = {n.name for n in result.fused_graph_def.node}
    assert "MaxPool2D/MaxPool" not in names and "Reshape" not in names  # the pooling and the flatten went in
    GraphIndex(result.fused_graph_def)
    verify_exact(m, result, registry, random_runs=2)


def test_detection_features_crop_is_a_second_roi_align(od, registry):
    m = second_stage_input_graph(od, detection_features=True)
    result = fuse(m, registry, [ROI])
    nodes = assert_fused(result, "ROIAlign", 2)
    assert sorted(n.name for n in nodes) == ["CropAndResize", "SecondStageDetectionFeaturesExtract/CropAndResize"]
    verify_exact(m, result, registry, random_runs=1)


def test_roi_align_scope_with_average_pooling(registry):
    m = roi_align_scope_graph()
    result = fuse(m, registry, [ROI])
    (node,) = assert_fused(result, "ROIAlign", 1, crop_size=[6, 6], pooling="avg", ksize=[1, 2, 2, 1])
    assert node.name == "roi_align"
    verify_exact(m, result, registry, random_runs=2)


def test_roi_align_with_an_unknown_batch(od, registry):
    """The box indices and both reshapes' shapes are computed at run time from the boxes and crops."""
    m = second_stage_input_graph(od, batch=None)
    result = fuse(m, registry, [ROI])
    assert result.report.refused == []
    (node,) = assert_fused(result, "ROIAlign", 1, crop_size=[6, 6], pooling="max")
    assert node.name == "CropAndResize"
    names = {n.name for n in result.fused_graph_def.node}
    assert not names & {"Shape", "strided_slice", "mul", "stack", "Reshape", "MaxPool2D/MaxPool"}
    GraphIndex(result.fused_graph_def)
    verify_exact(m, result, registry, random_runs=1)
    three = dict(m.feeds)  # another batch size through the same graphs
    three["images:0"] = np.concatenate([m.feeds["images:0"]] * 2)[:3]
    three["proposal_boxes_normalized:0"] = np.concatenate([m.feeds["proposal_boxes_normalized:0"]] * 2)[:3]
    scopefusion.verify(m.graph_def, result.fused_graph_def, fused_ops=registry.fused_ops, feeds=three,
                       atol=0.0, rtol=0.0).assert_ok()


def test_a_crop_no_pooling_reads_is_refused(od, registry):
    """``native_crop_and_resize`` as ``_loss_box_classifier`` crops the groundtruth masks: its crops
    are squeezed, not pooled."""
    m = crop_only_graph(od)
    result = fuse(m, registry, [ROI])
    assert fused(result, "ROIAlign") == []
    (refusal,) = result.report.refused
    assert "not to a pooling" in refusal.reason


# ---------------------------------------------------------------- KeepRatioResizeBilinear
@pytest.mark.parametrize("batch,max_dimension,image_size", [
    (2, 20, (9, 15)),   # the longer side bounds the size
    (2, 40, (9, 15)),   # the shorter side sets it
    (1, None, (15, 9)),
    (None, 20, (9, 15)),
], ids=["bounded-by-max", "set-by-min", "no-maximum", "dynamic-batch"])
def test_resize_to_range_is_fused_with_both_outputs(od, registry, batch, max_dimension, image_size):
    m = preprocess_graph(od, batch=batch, max_dimension=max_dimension, image_size=image_size)
    result = fuse(m, registry, [RESIZE])
    assert result.report.refused == []
    nodes = assert_fused(result, "KeepRatioResizeBilinear", batch or 1, min_dimension=12.0,
                         max_dimension=float(max_dimension or 0), align_corners=False, half_pixel_centers=False)
    assert all("ResizeToRange" in n.name for n in nodes)
    GraphIndex(result.fused_graph_def)
    outcome = verify_exact(m, result, registry)
    shapes = outcome.output("true_image_shapes").shape
    assert shapes == [batch or 2, 3]


def test_resize_to_range_sizes_are_the_graphs(od, registry):
    m = preprocess_graph(od, batch=1, max_dimension=20, image_size=(9, 15))
    result = fuse(m, registry, [RESIZE])
    assert_fused(result, "KeepRatioResizeBilinear", 1)
    from scopefusion.core.verify.execute import run_graph_def

    verify_exact(m, result, registry)  # the fused graph's sizes are the original's, exactly
    (shapes,) = run_graph_def(m.graph_def, m.feeds, ["true_image_shapes:0"])
    assert np.array_equal(shapes, [[12, 20, 3]])  # 9 x 15 scaled by 20 / 15: the maximum bounds it


@pytest.mark.parametrize("variant,reason", [
    (dict(method="nearest"), "resized by ResizeNearestNeighbor, not bilinearly"),
    (dict(masks=True), "the scope resizes 2 tensors (masks too?)"),
    (dict(pad_to_max_dimension=True, max_dimension=20), "pad_to_max_dimension"),
    (dict(static_size=True), "the image's size is static"),
])
def test_resize_to_range_variants_the_op_cannot_carry_are_refused(od, registry, variant, reason):
    m = preprocess_graph(od, batch=1, **variant)
    result = fuse(m, registry, [RESIZE])
    assert result.report.fused == []
    (refusal,) = result.report.refused
    assert refusal.name.endswith("ResizeToRange") and reason in refusal.reason


STAGE_PASSES = {"ScopeROIAlignPass": "ROIAlign", "ScopeRpnProposalsPass": "RpnProposals",
                "ScopeFastrcnnPredictionsPass": "FastrcnnPredictions", "ScopeNormalizeBBoxPass": "NormalizeBBox",
                "ScopeToAbsoluteBBoxPass": "ToAbsoluteBBox",
                "ScopeKeepRatioResizeBilinearPass": "KeepRatioResizeBilinear"}


def test_the_passes_are_listed_non_general_with_the_references_names():
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "scopefusion.cli", "list", "--json"], capture_output=True, text=True,
                          timeout=120, check=True)
    listed = json.loads(done.stdout)
    passes = {p["name"]: p for p in listed["passes"]}
    for name in STAGE_PASSES:
        assert passes[name]["general"] is False and passes[name]["enabled"] is False
        assert listed["aliases"][name[len("Scope"):-len("Pass")] + "ScopeFusionPass"] == name
    assert set(STAGE_PASSES.values()) <= set(listed["fused_ops"])


def test_a_pass_is_enabled_by_the_references_name(od):
    m = second_stage_input_graph(od)
    assert fused(scopefusion.fuse(m.graph_def), "ROIAlign") == []
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes="ROIAlignScopeFusionPass")
    assert len(fused(result, "ROIAlign")) == 1


# --------------------------------------------------------------------------- RpnProposals
RPN = "ScopeRpnProposalsPass"
DETECTION = ["ScopeDecodeBboxV2Pass", "ScopeClipBoxesPass", "ScopeBatchMultiClassNMSPass", NORMALIZE, RPN]


@pytest.mark.parametrize("options", [
    dict(batch=2),
    dict(batch=1, scales=(1.0, 1.0, 1.0, 1.0)),
    dict(batch=3, score_thresh=0.4, iou_thresh=0.5, max_proposals=4),
    dict(batch=2, use_static_shapes=True),
], ids=["batch2", "batch1-unscaled", "batch3-thresholds", "static-shapes-nms"])
def test_first_stage_postprocessor_becomes_rpn_proposals(od, options):
    m = first_stage_postprocess_graph(od, **options)
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes=[RPN])
    assert result.report.refused == []
    (node,) = assert_fused(result, "RpnProposals", 1, scales=list(options.get("scales", (10.0, 10.0, 5.0, 5.0))),
                           score_threshold=options.get("score_thresh", 0.0),
                           iou_threshold=options.get("iou_thresh", 0.7),
                           max_size_per_class=options.get("max_proposals", 6),
                           max_total_size=options.get("max_proposals", 6),
                           use_static_shapes=options.get("use_static_shapes", False))
    assert node.name == "FirstStagePostprocessor"
    assert list(node.input) == ["rpn_box_encodings", "rpn_objectness_predictions_with_background",
                                "FirstStagePostprocessor/anchors", "true_image_shapes"]
    # the stage is one node (its anchors constant stays as an input)
    assert [n.name for n in result.fused_graph_def.node if n.name.startswith("FirstStagePostprocessor")] == [
        "FirstStagePostprocessor/anchors", "FirstStagePostprocessor"]
    GraphIndex(result.fused_graph_def)
    outcome = scopefusion.verify(m.graph_def, result.fused_graph_def, feeds=m.feeds, atol=0.0, rtol=0.0)
    outcome.assert_ok()
    assert {o.name for o in outcome.outputs} == set(m.outputs)


def test_rpn_proposals_win_over_their_parts_when_all_are_enabled(od):
    m = first_stage_postprocess_graph(od)
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes=DETECTION)
    assert [(f.name, f.type) for f in result.report.fused] == [("FirstStagePostprocessor", "RpnProposals")]
    scopefusion.verify(m.graph_def, result.fused_graph_def, feeds=m.feeds, atol=0.0, rtol=0.0).assert_ok()


def test_rpn_proposals_refuse_an_unknown_batch_and_its_parts_still_fuse(od):
    m = first_stage_postprocess_graph(od, batch=None)
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes=DETECTION)
    refused = {r.name: r.reason for r in result.report.refused}
    assert "the batch is unknown" in refused["FirstStagePostprocessor"]
    assert fused(result, "RpnProposals") == []
    assert len(fused(result, "DecodeBboxV2")) == 1 and len(fused(result, "BatchMultiClassNonMaxSuppression")) == 1
    verify_exact(m, result, scopefusion.load_registry())


def test_rpn_proposals_lookalike_scoring_the_background_is_refused(od):
    m = first_stage_postprocess_graph(od, objectness_column=0)
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes=[RPN])
    assert result.report.fused == []
    (refusal,) = result.report.refused
    assert "the NMS scores is not wired as _postprocess_rpn wires it" in refusal.reason


# -------------------------------------------------------------------- FastrcnnPredictions
FRCNN = "ScopeFastrcnnPredictionsPass"


@pytest.mark.parametrize("options", [
    dict(),
    dict(shared_boxes=True),
    dict(batch=1, classes=2, logit_scale=2.0),
    dict(use_static_shapes=True, max_total=8),
], ids=["per-class-boxes", "shared-boxes", "batch1-logit-scale", "static-shapes-nms"])
def test_second_stage_postprocessor_becomes_fastrcnn_predictions(od, options):
    m = second_stage_postprocess_graph(od, **options)
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes=[FRCNN])
    assert result.report.refused == []
    (node,) = assert_fused(result, "FastrcnnPredictions", 1, scales=[10.0, 10.0, 5.0, 5.0],
                           logit_scale=options.get("logit_scale", 1.0), score_threshold=0.1, iou_threshold=0.6,
                           max_size_per_class=4, max_total_size=options.get("max_total", 6),
                           use_static_shapes=options.get("use_static_shapes", False))
    assert node.name == "SecondStagePostprocessor"
    assert list(node.input) == ["refined_box_encodings", "class_predictions_with_background", "proposal_boxes",
                                "num_proposals", "true_image_shapes"]
    assert [n.name for n in result.fused_graph_def.node if n.name.startswith("SecondStage")] == [
        "SecondStagePostprocessor"]
    GraphIndex(result.fused_graph_def)
    outcome = scopefusion.verify(m.graph_def, result.fused_graph_def, feeds=m.feeds, atol=0.0, rtol=0.0)
    outcome.assert_ok()
    assert {o.name for o in outcome.outputs} == set(m.outputs)


def test_fastrcnn_predictions_honour_the_valid_proposal_count(od):
    """The second image has 3 padded proposals: they must not be detected, in the fused graph too."""
    m = second_stage_postprocess_graph(od, batch=2, score_thresh=0.0)
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes=[FRCNN])
    assert_fused(result, "FastrcnnPredictions", 1)
    feeds = dict(m.feeds)
    feeds["num_proposals:0"] = np.array([8, 1], np.int32)  # one valid proposal: at most one box per class
    outcome = scopefusion.verify(m.graph_def, result.fused_graph_def, feeds=feeds, atol=0.0, rtol=0.0)
    outcome.assert_ok()
    from scopefusion.core.verify.execute import run_graph_def

    (num,) = run_graph_def(m.graph_def, feeds, ["num_detections:0"])
    assert num[1] <= 3 < num[0]


def test_fastrcnn_predictions_win_over_their_parts_when_all_are_enabled(od):
    m = second_stage_postprocess_graph(od)
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes=DETECTION + [FRCNN])
    assert [(f.name, f.type) for f in result.report.fused] == [("SecondStagePostprocessor", "FastrcnnPredictions")]


def test_fastrcnn_predictions_refuse_an_unknown_batch_and_the_decode_still_fuses(od):
    m = second_stage_postprocess_graph(od, batch=None)
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes=DETECTION + [FRCNN])
    refused = {r.name: r.reason for r in result.report.refused}
    assert "the NMS input shapes are not all known" in refused["SecondStagePostprocessor"]
    assert fused(result, "FastrcnnPredictions") == []
    assert len(fused(result, "DecodeBboxV2")) == 1  # the NMS alone refuses num_valid_boxes
    assert "num_valid_boxes" in refused["SecondStagePostprocessor/BatchMultiClassNonMaxSuppression"]
    verify_exact(m, result, scopefusion.load_registry())


def test_fastrcnn_predictions_with_masks_are_refused(od):
    """Mask R-CNN passes mask predictions through the NMS: a fourth output FastrcnnPredictions lacks."""
    m = second_stage_postprocess_graph(od, masks=True)
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes=[FRCNN])
    assert result.report.fused == []
    (refusal,) = result.report.refused
    assert refusal.name == "SecondStagePostprocessor"
    assert "is not what ScopeBatchMultiClassNMSPass fuses" in refusal.reason
    assert "masks and additional_fields are not supported" in refusal.reason


def test_fastrcnn_predictions_with_a_sigmoid_score_converter_are_not_matched(od):
    m = second_stage_postprocess_graph(od, score_converter="sigmoid")
    result = scopefusion.fuse(m.graph_def, enable_scope_fusion_passes=[FRCNN])
    assert result.report.fused == []
    assert assert_not_matched(result, "SecondStagePostprocessor") == (
        "ScopeFastrcnnPredictionsPass: pattern FastrcnnPredictions: exactly 1 Softmax node(s) wanted, 0 found")
