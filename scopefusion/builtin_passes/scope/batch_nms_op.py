"""The ``BatchMultiClassNonMaxSuppression`` fused op: declaration and a
reference implementation built from the same TensorFlow kernels the Object
Detection API uses, so that fused graphs reproduce the original outputs."""
from __future__ import annotations

from typing import Any

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg

PADDED_NMS_FUNCTION = "non_max_suppression_padded"
#: what ``tf.image.non_max_suppression_padded`` passes its function after the thresholds:
#: sorted_input, canonicalized_coordinates, tile_size (the reference relies on these defaults)
PADDED_NMS_DEFAULTS = (False, False, 512)
REFERENCE_SCOPE = "batch_multiclass_nms_reference"


def _single_image_nms(boxes: Any, scores: Any, window: Any, *, score_threshold: float, iou_threshold: float,
                      max_size_per_class: int, max_total_size: int, change_coordinate_frame: bool,
                      use_static_shapes: bool) -> tuple:
    """Multi-class NMS of one image: boxes [N, q, 4], scores [N, C], window [4]."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    num_boxes = tf.shape(scores)[0]
    num_classes = tf.shape(scores)[1]
    q = tf.shape(boxes)[1]
    per_class_size = max_size_per_class if use_static_shapes else tf.minimum(max_size_per_class, num_boxes)
    ramp = tf.range(per_class_size)

    def one_class(c: Any) -> tuple:
        class_boxes = tf.gather(boxes, tf.minimum(c, q - 1), axis=1)  # q == 1: shared boxes
        class_scores = tf.gather(scores, c, axis=1)
        if use_static_shapes:  # selections padded to max_size_per_class by the NMS itself
            selected, found = tf.image.non_max_suppression_padded(
                class_boxes, class_scores, per_class_size, iou_threshold=iou_threshold,
                score_threshold=score_threshold, pad_to_max_output_size=True)
        else:
            selected = tf.image.non_max_suppression(class_boxes, class_scores, per_class_size,
                                                    iou_threshold=iou_threshold, score_threshold=score_threshold)
            found = tf.shape(selected)[0]
            selected = tf.concat([selected, tf.zeros([per_class_size - found], tf.int32)], 0)
        picked_scores = tf.where(ramp < found, tf.gather(class_scores, selected), -tf.ones([per_class_size]))
        return tf.gather(class_boxes, selected), picked_scores, found

    sel_boxes, sel_scores, found = tf.map_fn(
        one_class, tf.range(num_classes), fn_output_signature=(tf.float32, tf.float32, tf.int32))
    # class by class, per_class_size entries each (the padded ones score -1)
    fields = [tf.reshape(sel_boxes, [-1, 4]), tf.reshape(sel_scores, [-1]),
              tf.cast(tf.repeat(tf.range(num_classes), per_class_size), tf.float32)]
    num_valid = tf.reduce_sum(found)

    def sort_by_score(fields: list) -> list:
        _, order = tf.math.top_k(fields[1], tf.size(fields[1]), sorted=True)
        return [tf.gather(f, order) for f in fields]

    def area(b: Any) -> Any:
        return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])

    fields = sort_by_score(fields)
    lo = tf.stack([window[0], window[1], window[0], window[1]])
    hi = tf.stack([window[2], window[3], window[2], window[3]])
    fields[0] = tf.maximum(tf.minimum(fields[0], hi), lo)
    if not use_static_shapes:  # drop the boxes left with no area
        keep = tf.cast(tf.reshape(tf.where(area(fields[0]) > 0.0), [-1]), tf.int32)
        fields = [tf.gather(f, keep) for f in fields]
    fields[1] = tf.where(tf.cast(area(fields[0]), tf.bool), fields[1], -tf.ones_like(fields[1]))
    num_valid = tf.reduce_sum(tf.cast(fields[1] >= 0.0, tf.int32))
    fields = sort_by_score(fields)
    if change_coordinate_frame:
        y_scale = 1.0 / (window[2] - window[0])
        x_scale = 1.0 / (window[3] - window[1])
        moved = fields[0] - tf.stack([window[0], window[1], window[0], window[1]])
        fields[0] = moved * tf.stack([y_scale, x_scale, y_scale, x_scale])
    if max_total_size:
        total = tf.minimum(max_total_size, tf.shape(fields[0])[0])
        fields = [tf.gather(f, tf.range(total)) for f in fields]
        num_valid = tf.where(total > num_valid, num_valid, total)
    if use_static_shapes:  # min(max_total_size, C * max_size_per_class) entries, invalid ones scored -1
        return fields[0], fields[1], fields[2], num_valid
    fields = [tf.gather(f, tf.range(num_valid)) for f in fields]
    # pad with zeros (or cut) to max_total_size
    fields = [f[:max_total_size] for f in fields]
    short = max_total_size - tf.shape(fields[1])[0]
    fields[0] = tf.pad(fields[0], [[0, short], [0, 0]])
    fields[1] = tf.pad(fields[1], [[0, short]])
    fields[2] = tf.pad(fields[2], [[0, short]])
    return fields[0], fields[1], fields[2], num_valid


def batch_multiclass_nms_reference(
    boxes: Any, scores: Any, clip_window: Any, *, score_threshold: float, iou_threshold: float,
    max_size_per_class: int, max_total_size: int, change_coordinate_frame: bool, use_static_shapes: bool = False,
    num_valid_boxes: Any = None,
) -> tuple:
    """Per image of the batch: class-wise NMS, merge sorted by score, clip to the window (dropping
    boxes of no area), keep the best ``max_total_size`` and pad with zeros to that size.

    With ``use_static_shapes`` the per-class NMS is padded to ``max_size_per_class``, no box is
    dropped (zero-area boxes score -1), and each image keeps ``min(max_total_size, C *
    max_size_per_class)`` entries (all of them when ``max_total_size`` is 0).

    ``num_valid_boxes`` [B] (a keyword for the stage ops that pass it; not an input of this op): only
    each image's first ones count, sliced off (or, with ``use_static_shapes``, scored float32 min)."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    # Its own name scope: when TensorFlow inlines the function, its nodes are named
    # "<fused node>/<node>", which must not collide with nodes kept under the fused scope.
    with tf.name_scope(REFERENCE_SCOPE):
        clip_window = tf.broadcast_to(clip_window, tf.stack([tf.shape(boxes)[0], 4]))  # [4] is shared

        if num_valid_boxes is None:
            num_valid_boxes = tf.fill(tf.shape(boxes)[:1], tf.shape(boxes)[1])

        def one_image(args: tuple) -> tuple:
            image_boxes, image_scores, window, valid = args
            if use_static_shapes:
                rows = tf.range(tf.shape(image_scores)[0]) < valid
                image_scores = tf.where(rows[:, tf.newaxis], image_scores, tf.float32.min)
            else:
                image_boxes, image_scores = image_boxes[:valid], image_scores[:valid]
            return _single_image_nms(
                image_boxes, image_scores, window, score_threshold=score_threshold, iou_threshold=iou_threshold,
                max_size_per_class=max_size_per_class, max_total_size=max_total_size,
                change_coordinate_frame=change_coordinate_frame, use_static_shapes=use_static_shapes)

        return tuple(tf.map_fn(one_image, (boxes, scores, clip_window, num_valid_boxes),
                               fn_output_signature=(tf.float32, tf.float32, tf.float32, tf.int32)))


BATCH_MULTICLASS_NMS = FusedOpDef(
    name="BatchMultiClassNonMaxSuppression",
    inputs=(
        TensorArg("boxes", dtype="float32", description="[B, N, q, 4]; q is 1 (shared) or C"),
        TensorArg("scores", dtype="float32", description="[B, N, C]"),
        TensorArg("clip_window", dtype="float32",
                  description="[B, 4] per image or [4] for all: ymin, xmin, ymax, xmax"),
    ),
    outputs=(
        TensorArg("nmsed_boxes", dtype="float32", description="[B, K, 4]; K is max_total_size (see use_static_shapes)"),
        TensorArg("nmsed_scores", dtype="float32", description="[B, K]"),
        TensorArg("nmsed_classes", dtype="float32", description="[B, K], class index"),
        TensorArg("num_detections", dtype="int32", description="[B] valid entries per image"),
    ),
    attrs=(
        AttrDef("score_threshold", "float"),
        AttrDef("iou_threshold", "float"),
        AttrDef("max_size_per_class", "int"),
        AttrDef("max_total_size", "int"),
        AttrDef("change_coordinate_frame", "bool", default=False,
                description="boxes relative to the clip window after clipping"),
        AttrDef("use_static_shapes", "bool", default=False,
                description="padded per-class NMS, no box dropped, K = min(max_total_size, C * max_size_per_class)"),
    ),
    reference=batch_multiclass_nms_reference,
    description="OD API batched multi-class NMS with clipping, padded to max_total_size",
)
