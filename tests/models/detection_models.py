"""Detection post-processing graphs built with the real TensorFlow Object Detection API.

The OD API is the ``object-detection`` distribution on PyPI (0.0.3, the only release: a packaging
of ``tensorflow/models/research/object_detection`` from 2018-2019).  Its declared dependencies
(jupyter, matplotlib, Cython, ...) are irrelevant to box coding, so it is installed with
``pip install --no-deps --target DIR`` at test time (:func:`install_object_detection`), never into
the environment.

It was written for TensorFlow 1, so two small shims make it import and build graphs under
TensorFlow 2 in ``tf.compat.v1`` graph mode (:func:`import_object_detection`, :func:`tf1_graph_mode`):

* while its modules are imported, ``sys.modules["tensorflow"]`` is ``tf.compat.v1``, so its
  ``import tensorflow as tf`` binds the TF1 API (``tf.log``, ``tf.name_scope(name, default)``, ...);
* while a graph is built, TF1 tensor shapes are on (``shape[1].value``) and, for the dynamic-batch
  graphs, TF1 control flow (``tf.map_fn`` becomes a ``while`` loop of Enter/Merge/Switch/Exit nodes,
  as in every frozen TF1 detection model); both switches are restored afterwards.

Nothing in the OD API code itself is changed: the graphs come from the real ``FasterRcnnBoxCoder``,
``box_list_ops.clip_to_window`` and ``post_processing.batch_multiclass_non_max_suppression`` (and, as
look-alikes that must not be fused, the OD API's ``SquareBoxCoder`` and ``KeypointBoxCoder``, whose
``decode`` opens a ``Decode`` scope too).  A few hand-written look-alikes below are marked as such.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

OD_API_REQUIREMENT = "object-detection==0.0.3"
OD_MODULES = (
    "object_detection.core.box_list",
    "object_detection.core.box_list_ops",
    "object_detection.core.post_processing",
    "object_detection.box_coders.faster_rcnn_box_coder",
    "object_detection.box_coders.keypoint_box_coder",
    "object_detection.box_coders.square_box_coder",
    "object_detection.core.preprocessor",
    "object_detection.utils.ops",
    "object_detection.utils.shape_utils",
)


@dataclass
class DetectionModel:
    graph_def: object
    feeds: dict[str, np.ndarray]  # placeholder tensor name -> value
    outputs: list[str]  # tensor names
    info: dict = field(default_factory=dict)


# ------------------------------------------------------------------ install and import
def install_object_detection(target: Path) -> Path:
    """``pip install --no-deps`` the OD API into ``target``; returns ``target``."""
    env = dict(os.environ, PIP_ROOT_USER_ACTION="ignore", PIP_NO_INPUT="1")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-cache-dir",
           "--disable-pip-version-check", "--target", str(target), OD_API_REQUIREMENT]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"pip install {OD_API_REQUIREMENT} failed:\n{proc.stdout}\n{proc.stderr}")
    if not (target / "object_detection" / "core" / "post_processing.py").is_file():
        raise RuntimeError(f"{OD_API_REQUIREMENT} installed no object_detection package into {target}")
    return target


def import_object_detection(site: Path) -> types.SimpleNamespace:
    """Import the OD API modules from ``site`` with ``tensorflow`` meaning ``tf.compat.v1``."""
    import tensorflow as tf

    if str(site) not in sys.path:
        sys.path.insert(0, str(site))
    real = sys.modules["tensorflow"]
    sys.modules["tensorflow"] = tf.compat.v1
    try:
        import importlib

        mods = {name.rpartition(".")[2]: importlib.import_module(name) for name in OD_MODULES}
    finally:
        sys.modules["tensorflow"] = real
    return types.SimpleNamespace(**mods)


@contextlib.contextmanager
def tf1_graph_mode(control_flow_v1: bool = True) -> Iterator[None]:
    """TF1 tensor shapes (and TF1 control flow) while a graph is built; restored afterwards."""
    from tensorflow.python.framework import tensor_shape
    from tensorflow.python.ops import control_flow_util

    shape_override = tensor_shape._TENSORSHAPE_V2_OVERRIDE  # noqa: SLF001
    cf_v2 = control_flow_util.ENABLE_CONTROL_FLOW_V2
    tensor_shape._TENSORSHAPE_V2_OVERRIDE = False  # noqa: SLF001
    if control_flow_v1:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
    try:
        yield
    finally:
        tensor_shape._TENSORSHAPE_V2_OVERRIDE = shape_override  # noqa: SLF001
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = cf_v2


def freeze(build: Callable[[], tuple[dict, list]], *, control_flow_v1: bool = True,
           info: dict | None = None) -> DetectionModel:
    """Build a TF1 graph with ``build() -> ({placeholder: value}, [output tensors])``, freeze it to
    the outputs, and return it with its feeds."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with tf1_graph_mode(control_flow_v1), graph.as_default():
        feeds, outputs = build()
        graph_def = tf1.graph_util.extract_sub_graph(graph.as_graph_def(), [t.op.name for t in outputs])
    return DetectionModel(graph_def, {k.name: v for k, v in feeds.items()}, [t.name for t in outputs],
                          dict(info or {}))


# ------------------------------------------------------------------------- inputs
def random_anchors(rng: np.random.Generator, n: int) -> np.ndarray:
    """[n, 4] anchors as [ymin, xmin, ymax, xmax] with positive sizes."""
    centre = rng.uniform(0.0, 1.0, size=(n, 2))
    size = rng.uniform(0.05, 0.5, size=(n, 2))
    return np.concatenate([centre - size / 2, centre + size / 2], axis=1).astype(np.float32)


def random_boxes(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Boxes [..., 4] in [ymin, xmin, ymax, xmax] order, many of them overlapping, some sticking
    out of the unit square."""
    centre = rng.uniform(-0.1, 1.1, size=shape + (2,))
    size = rng.uniform(0.05, 0.6, size=shape + (2,))
    return np.concatenate([centre - size / 2, centre + size / 2], axis=-1).astype(np.float32)


def random_scores(rng: np.random.Generator, shape: tuple[int, ...], ties: bool = True) -> np.ndarray:
    """Scores in [0, 1); with ``ties`` rounded to 2 decimals so that equal scores occur."""
    s = rng.uniform(0.0, 1.0, size=shape)
    if ties:
        s = np.round(s, 2)
    return s.astype(np.float32)


# ------------------------------------------------------------------------- graphs
def decode_graph(od: types.SimpleNamespace, *, n: int = 64, seed: int = 0) -> DetectionModel:
    """Two real ``FasterRcnnBoxCoder.decode`` calls: scales [10, 10, 5, 5] against constant anchors
    (``FirstStage/Decode``) and no scale factors against fed anchors (``SecondStage/Decode``)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    anchors = random_anchors(rng, n)

    def build():
        codes = tf1.placeholder(tf.float32, [n, 4], name="rel_codes")
        fed_anchors = tf1.placeholder(tf.float32, [n, 4], name="anchors")
        with tf1.name_scope("FirstStage"):
            coder = od.faster_rcnn_box_coder.FasterRcnnBoxCoder(scale_factors=[10.0, 10.0, 5.0, 5.0])
            first = coder.decode(codes, od.box_list.BoxList(tf.constant(anchors, name="anchors"))).get()
        with tf1.name_scope("SecondStage"):
            coder = od.faster_rcnn_box_coder.FasterRcnnBoxCoder()
            second = coder.decode(codes * 0.5, od.box_list.BoxList(fed_anchors)).get()
        feeds = {codes: rng.normal(0.0, 1.0, size=(n, 4)).astype(np.float32),
                 fed_anchors: random_anchors(rng, n)}
        return feeds, [tf.identity(first, name="first_boxes"), tf.identity(second, name="second_boxes")]

    return freeze(build)


def clip_graph(od: types.SimpleNamespace, *, n: int = 48, seed: int = 0) -> DetectionModel:
    """Real ``box_list_ops.clip_to_window`` calls on decoded proposals:

    * ``Proposals/ClipToWindow``: window fed at run time, ``filter_nonoverlapping=False``;
    * ``Proposals/ClipToWindow_1``: the unit window written as a Python list (a ``Const`` inside
      the scope), filtering boxes left with no area;
    * ``Scored/ClipToWindow``: a box list with a ``scores`` field, filtering (so the scores are
      gathered too: not representable by ``ClipBoxes``).
    """
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        boxes = tf1.placeholder(tf.float32, [n, 4], name="boxes")
        window = tf1.placeholder(tf.float32, [4], name="window")
        with tf1.name_scope("Proposals"):
            proposals = od.box_list.BoxList(boxes * 1.5 - 0.25)
            fed = od.box_list_ops.clip_to_window(proposals, window, filter_nonoverlapping=False).get()
            unit = od.box_list_ops.clip_to_window(proposals, [0.0, 0.0, 1.0, 1.0]).get()
        with tf1.name_scope("Scored"):
            scored = od.box_list.BoxList(boxes)
            scored.add_field("scores", tf.reduce_sum(boxes, axis=1))
            kept = od.box_list_ops.clip_to_window(scored, window)
        feeds = {boxes: random_boxes(rng, (n,)), window: np.array([0.1, 0.05, 0.9, 0.8], np.float32)}
        return feeds, [tf.identity(fed, name="clipped"), tf.identity(unit, name="clipped_unit"),
                       tf.identity(kept.get(), name="kept_boxes"),
                       tf.identity(kept.get_field("scores"), name="kept_scores")]

    return freeze(build)


def nms_graph(od: types.SimpleNamespace, *, batch: int = 2, static_batch: bool = True, anchors: int = 24,
              classes: int = 3, q: int = 1, clip_window: str | None = None, score_thresh: float = 0.3,
              iou_thresh: float = 0.5, max_size_per_class: int = 5, max_total_size: int = 8,
              change_coordinate_frame: bool = False, outputs: Sequence[str] = ("boxes", "scores", "classes", "num"),
              num_valid_boxes: bool = False, masks: bool = False, use_static_shapes: bool = False,
              control_flow_v1: bool = True, seed: int = 0) -> DetectionModel:
    """A real ``post_processing.batch_multiclass_non_max_suppression`` over fed boxes
    [batch, anchors, q, 4] and scores [batch, anchors, classes].

    ``static_batch=False`` leaves the batch dimension unknown (``tf.map_fn``: a TF1 while loop).
    ``clip_window``: ``None`` (derived from the boxes inside the scope), ``"shared"`` (one fed [4]
    window) or ``"per_image"`` (fed [batch, 4]).  ``num_valid_boxes``, ``masks`` and
    ``use_static_shapes`` pass those options too (``masks`` adds the ``masks`` output).
    ``control_flow_v1=False`` builds a dynamic batch's loop with TF2 control flow (a ``While`` op).
    """
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        b = None if not static_batch else batch
        boxes = tf1.placeholder(tf.float32, [b, anchors, q, 4], name="boxes")
        scores = tf1.placeholder(tf.float32, [b, anchors, classes], name="scores")
        feeds = {boxes: random_boxes(rng, (batch, anchors, q)), scores: random_scores(rng, (batch, anchors, classes))}
        window = None
        if clip_window == "shared":
            window = tf1.placeholder(tf.float32, [4], name="clip_window")
            feeds[window] = np.array([0.0, 0.05, 0.95, 1.0], np.float32)
        elif clip_window == "per_image":
            window = tf1.placeholder(tf.float32, [b, 4], name="clip_window")
            feeds[window] = np.tile(np.array([[0.05, 0.0, 1.0, 0.9]], np.float32), (batch, 1))
            feeds[window][0] = [0.0, 0.0, 1.0, 1.0]
        options = {}
        if num_valid_boxes:
            options["num_valid_boxes"] = tf1.placeholder(tf.int32, [b], name="num_valid_boxes")
            feeds[options["num_valid_boxes"]] = np.full([batch], anchors - 2, np.int32)
        if masks:
            options["masks"] = tf1.placeholder(tf.float32, [b, anchors, q, 3, 3], name="masks")
            feeds[options["masks"]] = rng.uniform(size=(batch, anchors, q, 3, 3)).astype(np.float32)
        nmsed = od.post_processing.batch_multiclass_non_max_suppression(
            boxes, scores, score_thresh, iou_thresh, max_size_per_class, max_total_size,
            clip_window=window, change_coordinate_frame=change_coordinate_frame,
            use_static_shapes=use_static_shapes, **options)
        named = {"boxes": nmsed[0], "scores": nmsed[1], "classes": nmsed[2], "masks": nmsed[3], "num": nmsed[5]}
        return feeds, [tf.identity(named[k], name=f"detection_{k}") for k in outputs]

    return freeze(build, control_flow_v1=control_flow_v1,
                  info={"batch": batch, "classes": classes, "max_total_size": max_total_size})


def ssd_postprocess_graph(od: types.SimpleNamespace, *, batch: int | None = 2, anchors: int = 32,
                          classes: int = 3, seed: int = 0) -> DetectionModel:
    """An SSD-style post-processor as the OD API's ``SSDMetaArch.postprocess`` wires it: box
    encodings [batch, anchors, 4] decoded against tiled constant anchors (``Postprocessor/Decode``),
    sigmoid class scores without the background column, and batched NMS clipped to a per-image
    window (``Postprocessor/BatchMultiClassNonMaxSuppression``).  ``batch=None`` leaves the batch
    size unknown (the NMS becomes a while loop)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    anchor_values = random_anchors(rng, anchors)
    n = batch or 2

    def build():
        encodings = tf1.placeholder(tf.float32, [batch, anchors, 4], name="box_encodings")
        logits = tf1.placeholder(tf.float32, [batch, anchors, classes + 1], name="class_predictions")
        window = tf1.placeholder(tf.float32, [batch, 4], name="image_window")
        with tf1.name_scope("Postprocessor"):
            size = tf.shape(encodings)[0]
            tiled = tf.tile(tf.expand_dims(tf.constant(anchor_values), 0), tf.stack([size, 1, 1]))
            coder = od.faster_rcnn_box_coder.FasterRcnnBoxCoder(scale_factors=[10.0, 10.0, 5.0, 5.0])
            decoded = coder.decode(tf.reshape(encodings, [-1, 4]),
                                   od.box_list.BoxList(tf.reshape(tiled, [-1, 4]))).get()
            boxes = tf.expand_dims(tf.reshape(decoded, tf.stack([size, anchors, 4])), 2)
            if batch is not None:
                boxes.set_shape([batch, anchors, 1, 4])
            scores = tf.slice(tf.sigmoid(logits), [0, 0, 1], [-1, -1, -1])
            nmsed = od.post_processing.batch_multiclass_non_max_suppression(
                boxes, scores, 0.2, 0.6, 6, 10, clip_window=window)
        feeds = {encodings: rng.normal(0.0, 0.5, size=(n, anchors, 4)).astype(np.float32),
                 logits: rng.normal(0.0, 2.0, size=(n, anchors, classes + 1)).astype(np.float32),
                 window: np.tile(np.array([[0.0, 0.0, 1.0, 1.0]], np.float32), (n, 1))}
        names = ("boxes", "scores", "classes")
        outs = [tf.identity(t, name=f"detection_{k}") for k, t in zip(names, nmsed[:3], strict=True)]
        return feeds, outs + [tf.identity(nmsed[5], name="num_detections")]

    return freeze(build)


def proposal_graph(od: types.SimpleNamespace, *, n: int = 40, seed: int = 0) -> DetectionModel:
    """Faster R-CNN style proposals: decode against constant anchors, then clip to the image
    window computed at run time from the image's shape (``filter_nonoverlapping=False``)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    anchor_values = random_anchors(rng, n) * 32.0

    def build():
        image = tf1.placeholder(tf.float32, [None, None, 3], name="image")
        codes = tf1.placeholder(tf.float32, [n, 4], name="rpn_box_encodings")
        with tf1.name_scope("FirstStagePostprocessor"):
            coder = od.faster_rcnn_box_coder.FasterRcnnBoxCoder(scale_factors=[10.0, 10.0, 5.0, 5.0])
            proposals = coder.decode(codes, od.box_list.BoxList(tf.constant(anchor_values)))
            shape = tf.cast(tf.shape(image), tf.float32)
            window = tf.stack([0.0, 0.0, shape[0], shape[1]])
            clipped = od.box_list_ops.clip_to_window(proposals, window, filter_nonoverlapping=False)
        feeds = {image: np.zeros((24, 20, 3), np.float32),
                 codes: rng.normal(0.0, 1.0, size=(n, 4)).astype(np.float32)}
        return feeds, [tf.identity(clipped.get(), name="proposal_boxes")]

    return freeze(build)


def decode_lookalikes_graph(od: types.SimpleNamespace, *, n: int = 16, seed: int = 0) -> DetectionModel:
    """``Decode`` scopes that are not the Faster R-CNN decode, and that decode under another name:

    * ``Square/Decode``: the OD API's ``SquareBoxCoder.decode`` (one Exp, square boxes);
    * ``Keypoint/Decode``: the OD API's ``KeypointBoxCoder.decode`` (boxes and keypoints);
    * ``Swapped/Decode``: hand-written look-alike, the Faster R-CNN decode but with the width
      scaled by the anchor *height* (same op counts, different wiring);
    * ``BoxDecoder``: hand-written, the exact Faster R-CNN decode math in a scope of another name.
    """
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def centers(anchors):
        ymin, xmin, ymax, xmax = tf.unstack(tf.transpose(anchors))
        ha, wa = ymax - ymin, xmax - xmin
        return ymin + ha / 2.0, xmin + wa / 2.0, ha, wa

    def decode_by_hand(codes, anchors, swap):
        with tf1.name_scope("get_center_coordinates_and_sizes"):
            yca, xca, ha, wa = centers(anchors)
        ty, tx, th, tw = tf.unstack(tf.transpose(codes))
        w = tf.exp(tw) * (ha if swap else wa)
        h = tf.exp(th) * ha
        yc, xc = ty * ha + yca, tx * wa + xca
        return tf.transpose(tf.stack([yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0]))

    def build():
        codes = tf1.placeholder(tf.float32, [n, 4], name="rel_codes")
        kp_codes = tf1.placeholder(tf.float32, [n, 8], name="keypoint_codes")
        anchors = tf.constant(random_anchors(rng, n), name="anchors")
        with tf1.name_scope("Square"):
            square = od.square_box_coder.SquareBoxCoder().decode(codes[:, :3], od.box_list.BoxList(anchors)).get()
        with tf1.name_scope("Keypoint"):
            keypoint = od.keypoint_box_coder.KeypointBoxCoder(num_keypoints=2).decode(
                kp_codes, od.box_list.BoxList(anchors))
        with tf1.name_scope("Swapped"), tf1.name_scope("Decode"):
            swapped = decode_by_hand(codes, anchors, swap=True)
        with tf1.name_scope("BoxDecoder"):
            renamed = decode_by_hand(codes, anchors, swap=False)
        feeds = {codes: rng.normal(0.0, 1.0, size=(n, 4)).astype(np.float32),
                 kp_codes: rng.normal(0.0, 1.0, size=(n, 8)).astype(np.float32)}
        outs = [square, keypoint.get(), keypoint.get_field("keypoints"), swapped, renamed]
        names = ("square", "keypoint_boxes", "keypoints", "swapped", "renamed")
        return feeds, [tf.identity(t, name=k) for k, t in zip(names, outs, strict=True)]

    return freeze(build)


def clip_lookalikes_graph(*, n: int = 16, seed: int = 0) -> DetectionModel:
    """Hand-written ``ClipToWindow`` look-alikes, not the OD API's clip:

    * ``ByValue/ClipToWindow``: ``tf.clip_by_value`` to [0, 1] (different ops altogether);
    * ``Crossed/ClipToWindow``: clip_to_window's ops, but y clipped to the window's x range.
    """
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        boxes = tf1.placeholder(tf.float32, [n, 4], name="boxes")
        window = tf1.placeholder(tf.float32, [4], name="window")
        with tf1.name_scope("ByValue"), tf1.name_scope("ClipToWindow"):
            by_value = tf.clip_by_value(boxes, 0.0, 1.0)
        with tf1.name_scope("Crossed"), tf1.name_scope("ClipToWindow"):
            y_min, x_min, y_max, x_max = tf.split(boxes, 4, axis=1)
            wy0, wx0, wy1, wx1 = tf.unstack(window)
            crossed = tf.concat([tf.maximum(tf.minimum(y_min, wx1), wx0), tf.maximum(tf.minimum(x_min, wy1), wy0),
                                 tf.maximum(tf.minimum(y_max, wx1), wx0), tf.maximum(tf.minimum(x_max, wy1), wy0)], 1)
        feeds = {boxes: random_boxes(rng, (n,)), window: np.array([0.1, 0.0, 0.9, 0.7], np.float32)}
        return feeds, [tf.identity(by_value, name="by_value"), tf.identity(crossed, name="crossed")]

    return freeze(build)


def single_image_nms_graph(od: types.SimpleNamespace, *, anchors: int = 16, classes: int = 2,
                           seed: int = 0) -> DetectionModel:
    """The OD API's single-image ``multiclass_non_max_suppression`` (scope
    ``MultiClassNonMaxSuppression``): not the batched op."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        boxes = tf1.placeholder(tf.float32, [anchors, 1, 4], name="boxes")
        scores = tf1.placeholder(tf.float32, [anchors, classes], name="scores")
        nmsed, num = od.post_processing.multiclass_non_max_suppression(boxes, scores, 0.3, 0.5, 4, 6)
        feeds = {boxes: random_boxes(rng, (anchors, 1)), scores: random_scores(rng, (anchors, classes))}
        return feeds, [tf.identity(nmsed.get(), name="nmsed_boxes"), tf.identity(num, name="num")]

    return freeze(build)
