"""The detection post-processing passes (DecodeBboxV2, ClipBoxes, BatchMultiClassNonMaxSuppression)
on graphs built by the real TensorFlow Object Detection API (see ``detection_models.py``).

The OD API is pip-installed with ``--no-deps`` into a temporary directory once per session; its
declared dependencies (jupyter, matplotlib, ...) cannot be expressed in the ``test`` extra without
pulling in far more than box coding needs.
"""
from __future__ import annotations

import numpy as np
import pytest
from tests.models.detection_models import (
    clip_graph,
    clip_lookalikes_graph,
    decode_graph,
    decode_lookalikes_graph,
    import_object_detection,
    install_object_detection,
    nms_graph,
    proposal_graph,
    single_image_nms_graph,
    ssd_postprocess_graph,
)

import scopefusion
from scopefusion.core.graph.index import GraphIndex
from scopefusion.builtin_passes.scope.batch_nms import BATCH_MULTICLASS_NMS, ScopeBatchMultiClassNMSPass
from scopefusion.builtin_passes.scope.clip_boxes import CLIP_BOXES, ScopeClipBoxesPass
from scopefusion.builtin_passes.scope.decode_bbox import DECODE_BBOX_V2, ScopeDecodeBboxV2Pass
from scopefusion.core.verify.execute import run_graph_def
from scopefusion.core.graph.attrs import attr_value_to_python
from scopefusion.testing import assert_fused, assert_not_matched, registry_with

DECODE = "ScopeDecodeBboxV2Pass"
CLIP = "ScopeClipBoxesPass"
NMS = "ScopeBatchMultiClassNMSPass"
ALL = [DECODE, CLIP, NMS]


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def od(tmp_path_factory):
    """The OD API from PyPI (``object-detection``, installed with ``--no-deps``), imported under
    ``tf.compat.v1``."""
    site = install_object_detection(tmp_path_factory.mktemp("object-detection"))
    return import_object_detection(site)


@pytest.fixture(scope="module")
def registry():
    return registry_with([ScopeDecodeBboxV2Pass, ScopeClipBoxesPass, ScopeBatchMultiClassNMSPass],
                         [DECODE_BBOX_V2, CLIP_BOXES, BATCH_MULTICLASS_NMS])


def fuse(model, registry, enable=ALL, **options):
    return scopefusion.fuse(model.graph_def, registry=registry, enable_scope_fusion_passes=enable, **options)


def verify(model, result, registry, *, exact=False, random_runs=2, **options):
    """Verify on the model's own (realistic) feeds and on random feeds; returns both results."""
    if exact:
        options.update(atol=0.0, rtol=0.0)
    own = scopefusion.verify(model.graph_def, result.fused_graph_def, fused_ops=registry.fused_ops,
                             feeds=model.feeds, **options)
    own.assert_ok()
    outcomes = [own]
    if random_runs:
        shapes = {k.split(":")[0]: list(v.shape) for k, v in model.feeds.items()}
        rand = scopefusion.verify(model.graph_def, result.fused_graph_def, fused_ops=registry.fused_ops,
                                  input_shapes=shapes, runs=random_runs, **options)
        rand.assert_ok()
        outcomes.append(rand)
    return outcomes


def node(result, name):
    return next(n for n in result.fused_graph_def.node if n.name == name)


def attrs(n):
    return {k: attr_value_to_python(v) for k, v in n.attr.items()}


# ------------------------------------------------------------------------ DecodeBboxV2
def test_decode_scopes_are_fused_with_scales_read_from_the_graph(od, registry):
    m = decode_graph(od)
    result = fuse(m, registry, [DECODE])
    assert result.report.refused == []
    assert_fused(result, "DecodeBboxV2", 2, T=1)
    first, second = node(result, "FirstStage/Decode"), node(result, "SecondStage/Decode")
    assert attrs(first)["scales"] == [10.0, 10.0, 5.0, 5.0]
    assert attrs(second)["scales"] == [1.0, 1.0, 1.0, 1.0]  # a coder without scale factors
    assert list(first.input) == ["rel_codes", "FirstStage/anchors"]
    assert list(second.input) == ["SecondStage/mul", "anchors"]
    names = {n.name for n in result.fused_graph_def.node}
    assert not any("/Decode/" in n for n in names)
    GraphIndex(result.fused_graph_def)
    for outcome in verify(m, result, registry):
        assert max(o.max_abs_error for o in outcome.outputs) <= 1e-4


def test_decode_lookalikes_are_not_fused(od, registry):
    m = decode_lookalikes_graph(od)
    result = fuse(m, registry)
    assert result.report.fused == []
    assert "not the Faster R-CNN decode" in assert_not_matched(result, "Swapped/Decode")
    # the square coder's Decode computes one Exp and a Sqrt: one feature away from two patterns
    assert assert_not_matched(result, "Square/Decode") == (
        "ScopeLayerNormPass: pattern LayerNorm: exactly 2 Mean node(s) wanted, 0 found; "
        "ScopeDecodeBboxV2Pass: pattern DecodeBboxV2: exactly 2 Exp node(s) wanted, 1 found")
    assert assert_not_matched(result, "Keypoint/Decode") == "no pattern matched it"
    assert assert_not_matched(result, "BoxDecoder") == (
        "ScopeDecodeBboxV2Pass: pattern DecodeBboxV2: scope name 'BoxDecoder' is not 'Decode'")


# --------------------------------------------------------------------------- ClipBoxes
def test_clip_to_window_scopes_are_fused_and_the_filter_is_read_from_the_graph(od, registry):
    m = clip_graph(od)
    result = fuse(m, registry, [CLIP])
    assert_fused(result, "ClipBoxes", 2, T=1)
    fed, unit = node(result, "Proposals/ClipToWindow"), node(result, "Proposals/ClipToWindow_1")
    assert attrs(fed)["filter_nonoverlapping"] is False
    assert attrs(unit)["filter_nonoverlapping"] is True
    assert list(fed.input) == ["Proposals/sub", "window"]
    # a window written as a Python list is a Const inside the scope; it stays and feeds the op
    assert list(unit.input) == ["Proposals/sub", "Proposals/ClipToWindow_1/Const"]
    reason = assert_not_matched(result, "Scored/ClipToWindow")
    assert "gathers 1 extra box-list field" in reason and "only the boxes" in reason
    outcomes = verify(m, result, registry, exact=True)
    assert outcomes[0].output("clipped_unit").shape[0] < 48  # the filter dropped boxes


def test_clip_lookalikes_are_not_fused(registry):
    m = clip_lookalikes_graph()
    result = fuse(m, registry)
    assert result.report.fused == []
    assert assert_not_matched(result, "ByValue/ClipToWindow") == "no pattern matched it"
    assert "not a clip to a window" in assert_not_matched(result, "Crossed/ClipToWindow")


def test_proposals_are_decoded_then_clipped_to_a_window_computed_at_run_time(od, registry):
    m = proposal_graph(od)
    result = fuse(m, registry)
    assert_fused(result, "DecodeBboxV2", 1, scales=[10.0, 10.0, 5.0, 5.0])
    (clip,) = assert_fused(result, "ClipBoxes", 1, filter_nonoverlapping=False)
    assert list(clip.input) == ["FirstStagePostprocessor/Decode", "FirstStagePostprocessor/stack"]
    verify(m, result, registry, random_runs=0)


# ------------------------------------------------------------- BatchMultiClassNonMaxSuppression
NMS_CASES = {
    "static batch, window from the boxes": dict(),
    "dynamic batch (while loop), window from the boxes": dict(static_batch=False),
    "static batch, one [4] window": dict(clip_window="shared"),
    "dynamic batch, [B, 4] windows, per-class boxes, change_coordinate_frame":
        dict(static_batch=False, clip_window="per_image", q=3, change_coordinate_frame=True),
    "static batch, only boxes and num_detections fetched": dict(outputs=("boxes", "num")),
    "use_static_shapes (padded per-class NMS), dynamic batch, [B, 4] windows":
        dict(use_static_shapes=True, static_batch=False, clip_window="per_image"),
    "use_static_shapes, C * max_size_per_class < max_total_size, one [4] window, change_coordinate_frame":
        dict(use_static_shapes=True, max_total_size=30, q=3, clip_window="shared", change_coordinate_frame=True),
}


@pytest.mark.parametrize("options", list(NMS_CASES.values()), ids=list(NMS_CASES))
def test_batch_nms_is_fused_and_reproduces_every_output_exactly(od, registry, options):
    m = nms_graph(od, anchors=40, classes=3, seed=7, **options)
    result = fuse(m, registry, [NMS])
    assert result.report.fused_count("BatchMultiClassNonMaxSuppression") == 1
    max_total_size = options.get("max_total_size", 8)
    (n,) = assert_fused(result, "BatchMultiClassNonMaxSuppression", 1, score_threshold=0.3, iou_threshold=0.5,
                        max_size_per_class=5, max_total_size=max_total_size,
                        change_coordinate_frame=options.get("change_coordinate_frame", False),
                        use_static_shapes=options.get("use_static_shapes", False))
    assert n.name == "BatchMultiClassNonMaxSuppression"
    window = {None: "BatchMultiClassNonMaxSuppression/stack_1", "shared": "clip_window",
              "per_image": "clip_window"}[options.get("clip_window")]
    assert list(n.input) == ["boxes", "scores", window]
    ops = {x.op for x in result.fused_graph_def.node}
    assert not ops & {"NonMaxSuppressionV3", "PartitionedCall", "TopKV2", "Enter", "TensorArrayV3", "Unpack"}
    GraphIndex(result.fused_graph_def)
    # boxes, scores, classes and num_detections, in order, bit for bit
    verify(m, result, registry, exact=True)
    (boxes, num) = run_graph_def(m.graph_def, m.feeds, ["detection_boxes:0", "detection_num:0"])
    assert num.min() > 0 and num.max() <= boxes.shape[1]  # real detections
    assert boxes.shape[1] == (min(max_total_size, 3 * 5) if options.get("use_static_shapes") else max_total_size)


def test_batch_nms_exact_on_many_ties_and_several_seeds(od, registry):
    """Scores rounded to 2 decimals (many ties across classes and boxes); top-k order and the
    -1 / zero padding must match exactly."""
    m = nms_graph(od, batch=3, anchors=64, classes=4, max_size_per_class=10, max_total_size=24,
                  score_thresh=0.1, iou_thresh=0.4, seed=3)
    result = fuse(m, registry, [NMS])
    assert_fused(result, "BatchMultiClassNonMaxSuppression", 1, max_size_per_class=10, max_total_size=24)
    feeds = dict(m.feeds)
    scores = feeds["scores:0"]
    assert len(np.unique(scores)) < scores.size / 4
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        feeds["scores:0"] = np.round(rng.uniform(size=scores.shape), 2).astype(np.float32)
        scopefusion.verify(m.graph_def, result.fused_graph_def, fused_ops=registry.fused_ops, feeds=feeds,
                           atol=0.0, rtol=0.0).assert_ok()


@pytest.mark.parametrize("batch", [2, None], ids=["static batch", "dynamic batch"])
def test_ssd_postprocessor_decode_and_nms_are_fused_and_the_inner_clip_is_subsumed(od, registry, batch):
    m = ssd_postprocess_graph(od, batch=batch)
    result = fuse(m, registry)
    (decode,) = assert_fused(result, "DecodeBboxV2", 1, scales=[10.0, 10.0, 5.0, 5.0])
    (nms,) = assert_fused(result, "BatchMultiClassNonMaxSuppression", 1, score_threshold=0.2, iou_threshold=0.6,
                          max_size_per_class=6, max_total_size=10, change_coordinate_frame=False)
    assert_fused(result, "ClipBoxes", 0)
    assert decode.name == "Postprocessor/Decode" and nms.name == "Postprocessor/BatchMultiClassNonMaxSuppression"
    assert list(nms.input)[1:] == ["Postprocessor/Slice", "image_window"]
    # the per-image clips inside the NMS filter scores and classes too: refused by ClipBoxes
    assert all("extra box-list field" in r.reason for r in result.report.refused)
    verify(m, result, registry, exact=True, random_runs=1)


@pytest.mark.parametrize("variant,reason", [
    (dict(masks=True, outputs=("boxes", "masks", "num")), "reads masks from outside"),
    (dict(num_valid_boxes=True), "reads num_valid_boxes from outside"),
    (dict(static_batch=False, control_flow_v1=False), "body function of a TF2 While loop"),
])
def test_batch_nms_variants_the_op_cannot_represent_are_refused(od, registry, variant, reason):
    m = nms_graph(od, **variant)
    result = fuse(m, registry, [NMS])
    assert reason in assert_not_matched(result, "BatchMultiClassNonMaxSuppression")
    assert result.report.fused == []


def test_single_image_nms_is_not_the_batched_op(od, registry):
    result = fuse(single_image_nms_graph(od), registry)
    assert result.report.fused == [] and result.report.refused == []


# ------------------------------------------------------------------------ not enabled
def test_the_passes_do_nothing_unless_enabled(od, registry):
    for m in (decode_graph(od), clip_graph(od), nms_graph(od), ssd_postprocess_graph(od)):
        result = scopefusion.fuse(m.graph_def, registry=registry)
        assert result.report.fused == [] and result.report.refused == []
        assert len(result.fused_graph_def.node) == len(m.graph_def.node)
    assert not any(registry.get(name).general for name in ALL)


def test_each_pass_fuses_only_its_own_scopes(od, registry):
    m = ssd_postprocess_graph(od)
    result = fuse(m, registry, [DECODE])
    assert [f.type for f in result.report.fused] == ["DecodeBboxV2"]
    result = fuse(m, registry, [NMS])
    assert [f.type for f in result.report.fused] == ["BatchMultiClassNonMaxSuppression"]


# ------------------------------------------------------------------------------- hints
@pytest.mark.parametrize("build,pass_name,places", [
    (decode_graph, DECODE, 2), (clip_graph, CLIP, 2), (nms_graph, NMS, 1)],
    ids=["decode", "clip", "nms"])
def test_a_detection_pass_left_out_is_named_where_it_would_fuse(od, registry, build, pass_name, places):
    """The passes a run leaves out are tried for hints only where they may fuse: on the OD API's
    graphs, each detection pass is (its patterns' op types occur), and says where."""
    result = fuse(build(od), registry, [])
    assert result.report.fused == []
    hint = next(h for h in result.report.hints if h.startswith(f"{pass_name} is not enabled"))
    assert f"it would fuse {places} place(s)" in hint
