"""The post-processing stages of the OD API's Faster R-CNN meta-architecture, built with the OD API's
own code (``FasterRCNNMetaArch.postprocess``: ``FirstStagePostprocessor`` and
``SecondStagePostprocessor``), line by line as the meta-architecture writes them; see
``detection_stage_models.py`` for why a whole meta-architecture is not built.
"""
from __future__ import annotations

import functools
import types

import numpy as np

from tests.models.detection_models import DetectionModel, freeze, random_boxes
from tests.models.detection_stage_models import absolute_boxes


# ------------------------------------------------------------------- first stage
def first_stage_postprocess_graph(od: types.SimpleNamespace, *, batch: int | None = 2, anchors: int = 24,
                                  max_proposals: int = 6, score_thresh: float = 0.0, iou_thresh: float = 0.7,
                                  scales: tuple[float, ...] = (10.0, 10.0, 5.0, 5.0),
                                  use_static_shapes: bool = False, objectness_column: int = 1,
                                  seed: int = 0) -> DetectionModel:
    """``FasterRCNNMetaArch.postprocess`` of an RPN-only model (``number_of_stages: 1``): in
    ``FirstStagePostprocessor``, ``_postprocess_rpn`` line by line with the OD API's own functions:
    the box encodings decoded against the tiled anchors (``_batch_decode_boxes``: a
    ``FasterRcnnBoxCoder`` ``Decode`` scope), the objectness softmax without the background, the clip
    window of the true image shapes (``_compute_clip_window``), the first-stage NMS (the
    ``functools.partial`` of ``batch_multiclass_non_max_suppression`` that ``model_builder`` makes,
    ``max_size_per_class = max_total_size = first_stage_max_proposals``), the per-image
    ``to_normalized_coordinates`` (``static_or_dynamic_map_fn``) and ``tf.to_float`` of the count.
    ``batch=None``: an unknown batch.  ``objectness_column=0`` is a hand-made look-alike: the
    background column of the softmax taken as the score."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    anchor_values = (np.clip(random_boxes(rng, (anchors,)), 0.0, 1.0) * 32.0).astype(np.float32)
    box_coder = od.faster_rcnn_box_coder.FasterRcnnBoxCoder(scale_factors=list(scales))
    first_stage_nms_fn = functools.partial(
        od.post_processing.batch_multiclass_non_max_suppression, score_thresh=score_thresh,
        iou_thresh=iou_thresh, max_size_per_class=max_proposals, max_total_size=max_proposals,
        use_static_shapes=use_static_shapes)
    shape_utils = od.shape_utils

    def batch_decode_boxes(box_encodings, anchor_boxes):
        combined_shape = shape_utils.combined_static_and_dynamic_shape(box_encodings)
        num_classes = combined_shape[2]
        tiled_anchor_boxes = tf.tile(tf.expand_dims(anchor_boxes, 2), [1, 1, num_classes, 1])
        tiled_anchors_boxlist = od.box_list.BoxList(tf.reshape(tiled_anchor_boxes, [-1, 4]))
        decoded_boxes = box_coder.decode(tf.reshape(box_encodings, [-1, box_coder.code_size]), tiled_anchors_boxlist)
        return tf.reshape(decoded_boxes.get(), tf.stack([combined_shape[0], combined_shape[1], num_classes, 4]))

    def compute_clip_window(image_shapes):
        clip_heights = image_shapes[:, 0]
        clip_widths = image_shapes[:, 1]
        return tf1.to_float(tf.stack([tf.zeros_like(clip_heights), tf.zeros_like(clip_widths),
                                      clip_heights, clip_widths], axis=1))

    def postprocess_rpn(rpn_box_encodings_batch, rpn_objectness_predictions_with_background_batch, anchors_t,
                        image_shapes):
        rpn_box_encodings_batch = tf.expand_dims(rpn_box_encodings_batch, axis=2)
        rpn_encodings_shape = shape_utils.combined_static_and_dynamic_shape(rpn_box_encodings_batch)
        tiled_anchor_boxes = tf.tile(tf.expand_dims(anchors_t, 0), [rpn_encodings_shape[0], 1, 1])
        proposal_boxes = batch_decode_boxes(rpn_box_encodings_batch, tiled_anchor_boxes)
        proposal_boxes = tf.squeeze(proposal_boxes, axis=2)
        rpn_objectness_softmax_without_background = tf.nn.softmax(
            rpn_objectness_predictions_with_background_batch)[:, :, objectness_column]
        clip_window = compute_clip_window(image_shapes)
        (proposal_boxes, proposal_scores, _, _, _, num_proposals) = first_stage_nms_fn(
            tf.expand_dims(proposal_boxes, axis=2),
            tf.expand_dims(rpn_objectness_softmax_without_background, axis=2),
            clip_window=clip_window)

        def normalize_boxes(args):
            proposal_boxes_per_image, image_shape = args
            return od.box_list_ops.to_normalized_coordinates(
                od.box_list.BoxList(proposal_boxes_per_image), image_shape[0], image_shape[1],
                check_range=False).get()

        normalized_proposal_boxes = shape_utils.static_or_dynamic_map_fn(
            normalize_boxes, elems=[proposal_boxes, image_shapes], dtype=tf.float32)
        return normalized_proposal_boxes, proposal_scores, num_proposals

    def build():
        encodings = tf1.placeholder(tf.float32, [batch, anchors, 4], name="rpn_box_encodings")
        objectness = tf1.placeholder(tf.float32, [batch, anchors, 2],
                                     name="rpn_objectness_predictions_with_background")
        true_image_shapes = tf1.placeholder(tf.int32, [batch, 3], name="true_image_shapes")
        with tf1.name_scope("FirstStagePostprocessor"):
            boxes, scores, num = postprocess_rpn(encodings, objectness, tf.constant(anchor_values, name="anchors"),
                                                 true_image_shapes)
            num = tf1.to_float(num)
        n = batch or 2
        feeds = {encodings: rng.normal(0.0, 0.3, size=(n, anchors, 4)).astype(np.float32),
                 objectness: rng.normal(0.0, 2.0, size=(n, anchors, 2)).astype(np.float32),
                 true_image_shapes: np.array([[32, 32, 3], [28, 30, 3]] * n, np.int32)[:n]}
        names = ("detection_boxes", "detection_scores", "num_detections")
        return feeds, [tf.identity(t, name=k) for k, t in zip(names, (boxes, scores, num), strict=True)]

    return freeze(build)


# ------------------------------------------------------------------ second stage
def second_stage_postprocess_graph(od: types.SimpleNamespace, *, batch: int | None = 2, proposals: int = 8,
                                   classes: int = 3, max_per_class: int = 4, max_total: int = 6,
                                   score_thresh: float = 0.1, iou_thresh: float = 0.6, logit_scale: float = 1.0,
                                   use_static_shapes: bool = False, shared_boxes: bool = False,
                                   score_converter: str = "softmax", masks: bool = False,
                                   seed: int = 0) -> DetectionModel:
    """``FasterRCNNMetaArch.postprocess`` of a two-stage model: in ``SecondStagePostprocessor``,
    ``_postprocess_box_classifier`` line by line with the OD API's own functions: the refined box
    encodings [B * M, C, 4] reshaped per image and decoded against the proposals (``_batch_decode_boxes``,
    a ``FasterRcnnBoxCoder`` ``Decode`` scope), the class logits through the ``SOFTMAX`` score converter
    of ``post_processing_builder`` (divided by ``logit_scale``, ``scale_logits`` / ``convert_scores``),
    the background column sliced off, the clip window of the true image shapes, the second-stage NMS
    (the ``functools.partial`` the builder makes, ``change_coordinate_frame=True``,
    ``num_valid_boxes=num_proposals``) and ``tf.to_float`` of the count.  ``shared_boxes``: one
    refined box per proposal ([B * M, 1, 4], a class-agnostic box predictor).  ``score_converter``:
    ``sigmoid`` is the builder's ``SIGMOID`` converter.  ``masks``: Mask R-CNN's mask predictions
    [B * M, C, 3, 3] through a sigmoid into the NMS, as ``_postprocess_box_classifier`` passes them.
    ``batch=None``: an unknown batch (the NMS runs in a ``map/while`` loop)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    box_coder = od.faster_rcnn_box_coder.FasterRcnnBoxCoder(scale_factors=[10.0, 10.0, 5.0, 5.0])
    second_stage_nms_fn = functools.partial(
        od.post_processing.batch_multiclass_non_max_suppression, score_thresh=score_thresh,
        iou_thresh=iou_thresh, max_size_per_class=max_per_class, max_total_size=max_total,
        use_static_shapes=use_static_shapes)
    shape_utils = od.shape_utils
    q = 1 if shared_boxes else classes

    def score_conversion_fn(logits):
        scaled_logits = tf.divide(logits, logit_scale, name="scale_logits")
        convert = tf.nn.softmax if score_converter == "softmax" else tf.sigmoid
        return convert(scaled_logits, name="convert_scores")

    def batch_decode_boxes(box_encodings, anchor_boxes):
        combined_shape = shape_utils.combined_static_and_dynamic_shape(box_encodings)
        num_classes = combined_shape[2]
        tiled_anchor_boxes = tf.tile(tf.expand_dims(anchor_boxes, 2), [1, 1, num_classes, 1])
        tiled_anchors_boxlist = od.box_list.BoxList(tf.reshape(tiled_anchor_boxes, [-1, 4]))
        decoded_boxes = box_coder.decode(tf.reshape(box_encodings, [-1, box_coder.code_size]), tiled_anchors_boxlist)
        return tf.reshape(decoded_boxes.get(), tf.stack([combined_shape[0], combined_shape[1], num_classes, 4]))

    def compute_clip_window(image_shapes):
        clip_heights = image_shapes[:, 0]
        clip_widths = image_shapes[:, 1]
        return tf1.to_float(tf.stack([tf.zeros_like(clip_heights), tf.zeros_like(clip_widths),
                                      clip_heights, clip_widths], axis=1))

    def postprocess_box_classifier(refined_box_encodings, class_predictions_with_background, proposal_boxes,
                                   num_proposals, image_shapes, mask_predictions=None):
        refined_box_encodings_batch = tf.reshape(
            refined_box_encodings, [-1, proposals, refined_box_encodings.shape[1], box_coder.code_size])
        class_predictions_with_background_batch = tf.reshape(
            class_predictions_with_background, [-1, proposals, classes + 1])
        refined_decoded_boxes_batch = batch_decode_boxes(refined_box_encodings_batch, proposal_boxes)
        class_predictions_with_background_batch = score_conversion_fn(class_predictions_with_background_batch)
        class_predictions_batch = tf.reshape(
            tf.slice(class_predictions_with_background_batch, [0, 0, 1], [-1, -1, -1]), [-1, proposals, classes])
        clip_window = compute_clip_window(image_shapes)
        mask_predictions_batch = None
        if mask_predictions is not None:
            mask_height = mask_predictions.shape[2].value
            mask_width = mask_predictions.shape[3].value
            mask_predictions = tf.sigmoid(mask_predictions)
            mask_predictions_batch = tf.reshape(mask_predictions, [-1, proposals, classes, mask_height, mask_width])
        (nmsed_boxes, nmsed_scores, nmsed_classes, nmsed_masks, _, num_detections) = second_stage_nms_fn(
            refined_decoded_boxes_batch, class_predictions_batch, clip_window=clip_window,
            change_coordinate_frame=True, num_valid_boxes=num_proposals, masks=mask_predictions_batch)
        outs = [nmsed_boxes, nmsed_scores, nmsed_classes, tf1.to_float(num_detections)]
        return outs + ([nmsed_masks] if nmsed_masks is not None else [])

    def build():
        rows = None if batch is None else batch * proposals
        refined = tf1.placeholder(tf.float32, [rows, q, 4], name="refined_box_encodings")
        logits = tf1.placeholder(tf.float32, [rows, classes + 1], name="class_predictions_with_background")
        proposal_boxes = tf1.placeholder(tf.float32, [batch, proposals, 4], name="proposal_boxes")
        num_proposals = tf1.placeholder(tf.int32, [batch], name="num_proposals")
        true_image_shapes = tf1.placeholder(tf.int32, [batch, 3], name="true_image_shapes")
        mask_input = tf1.placeholder(tf.float32, [rows, classes, 3, 3], name="mask_predictions")
        with tf1.name_scope("SecondStagePostprocessor"):
            outs = postprocess_box_classifier(refined, logits, proposal_boxes, num_proposals, true_image_shapes,
                                              mask_input if masks else None)
        n = batch or 2
        feeds = {refined: rng.normal(0.0, 0.3, size=(n * proposals, q, 4)).astype(np.float32),
                 logits: rng.normal(0.0, 2.0, size=(n * proposals, classes + 1)).astype(np.float32),
                 proposal_boxes: absolute_boxes(rng, n, proposals, 32, 32),
                 num_proposals: np.array([proposals, proposals - 3] * n, np.int32)[:n],
                 true_image_shapes: np.array([[32, 32, 3], [28, 30, 3]] * n, np.int32)[:n]}
        names = ("detection_boxes", "detection_scores", "detection_classes", "num_detections", "detection_masks")
        if masks:
            feeds[mask_input] = rng.normal(size=(n * proposals, classes, 3, 3)).astype(np.float32)
        return feeds, [tf.identity(t, name=k) for k, t in zip(names, outs, strict=False)]

    return freeze(build)
