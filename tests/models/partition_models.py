"""Real graphs for the mixed-computation tests, built by TensorFlow, tf_slim and the OD API at
small size with random weights, frozen.

* :func:`detection_pipeline`: a detector as it is served: JPEG bytes decoded and resized
  (``tf.io.decode_jpeg``; a colour transform written as ``matmul + bias``), a tf_slim
  convolutional body with fully connected box and class heads, and the OD API's post-processing
  (``FasterRcnnBoxCoder.decode`` and ``batch_multiclass_non_max_suppression``);
* :func:`text_features_model`: TF1 string pre-processing (``tf.strings.split``,
  ``tf.strings.strip``, ``tf.strings.to_number``) feeding tf_slim dense layers with GELU;
* :func:`loop_model`: two ``tf.compat.v1.while_loop``s (TF1 control flow), one whose body
  formats its state as text and parses it back (``tf.strings.as_string`` /
  ``tf.strings.to_number``), with dense + GELU layers around and inside them.
"""
from __future__ import annotations

import types
from typing import Callable

import numpy as np
from tests.helpers.freeze import freeze_graph
from tests.models.detection_models import tf1_graph_mode
from tests.models.model_builders import FrozenModel


def freeze(build: Callable[[], tuple[dict, list]], seed: int = 0, control_flow_v1: bool = True) -> FrozenModel:
    """Build a TF1 graph with ``build() -> ({placeholder: value}, [outputs])``, initialise its
    variables and freeze it to the outputs."""
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    with tf1_graph_mode(control_flow_v1):
        return FrozenModel(*freeze_graph(build, seed))


def jpeg_bytes(height: int, width: int, seed: int) -> bytes:
    """A real JPEG: a smooth random picture encoded by ``tf.io.encode_jpeg``."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    yy, xx = np.meshgrid(np.linspace(0, 1, height), np.linspace(0, 1, width), indexing="ij")
    picture = np.stack([yy, xx, rng.uniform() * yy * xx], axis=-1) * 255.0
    picture = np.clip(picture + rng.normal(0, 8, picture.shape), 0, 255).astype(np.uint8)
    return bytes(tf.io.encode_jpeg(picture).numpy())


def detection_pipeline(od: types.SimpleNamespace, *, size: int = 16, anchors: int = 12, classes: int = 3,
                       seed: int = 0) -> FrozenModel:
    """JPEG bytes in, ``detection_boxes/scores/classes`` and ``num_detections`` out (batch 1).

    Scopes: ``Preprocessor`` (decode, resize, colour transform, scaling to [-1, 1]),
    ``FeatureExtractor`` (two tf_slim convolutions), ``BoxPredictor`` (tf_slim fully connected
    heads), ``Postprocessor`` (decode against constant anchors, sigmoid scores, batched NMS)."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    anchor_values = rng.uniform(0.05, 0.5, size=(anchors, 2))
    centres = rng.uniform(0.2, 0.8, size=(anchors, 2))
    anchor_values = np.concatenate([centres - anchor_values / 2, centres + anchor_values / 2], 1).astype(np.float32)
    colour = np.array([[0.9, 0.05, 0.05], [0.1, 0.8, 0.1], [0.0, 0.1, 0.9]], np.float32)
    encoded = jpeg_bytes(24, 20, seed)

    def build():
        image_bytes = tf1.placeholder(tf.string, [], name="image_bytes")
        with tf1.name_scope("Preprocessor"):
            image = tf.io.decode_jpeg(image_bytes, channels=3)
            resized = tf1.image.resize_bilinear(tf.expand_dims(tf.cast(image, tf.float32), 0), [size, size])
            pixels = tf.reshape(resized, [-1, 3])
            pixels = tf.matmul(pixels, tf.constant(colour)) + tf.constant([2.0, -1.0, 0.5])
            inputs = tf.reshape(pixels, [1, size, size, 3]) / 127.5 - 1.0
        with tf1.variable_scope("FeatureExtractor"):
            net = tf_slim.conv2d(inputs, 8, [3, 3], scope="Conv")
            net = tf_slim.conv2d(net, 8, [3, 3], stride=2, scope="Conv_1")
            features = tf_slim.flatten(net)
        with tf1.variable_scope("BoxPredictor"):
            boxes = tf_slim.fully_connected(features, anchors * 4, activation_fn=None, scope="BoxEncoding")
            logits = tf_slim.fully_connected(features, anchors * (classes + 1), activation_fn=None, scope="Class")
        with tf1.name_scope("Postprocessor"):
            tiled = tf.constant(anchor_values, name="anchors")
            coder = od.faster_rcnn_box_coder.FasterRcnnBoxCoder(scale_factors=[10.0, 10.0, 5.0, 5.0])
            decoded = coder.decode(tf.reshape(boxes, [-1, 4]) * 0.1, od.box_list.BoxList(tiled)).get()
            detection_boxes = tf.reshape(decoded, [1, anchors, 1, 4])
            scores = tf.slice(tf.sigmoid(tf.reshape(logits, [1, anchors, classes + 1])), [0, 0, 1], [-1, -1, -1])
            nmsed = od.post_processing.batch_multiclass_non_max_suppression(detection_boxes, scores, 0.1, 0.6, 4, 6)
        outs = [tf.identity(t, name=f"detection_{k}")
                for k, t in zip(("boxes", "scores", "classes"), nmsed[:3], strict=True)]
        return {image_bytes: np.array(encoded, dtype=object)}, outs + [
            tf.identity(nmsed[5], name="num_detections")]

    return freeze(build, seed)


def text_features_model(*, width: int = 4, hidden: int = 16, seed: int = 0) -> FrozenModel:
    """Comma-separated numbers in (``text``, one string per example), parsed on the host, then
    two tf_slim dense layers with GELU and a linear output."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def build():
        text = tf1.placeholder(tf.string, [None], name="text")
        with tf1.name_scope("parse"):
            fields = tf.strings.split(tf.strings.strip(text), ",")
            tokens = tf.identity(fields.to_tensor(default_value="0", shape=[None, width]), name="tokens")
            values = tf.strings.to_number(tokens, tf.float32)
            count = tf.cast(tf.size(tokens), tf.float32, name="count")
        with tf1.variable_scope("mlp"):
            x = values * tf.math.rsqrt(count)
            x = tf_slim.fully_connected(x, hidden, activation_fn=tf.nn.gelu, scope="dense_0")
            x = tf_slim.fully_connected(x, hidden, activation_fn=tf.nn.gelu, scope="dense_1")
            y = tf_slim.fully_connected(x, 2, activation_fn=None, scope="logits")
        feeds = {text: np.array([b" 0.5,1.25,-2,3", b"4,-0.5,0.25,1 ", b"1,2,3,4"], dtype=object)}
        return feeds, [tf.identity(y, name="scores")]

    return freeze(build, seed)


def loop_model(*, hidden: int = 8, steps: int = 3, seed: int = 0) -> FrozenModel:
    """``x`` -> dense+GELU -> loop ``formatted`` (dense+GELU, then the state printed as text and
    parsed back: host-only string ops) -> dense -> loop ``refine`` (dense+GELU only) -> ``y``."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def dense(v, scope, activation=tf.nn.gelu):
        return tf_slim.fully_connected(v, hidden, activation_fn=activation, scope=scope, reuse=tf1.AUTO_REUSE)

    def build():
        x = tf1.placeholder(tf.float32, [2, hidden], name="x")
        h = dense(x, "stem")

        def formatted(i, v):
            v = dense(v, "formatted_dense")
            return i + 1, tf.strings.to_number(tf.strings.as_string(v, precision=5))

        def refine(i, v):
            return i + 1, dense(v, "refine_dense") + v

        _, h = tf1.while_loop(lambda i, v: i < steps, formatted, [tf.constant(0), h], name="formatted")
        h = dense(h, "middle", activation=None)
        _, h = tf1.while_loop(lambda i, v: i < steps, refine, [tf.constant(0), h], name="refine")
        y = tf.identity(dense(h, "head"), name="y")
        return {x: np.random.default_rng(seed).normal(size=(2, hidden)).astype(np.float32)}, [y]

    return freeze(build, seed)
