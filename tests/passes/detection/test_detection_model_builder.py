"""The detection passes on whole models that the TensorFlow 2 Object Detection API's
``model_builder`` builds from a pipeline config (``detection_model_builder.py``): an SSD
(MobileNet V2, tf_keras) and a Faster R-CNN (ResNet-50, tf_keras), random weights, exported as
``postprocess(predict(preprocess(images)))`` and frozen.

Every detection scope of those graphs is accounted for: fused, with the op and attributes read
from the graph, or refused with the reason; the fused graphs compute exactly what the models do.
"""
from __future__ import annotations

import json

import pytest
from tests.models.detection_model_builder import build_graphs, install_model_builder_site

import scopefusion
from scopefusion.testing import assert_fused

pytestmark = pytest.mark.slow  # these take minutes

DETECTION = ["ScopeDecodeBboxV2Pass", "ScopeClipBoxesPass", "ScopeBatchMultiClassNMSPass", "ScopeNormalizeBBoxPass",
             "ScopeToAbsoluteBBoxPass", "ScopeROIAlignPass", "ScopeRpnProposalsPass", "ScopeFastrcnnPredictionsPass",
             "ScopeKeepRatioResizeBilinearPass"]
DETECTION_OPS = {"DecodeBboxV2", "ClipBoxes", "BatchMultiClassNonMaxSuppression", "NormalizeBBox", "ToAbsoluteBBox",
                 "ROIAlign", "RpnProposals", "FastrcnnPredictions", "KeepRatioResizeBilinear"}
#: the last names of the scopes (and the crop node) the detection passes look at
DETECTION_SCOPES = {"Decode", "ClipToWindow", "BatchMultiClassNonMaxSuppression", "ToNormalizedCoordinates",
                    "ToAbsoluteCoordinates", "CropAndResize", "FirstStagePostprocessor", "SecondStagePostprocessor",
                    "ResizeToRange"}
ADDITIONAL_FIELDS = "(num_valid_boxes, masks and additional_fields are not supported)"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    site = install_model_builder_site(tmp_path_factory.mktemp("od-api-tf2"))
    return build_graphs(site, tmp_path_factory.mktemp("od-api-tf2-graphs"))


#: graph passes off: the detection passes alone (the convolution passes would fold the batch norms
#: of the extractors, which rounds the logits otherwise)
GRAPH_PASSES_OFF = {"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}}


@pytest.fixture(scope="module")
def fuse(tmp_path_factory):
    switch_file = tmp_path_factory.mktemp("switch") / "graph_passes_off.json"
    switch_file.write_text(json.dumps(GRAPH_PASSES_OFF))

    def run(model):
        return scopefusion.fuse(model.graph_def, enable_scope_fusion_passes=DETECTION, fusion_switch_file=switch_file)

    return run


def detection_fused(result) -> dict[str, str]:
    """Every fused op (the graph passes are off): name -> type, all of them detection ops."""
    fused = {f.name: f.type for f in result.report.fused}
    assert set(fused.values()) <= DETECTION_OPS
    return fused


def detection_refused(result) -> dict[str, str]:
    """Every refusal: name -> reason, all of them at detection scopes."""
    refused = {r.name: r.reason for r in result.report.refused}
    assert all(name.rpartition("/")[2] in DETECTION_SCOPES for name in refused), list(refused)
    return refused


def verify_exact(model, result, *, other_shape=None):
    """The fused graph gives exactly the model's outputs, on the model's images and on random ones
    (of ``other_shape`` when given)."""
    registry = scopefusion.load_registry()
    outcome = scopefusion.verify(model.graph_def, result.fused_graph_def, fused_ops=registry.fused_ops,
                                 feeds=model.feeds, atol=0.0, rtol=0.0)
    outcome.assert_ok()
    assert {o.name for o in outcome.outputs} == set(model.outputs)
    shapes = {k.split(":")[0]: other_shape or list(v.shape) for k, v in model.feeds.items()}
    scopefusion.verify(model.graph_def, result.fused_graph_def, fused_ops=registry.fused_ops, input_shapes=shapes,
                       runs=1, atol=0.0, rtol=0.0).assert_ok()


def test_ssd_decode_is_fused_and_its_nms_with_additional_fields_refused(models, fuse):
    """SSD's postprocess decodes the box encodings against the anchors (``Decode``) and runs the
    NMS with ``additional_fields`` (the multiclass scores and the anchor indices the detections
    came from, both outputs of the model): outputs the fused NMS op does not have."""
    m = models["ssd"]
    result = fuse(m)
    assert detection_fused(result) == {"Postprocessor/Decode": "DecodeBboxV2"}
    assert_fused(result, "DecodeBboxV2", 1, scales=[10.0, 10.0, 5.0, 5.0])
    refused = detection_refused(result)
    assert list(refused) == ["Postprocessor/BatchMultiClassNonMaxSuppression"]
    assert refused["Postprocessor/BatchMultiClassNonMaxSuppression"] == (
        "rejected by the pass: unstack_4 reads Postprocessor/Cast from outside, which is neither boxes, scores nor "
        f"clip window {ADDITIONAL_FIELDS}")
    verify_exact(m, result)


def test_ssd_soft_nms_is_refused_for_its_sigma(models, fuse):
    m = models["ssd_soft_nms"]
    result = fuse(m)
    assert detection_fused(result) == {"Postprocessor/Decode": "DecodeBboxV2"}
    reason = detection_refused(result)["Postprocessor/BatchMultiClassNonMaxSuppression"]
    assert "NonMaxSuppressionV5" in reason and "soft NMS (a soft_nms_sigma that is not the constant 0)" in reason
    verify_exact(m, result)


def test_faster_rcnn_stages_parts_fuse_and_the_rest_is_refused_with_reasons(models, fuse):
    """Faster R-CNN's ``predict`` runs ``_postprocess_rpn`` outside any ``FirstStagePostprocessor``
    scope (that scope is ``postprocess``'s, for RPN-only models), so the proposals are fused part
    by part: their decoding, their NMS (hard ``non_max_suppression_with_scores``, the clip window
    taken element by element) and their normalization; the second stage decodes and normalizes,
    and its NMS carries ``num_valid_boxes`` and ``additional_fields`` (the multiclass scores and
    anchor indices of the detections, outputs of the model)."""
    m = models["faster_rcnn"]
    result = fuse(m)
    assert detection_fused(result) == {
        "Decode": "DecodeBboxV2",
        "BatchMultiClassNonMaxSuppression": "BatchMultiClassNonMaxSuppression",
        "ToNormalizedCoordinates": "NormalizeBBox",
        "SecondStagePostprocessor/Decode": "DecodeBboxV2",
        "SecondStagePostprocessor/ToNormalizedCoordinates": "NormalizeBBox",
    }
    assert_fused(result, "BatchMultiClassNonMaxSuppression", 1, score_threshold=0.0, iou_threshold=0.7,
                 max_size_per_class=8, max_total_size=8, change_coordinate_frame=False, use_static_shapes=False)
    assert_fused(result, "DecodeBboxV2", 2, scales=[10.0, 10.0, 5.0, 5.0])
    second_nms = ("rejected by the pass: unstack_4 reads SecondStagePostprocessor/Cast_1 from outside, which is "
                  f"neither boxes, scores nor clip window {ADDITIONAL_FIELDS}")
    assert detection_refused(result) == {
        "SecondStagePostprocessor/BatchMultiClassNonMaxSuppression": second_nms,
        "SecondStagePostprocessor": (
            "rejected by the pass: SecondStagePostprocessor/BatchMultiClassNonMaxSuppression is not what "
            "ScopeBatchMultiClassNMSPass fuses: " + second_nms.removeprefix("rejected by the pass: ")),
        # the proposals come out of the NMS's PadOrClipBoxList, a Slice of sizes computed at run time:
        # TensorFlow's own shape inference does not know their last dimension is 4 either
        "CropAndResize": "rejected by the pass: the boxes are not [B, K, 4] (shape [1, None, None])",
        # see test_faster_rcnn_resize_to_range_of_tf2
        "Preprocessor/ResizeToRange": ("rejected by the pass: the scope resizes 2 tensors (masks too?); "
                                       "KeepRatioResizeBilinear resizes one image"),
    }
    verify_exact(m, result, other_shape=[1, 70, 40, 3])  # a portrait image too


@pytest.mark.xfail(strict=True, reason=(
    "the TF2-era OD API's resize_to_range resizes in a tf.cond (landscape: resize_images to [min, max] with "
    "preserve_aspect_ratio, portrait: to [max, min]), a ResizeBilinear in each branch of the lowered cond; "
    "ScopeKeepRatioResizeBilinearPass reads the TF1 spelling (one ResizeBilinear to a size computed from the "
    "min and max dimensions) and refuses this one as 'the scope resizes 2 tensors (masks too?)'"))
def test_faster_rcnn_resize_to_range_of_tf2(models, fuse):
    assert_fused(fuse(models["faster_rcnn"]), "KeepRatioResizeBilinear", 1)
