"""Stages of the OD API's Faster R-CNN and SSD meta-architectures, built with the OD API's own code.

A whole meta-architecture cannot be built here: ``model_builder`` needs the pipeline protos
compiled (the ``object-detection`` 0.0.3 package ships only the ``.proto`` files) and
``faster_rcnn_meta_arch`` imports ``tf.contrib.slim``, which no TensorFlow 2 has.  So each graph
below calls the OD API functions (``box_list_ops``, ``ops.native_crop_and_resize``,
``shape_utils``, ``preprocessor``) with the arguments and in the order the meta-architecture
calls them, under the name scopes it opens, and says which method it follows.  Feature maps come
from a tf_slim convolution with random weights (frozen); everything else is fed.

See ``detection_models.py`` for how the OD API is installed and imported.
"""
from __future__ import annotations

import functools
import types

import numpy as np

from tests.models.detection_models import DetectionModel, freeze, random_boxes


def _features(tf1, images, depth: int, seed: int):
    """A feature map from a tf_slim convolution with random weights (the feature extractor's stand-in)."""
    import tf_slim as slim

    init = tf1.random_normal_initializer(stddev=0.5, seed=seed)
    return slim.conv2d(images, depth, [3, 3], weights_initializer=init, scope="FeatureExtractor")


def absolute_boxes(rng, batch: int, count: int, height: int, width: int) -> np.ndarray:
    boxes = np.clip(random_boxes(rng, (batch, count)), 0.0, 1.0)
    return (boxes * np.array([height, width, height, width], np.float32)).astype(np.float32)


# ----------------------------------------------------------------- box coordinates
def normalize_proposals_graph(od: types.SimpleNamespace, *, batch: int | None = 2, proposals: int = 6,
                              seed: int = 0) -> DetectionModel:
    """The end of ``FasterRCNNMetaArch._postprocess_rpn``: each image's proposals [M, 4] in pixels
    normalized by its own true shape with ``box_list_ops.to_normalized_coordinates(...,
    check_range=False)`` through ``shape_utils.static_or_dynamic_map_fn`` (one
    ``ToNormalizedCoordinates`` scope per image for a known batch, one in a ``map/while`` loop for
    an unknown batch), inside ``FirstStagePostprocessor`` as ``postprocess`` opens it."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    n = batch or 2

    def build():
        boxes = tf1.placeholder(tf.float32, [batch, proposals, 4], name="proposal_boxes")
        shapes = tf1.placeholder(tf.int32, [batch, 3], name="true_image_shapes")

        def normalize_boxes(args):
            proposal_boxes_per_image, image_shape = args
            return od.box_list_ops.to_normalized_coordinates(
                od.box_list.BoxList(proposal_boxes_per_image), image_shape[0], image_shape[1],
                check_range=False).get()

        with tf1.name_scope("FirstStagePostprocessor"):
            normalized = od.shape_utils.static_or_dynamic_map_fn(
                normalize_boxes, elems=[boxes, shapes], dtype=tf.float32)
        feeds = {boxes: absolute_boxes(rng, n, proposals, 30, 40),
                 shapes: np.array([[30, 40, 3], [24, 36, 3]] * n, np.int32)[:n]}
        return feeds, [tf.identity(normalized, name="normalized_proposal_boxes")]

    return freeze(build)


def coordinate_variants_graph(od: types.SimpleNamespace, *, count: int = 8, seed: int = 0) -> DetectionModel:
    """Other calls of the two conversions:

    * ``Anchors/ToNormalizedCoordinates``: as ``MultiscaleGridAnchorGenerator._generate`` calls it,
      sizes given as Python ints (constants), ``check_range=False``;
    * ``Absolute/ToAbsoluteCoordinates``: ``to_absolute_coordinates(..., check_range=False)`` with
      float32 sizes (no casts);
    * ``Checked/ToAbsoluteCoordinates``: as ``eval_util._scale_box_to_absolute`` calls it, with the
      default range check (an assertion in a ``cond``): refused;
    * ``Checked/ToNormalizedCoordinates``: ``to_normalized_coordinates`` with its default
      ``check_range=True``: refused.
    """
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    blo = od.box_list_ops

    def build():
        pixels = tf1.placeholder(tf.float32, [count, 4], name="pixel_boxes")
        unit = tf1.placeholder(tf.float32, [count, 4], name="unit_boxes")
        size = tf1.placeholder(tf.float32, [2], name="image_size")
        image_shape = tf1.placeholder(tf.int32, [3], name="image_shape")
        with tf1.name_scope("Anchors"):
            anchors = blo.to_normalized_coordinates(od.box_list.BoxList(pixels), 30, 40, check_range=False).get()
        with tf1.name_scope("Absolute"):
            absolute = blo.to_absolute_coordinates(od.box_list.BoxList(unit), size[0], size[1],
                                                   check_range=False).get()
        with tf1.name_scope("Checked"):
            checked_abs = blo.to_absolute_coordinates(od.box_list.BoxList(unit), image_shape[0],
                                                      image_shape[1]).get()
            checked_norm = blo.to_normalized_coordinates(od.box_list.BoxList(pixels), image_shape[0],
                                                         image_shape[1]).get()
        feeds = {pixels: absolute_boxes(rng, 1, count, 30, 40)[0],
                 unit: np.clip(random_boxes(rng, (count,)), 0.0, 1.0),
                 size: np.array([30.0, 40.0], np.float32), image_shape: np.array([30, 40, 3], np.int32)}
        outs = {"anchors": anchors, "absolute": absolute, "checked_absolute": checked_abs,
                "checked_normalized": checked_norm}
        return feeds, [tf.identity(t, name=k) for k, t in outs.items()]

    return freeze(build)


def coordinate_lookalikes_graph(*, count: int = 8, seed: int = 0) -> DetectionModel:
    """Hand-written look-alikes in scopes of the OD API's names, not its conversions:

    * ``Divided/ToNormalizedCoordinates``: ``boxes / [h, w, h, w]`` by split, divide, concat
      (another rounding than the reciprocal's product);
    * ``Mixed/ToAbsoluteCoordinates``: y_min scaled by the width and y_max by the height (and x
      the other way round): the same op counts, no one size per axis.
    """
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        boxes = tf1.placeholder(tf.float32, [count, 4], name="boxes")
        shape = tf1.placeholder(tf.int32, [3], name="image_shape")
        h, w = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
        with tf1.name_scope("Divided"), tf1.name_scope("ToNormalizedCoordinates"), tf1.name_scope("Scale"):
            y0, x0, y1, x1 = tf.split(boxes, 4, axis=1)
            divided = tf.concat([y0 / h, x0 / w, y1 / h, x1 / w], 1)
        with tf1.name_scope("Mixed"), tf1.name_scope("ToAbsoluteCoordinates"), tf1.name_scope("Scale"):
            y0, x0, y1, x1 = tf.split(boxes, 4, axis=1)
            mixed = tf.concat([w * y0, h * x0, h * y1, w * x1], 1)
        feeds = {boxes: np.clip(random_boxes(rng, (count,)), 0.0, 1.0), shape: np.array([30, 40, 3], np.int32)}
        return feeds, [tf.identity(divided, name="divided"), tf.identity(mixed, name="mixed")]

    return freeze(build)


# --------------------------------------------------------------------------- ROI align
def second_stage_input_graph(od: types.SimpleNamespace, *, batch: int | None = 2, proposals: int = 5,
                             crop: int = 6, kernel: int = 2, stride: int = 2, depth: int = 4,
                             detection_features: bool = False, seed: int = 0) -> DetectionModel:
    """``FasterRCNNMetaArch._compute_second_stage_input_feature_maps``: ``native_crop_and_resize``
    (the ``crop_and_resize_fn`` of a non-TPU pipeline) of the normalized proposals out of the RPN
    feature map, ``_flatten_first_two_dimensions`` (``combined_static_and_dynamic_shape``) and
    ``slim.max_pool2d(kernel, stride)``, with no scope of its own (as ``_predict_second_stage``
    calls it).  ``batch=None``: an unknown batch.  ``detection_features``: also the crop of
    ``_add_detection_features_output_node`` (``SecondStageDetectionFeaturesExtract``), whose
    pooled crops are averaged with ``reduce_mean``."""
    import tensorflow as tf
    import tf_slim as slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    n = batch or 2

    def flatten_first_two_dimensions(inputs):
        combined_shape = od.shape_utils.combined_static_and_dynamic_shape(inputs)
        flattened_shape = tf.stack([combined_shape[0] * combined_shape[1]] + combined_shape[2:])
        return tf.reshape(inputs, flattened_shape)

    def second_stage_input(features, boxes):
        cropped = flatten_first_two_dimensions(od.ops.native_crop_and_resize(features, boxes, [crop, crop]))
        return slim.max_pool2d(cropped, [kernel, kernel], stride=stride)

    def build():
        images = tf1.placeholder(tf.float32, [batch, 12, 16, 3], name="images")
        boxes = tf1.placeholder(tf.float32, [batch, proposals, 4], name="proposal_boxes_normalized")
        features = _features(tf1, images, depth, seed)
        pooled = second_stage_input(features, boxes)
        outs = [tf.identity(pooled, name="flattened_proposal_feature_maps")]
        feeds = {images: rng.normal(size=(n, 12, 16, 3)).astype(np.float32),
                 boxes: np.clip(random_boxes(rng, (n, proposals)), -0.05, 1.05)}
        if detection_features:
            with tf1.name_scope("SecondStageDetectionFeaturesExtract"):
                unpooled = second_stage_input(features, boxes)
                outs.append(tf.identity(tf.reduce_mean(unpooled, axis=[1, 2]), name="detection_features"))
        return feeds, outs

    return _frozen_with_variables(build)


def crop_only_graph(od: types.SimpleNamespace, *, count: int = 4, seed: int = 0) -> DetectionModel:
    """``ops.native_crop_and_resize`` as ``FasterRCNNMetaArch._loss_box_classifier`` crops the
    groundtruth masks ([1, H, W, count] masks, the proposals as [count, 1, 4] boxes, crops squeezed
    on their last axis): a crop that no pooling follows."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        masks = tf1.placeholder(tf.float32, [1, 12, 12, count], name="groundtruth_masks")
        boxes = tf1.placeholder(tf.float32, [count, 1, 4], name="proposals")
        crops = od.ops.native_crop_and_resize(masks, boxes, [5, 5])
        feeds = {masks: rng.uniform(size=(1, 12, 12, count)).astype(np.float32),
                 boxes: np.clip(random_boxes(rng, (count, 1)), 0.0, 1.0)}
        return feeds, [tf.identity(tf.squeeze(crops, axis=1), name="mask_targets")]

    return freeze(build)


def roi_align_scope_graph(*, batch: int = 2, proposals: int = 4, resolution: int = 3,
                          seed: int = 0) -> DetectionModel:
    """An ROI align in one ``roi_align`` scope, written with TensorFlow ops (not the OD API): the
    boxes' per-image crop at twice the resolution (``tf.image.crop_and_resize`` with box indices
    built as ``native_crop_and_resize`` builds them) averaged over 2 x 2 windows (``avg_pool2d``),
    the form the reference's ROI align scopes have."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        features = tf1.placeholder(tf.float32, [batch, 10, 10, 3], name="features")
        boxes = tf1.placeholder(tf.float32, [batch, proposals, 4], name="boxes")
        with tf1.name_scope("roi_align"):
            indices = tf.reshape(tf.ones([batch, proposals], tf.int32) * tf.expand_dims(tf.range(batch), 1), [-1])
            crops = tf.image.crop_and_resize(features, tf.reshape(boxes, [-1, 4]), indices,
                                             [2 * resolution, 2 * resolution])
            pooled = tf.nn.avg_pool2d(crops, 2, 2, "VALID")
        feeds = {features: rng.normal(size=(batch, 10, 10, 3)).astype(np.float32),
                 boxes: np.clip(random_boxes(rng, (batch, proposals)), 0.0, 1.0)}
        return feeds, [tf.identity(pooled, name="roi_features")]

    return freeze(build)


def _frozen_with_variables(build) -> DetectionModel:
    """Build a TF1 graph with variables, initialize them (random weights) and freeze it."""
    import tensorflow as tf

    from tests.models.detection_models import tf1_graph_mode

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with tf1_graph_mode(True), graph.as_default():
        feeds, outputs = build()
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            graph_def = tf1.graph_util.convert_variables_to_constants(
                sess, graph.as_graph_def(), [t.op.name for t in outputs])
    return DetectionModel(graph_def, {k.name: v for k, v in feeds.items()}, [t.name for t in outputs])


# ------------------------------------------------------------------------ resizing
def preprocess_graph(od: types.SimpleNamespace, *, batch: int | None = 2, min_dimension: int = 12,
                     max_dimension: int | None = 20, pad_to_max_dimension: bool = False,
                     method: str = "bilinear", masks: bool = False, static_size: bool = False,
                     image_size: tuple[int, int] = (9, 15), seed: int = 0) -> DetectionModel:
    """``FasterRCNNMetaArch.preprocess`` (``SSDMetaArch.preprocess`` alike): in ``Preprocessor``,
    ``shape_utils.static_or_dynamic_map_fn(image_resizer_fn, elems=inputs, dtype=[tf.float32,
    tf.int32])`` with ``image_resizer_fn`` the ``functools.partial(preprocessor.resize_to_range,
    ...)`` that ``image_resizer_builder`` makes of a ``keep_aspect_ratio_resizer``; images of a
    size known only at run time (``static_size``: known), one ``ResizeToRange`` scope per image
    (``batch=None``: one in a ``map/while`` loop).  ``masks`` resizes instance masks in the same
    call (``resize_to_range(image, masks)`` as the data pipeline calls it)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    n = batch or 2
    methods = {"bilinear": tf1.image.ResizeMethod.BILINEAR, "nearest": tf1.image.ResizeMethod.NEAREST_NEIGHBOR}
    resizer = functools.partial(od.preprocessor.resize_to_range, min_dimension=min_dimension,
                                max_dimension=max_dimension, method=methods[method],
                                pad_to_max_dimension=pad_to_max_dimension)
    h, w = image_size

    def build():
        spatial = [h, w] if static_size else [None, None]
        inputs = tf1.placeholder(tf.float32, [batch, *spatial, 3], name="inputs")
        feeds = {inputs: rng.uniform(0.0, 255.0, size=(n, h, w, 3)).astype(np.float32)}
        with tf1.name_scope("Preprocessor"):
            if masks:
                mask_input = tf1.placeholder(tf.float32, [batch, 2, *spatial], name="masks")
                feeds[mask_input] = rng.uniform(size=(n, 2, h, w)).astype(np.float32)
                outputs = od.shape_utils.static_or_dynamic_map_fn(
                    lambda args: resizer(args[0], masks=args[1]), elems=[inputs, mask_input],
                    dtype=[tf.float32, tf.float32, tf.int32])
                resized, true_shapes = outputs[0], outputs[2]
                extra = [tf.identity(outputs[1], name="resized_masks")]
            else:
                extra = []
                resized, true_shapes = od.shape_utils.static_or_dynamic_map_fn(
                    resizer, elems=inputs, dtype=[tf.float32, tf.int32])
        return feeds, [tf.identity(resized, name="resized_inputs"), tf.identity(true_shapes, name="true_image_shapes"),
                       *extra]

    return freeze(build)
