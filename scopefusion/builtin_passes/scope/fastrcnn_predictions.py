"""ScopeFastrcnnPredictionsPass: the Faster R-CNN second stage's post-processing -> ``FastrcnnPredictions``.

``FasterRCNNMetaArch.postprocess`` of the TF Object Detection API opens ``SecondStagePostprocessor``
and runs ``_postprocess_box_classifier`` there::

    codes  = reshape(reshape(refined_box_encodings, [-1, M, q, 4]), [-1, 4])            q: C or 1
    tiled  = reshape(tile(expand_dims(proposal_boxes, 2), [1, 1, q, 1]), [-1, 4])
    boxes  = reshape(Decode(codes, tiled), [B, M, q, 4])                               a Decode scope
    scores = reshape(slice(softmax(reshape(logits, [-1, M, C + 1]) / logit_scale), [0, 0, 1], [-1, -1, -1]),
                     [-1, M, C])
    window = to_float(stack([0, 0, true_image_shapes[:, 0], true_image_shapes[:, 1]], 1))
    BatchMultiClassNonMaxSuppression(boxes, scores, window, change_coordinate_frame=True,
                                     num_valid_boxes=num_proposals)
    num_detections = to_float(num_detections)

The fused op takes the box classifier's refined encodings and class logits, the proposals, their
count per image and the true image shapes, and gives the detections.  The parts are checked by the
passes that know them (``ScopeDecodeBboxV2Pass``; the NMS by ``ScopeBatchMultiClassNMSPass``'s own
analysis, which here also takes ``num_valid_boxes``); the wiring between them is matched op by op
and a scope holding anything else (masks: Mask R-CNN's third output) is refused with the reason.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.graph.matching import MatchFailure, PatternMatcher
from ...core.graph.pattern import const, one_of, op
from ...core.scope.base_pass import ScopeBasePass
from ...core.scope.patterns import PatternSet
from ...core.scope.port_maps import input_slots, unmatched_nodes
from ...core.scope.results import FusionScopesResult
from .batch_nms import ScopeBatchMultiClassNMSPass
from .batch_nms_op import batch_multiclass_nms_reference
from .decode_bbox import ScopeDecodeBboxV2Pass, decode_bbox_v2_reference
from .stage_parts import read_part, stage_patterns, sub_scopes

if TYPE_CHECKING:  # pragma: no cover
    from ...core.scope.scope_graph import Scope

Tensor = tuple[int, int]
SCOPE = "SecondStagePostprocessor"


def fastrcnn_predictions_reference(refined_box_encodings: Any, class_predictions: Any, proposal_boxes: Any,
                                   num_proposals: Any, image_shapes: Any, *, scales: Sequence[float],
                                   logit_scale: float, score_threshold: float, iou_threshold: float,
                                   max_size_per_class: int, max_total_size: int, use_static_shapes: bool) -> tuple:
    """Decode each proposal's refined boxes, score the classes by a softmax without the
    background, NMS them class by class in each image's window (boxes relative to it) among the
    image's valid proposals."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    with tf.name_scope("fastrcnn_predictions_reference"):
        batch, count = tf.shape(proposal_boxes)[0], tf.shape(proposal_boxes)[1]
        q = tf.shape(refined_box_encodings)[1]
        tiled = tf.reshape(tf.tile(tf.expand_dims(proposal_boxes, 2), tf.stack([1, 1, q, 1])), [-1, 4])
        (decoded,) = decode_bbox_v2_reference(tf.reshape(refined_box_encodings, [-1, 4]), tiled, scales=scales,
                                              T=tf.float32)
        boxes = tf.reshape(decoded, tf.stack([batch, count, q, 4]))
        logits = tf.reshape(class_predictions, tf.stack([batch, count, -1]))
        scores = tf.nn.softmax(tf.divide(logits, tf.cast(logit_scale, tf.float32)))[:, :, 1:]
        heights, widths = image_shapes[:, 0], image_shapes[:, 1]
        window = tf.cast(tf.stack([tf.zeros_like(heights), tf.zeros_like(widths), heights, widths], 1), tf.float32)
        nmsed_boxes, nmsed_scores, nmsed_classes, num = batch_multiclass_nms_reference(
            boxes, scores, window, score_threshold=score_threshold, iou_threshold=iou_threshold,
            max_size_per_class=max_size_per_class, max_total_size=max_total_size, change_coordinate_frame=True,
            use_static_shapes=use_static_shapes, num_valid_boxes=num_proposals)
        return nmsed_boxes, nmsed_scores, nmsed_classes, tf.cast(num, tf.float32)


FASTRCNN_PREDICTIONS = FusedOpDef(
    name="FastrcnnPredictions",
    inputs=(
        TensorArg("refined_box_encodings", dtype="float32", description="[B * M, q, 4] codes; q is C or 1"),
        TensorArg("class_predictions", dtype="float32", description="[B * M, C + 1] logits, background first"),
        TensorArg("proposal_boxes", dtype="float32", description="[B, M, 4] proposals (pixels)"),
        TensorArg("num_proposals", dtype="int32", description="[B] valid proposals per image"),
        TensorArg("image_shapes", dtype="int32", description="[B, 3] true image shapes h, w, c"),
    ),
    outputs=(
        TensorArg("detection_boxes", dtype="float32", description="[B, K, 4] normalized to the image window"),
        TensorArg("detection_scores", dtype="float32", description="[B, K]"),
        TensorArg("detection_classes", dtype="float32", description="[B, K] class index (background excluded)"),
        TensorArg("num_detections", dtype="float32", description="[B]"),
    ),
    attrs=(
        AttrDef("scales", "list(float)", description="the box coder's scale factors"),
        AttrDef("logit_scale", "float", description="the score converter's temperature"),
        AttrDef("score_threshold", "float"),
        AttrDef("iou_threshold", "float"),
        AttrDef("max_size_per_class", "int"),
        AttrDef("max_total_size", "int"),
        AttrDef("use_static_shapes", "bool", default=False),
    ),
    reference=fastrcnn_predictions_reference,
    description="Faster R-CNN second stage: per-class box decoding, softmax scores and NMS",
)


class _NMSOfAStage(ScopeBatchMultiClassNMSPass):
    """The NMS part of a second stage, which also takes the proposals' count (num_valid_boxes): the
    NMS pass's own analysis, named like it in the reasons it gives (never registered)."""

    name = ScopeBatchMultiClassNMSPass.name
    num_valid_boxes = True


def _glue_defs(batch: int, count: int, q: int, classes: int) -> dict[str, Any]:
    def column(k: int) -> Any:
        return op("StridedSlice", "$image_shapes", const([0, k]), const([0, k + 1]), const([1, 1]), begin_mask=1,
                  end_mask=1, shrink_axis_mask=2, ellipsis_mask=0, new_axis_mask=0)

    zeros = one_of(const(where=lambda v: not np.any(v), description="zeros"), op("ZerosLike", one_of("$h", "$w")))
    return {
        "codes": op("Reshape", op("Reshape", "$refined", const([-1, count, q, 4])), const([-1, 4])),
        "tiled": op("Reshape", op("Tile", op("ExpandDims", "$proposals", const(2)), const([1, 1, q, 1])),
                    const([-1, 4])),
        "boxes": op("Reshape", "$decoded", const([batch, count, q, 4])),
        "scores": op("Reshape", op("Slice", op("Softmax", op("RealDiv", op("Reshape", "$logits",
                                                                           const([-1, count, classes + 1])),
                                                             const(label="logit_scale"))),
                                   const([0, 0, 1]), const([-1, -1, -1])), const([-1, count, classes])),
        "window": op("Cast", op("Pack", zeros, zeros, "$h", "$w", axis=1, N=4), DstT=1),
        "h": column(0),
        "w": column(1),
    }


def _match(m: PatternMatcher, tensor: Tensor, expr: Any, what: str) -> None:
    try:
        m.match(tensor, expr)
    except MatchFailure as why:
        fail(f"the {what} is not wired as _postprocess_box_classifier wires it: {why}")


class ScopeFastrcnnPredictionsPass(ScopeBasePass):
    """OD API Faster R-CNN SecondStagePostprocessor scopes -> FastrcnnPredictions."""

    name = "ScopeFastrcnnPredictionsPass"
    general = False
    description = ("OD API Faster R-CNN SecondStagePostprocessor scopes (decode, softmax, NMS) "
                   "-> FastrcnnPredictions")

    def define_patterns(self) -> list[PatternSet]:
        return stage_patterns("FastrcnnPredictions", SCOPE)

    def generate_fusion_result(self, scopes: Sequence["Scope"], result: FusionScopesResult) -> None:
        scope = scopes[0]
        sg = scope.graph
        decodes, nmses = sub_scopes(scope, "Decode"), sub_scopes(scope, "BatchMultiClassNonMaxSuppression")
        if len(decodes) != 1 or len(nmses) != 1:
            fail(f"{len(decodes)} Decode and {len(nmses)} BatchMultiClassNonMaxSuppression scopes, not one each")
        decode = read_part(ScopeDecodeBboxV2Pass, decodes[0])
        nms = read_part(_NMSOfAStage, nmses[0])
        if not nms.attrs.get("change_coordinate_frame"):
            fail("the detections are not made relative to the clip window (change_coordinate_frame=False)")
        boxes_shape, scores_shape = sg.static_shape(nms.inputs[0]), sg.static_shape(nms.inputs[1])
        if boxes_shape is None or scores_shape is None or None in boxes_shape + scores_shape:
            fail(f"the NMS input shapes are not all known ({boxes_shape}, {scores_shape})")
        batch, count, q, _ = (int(d or 0) for d in boxes_shape)
        classes = int(scores_shape[2] or 0)
        inner = {i for part in (decode, nms) for i in part.scope.all_node_indices()}
        inside = frozenset(scope.all_node_indices()) - inner
        m = PatternMatcher(sg, inside=inside, defs=_glue_defs(batch, count, q, classes))
        m.tensors.update(decoded=decode.outputs[0])
        _match(m, decode.inputs[0], "$codes", "box codes")
        _match(m, decode.inputs[1], "$tiled", "proposals decoded against")
        _match(m, nms.inputs[0], "$boxes", "NMS boxes")
        _match(m, nms.inputs[1], "$scores", "NMS scores")
        _match(m, nms.inputs[2], "$window", "clip window")
        count_out = (sg.index.names[nms.outputs[3][0]], nms.outputs[3][1])
        casts = [n.name for n in scope.nodes_by_op("Cast", direct=True) if sg.producer(n.name, 0) == count_out]
        if len(casts) != 1:
            fail("the detection count is not cast to float once (tf.to_float(num_detections))")
        members = set(m.members) | inner | {sg.index.index[casts[0]]}
        extra = unmatched_nodes(scope, members)
        if extra:
            fail(f"the scope computes more than the predictions: {', '.join(extra[:3])}", *extra[:3])
        scale = np.asarray(m.consts["logit_scale"])
        if scale.size != 1:
            fail("the logit scale is not a scalar")
        result.set_type(FASTRCNN_PREDICTIONS.name)
        result.set_description(f"FastrcnnPredictions: {classes} classes, {'per-class' if q > 1 else 'shared'} boxes")
        result.set_attr("scales", decode.attrs["scales"])
        result.set_attr("logit_scale", float(scale.reshape(-1)[0]))
        for key in ("score_threshold", "iou_threshold", "max_size_per_class", "max_total_size", "use_static_shapes"):
            result.set_attr(key, nms.attrs[key])
        tensors = [m.tensors["refined"], m.tensors["logits"], m.tensors["proposals"], nms.inputs[3],
                   m.tensors["image_shapes"]]
        for reader, slots in input_slots(sg, frozenset(scope.all_node_indices()), tensors).items():
            result.insert_inputs(scope.suffix_of(reader), slots)
        for k in range(3):
            node, port = nms.outputs[k]
            ports: list[int | None] = [None] * (port + 1)
            ports[port] = k
            result.insert_outputs(scope.suffix_of(sg.index.names[node]), ports)
        result.insert_outputs(scope.suffix_of(casts[0]), [3])
