"""A corpus of real models built with third-party model code and frozen to
GraphDefs: a keras-hub BERT backbone, a Keras applications MobileNetV2 and a
tf_slim convolutional graph with instance normalization.

Every builder uses random weights (nothing is downloaded) and fixed input
shapes, so the frozen graphs have fully known shapes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tests.helpers.freeze import freeze_function, freeze_graph


@dataclass
class CorpusModel:
    """A frozen model of the corpus and what is known about it by construction."""

    name: str
    graph_def: Any
    inputs: dict[str, np.ndarray]  # placeholder tensor name -> a realistic feed value
    outputs: list[str]  # tensor names, in the order of ``output_keys``
    output_keys: list[str] = field(default_factory=list)  # structured output names
    layer_norms: int = 0  # layer normalizations in the model code
    instance_norms: int = 0
    batch_norms: int = 0
    int_range: tuple[int, int] = (0, 10)  # a range valid for every int input
    build_seconds: float = 0.0


def _count_layers(model: Any, cls: type) -> int:
    return sum(1 for layer in model._flatten_layers(include_self=False) if isinstance(layer, cls))


def keras_hub_bert(
    vocabulary_size: int = 100,
    num_layers: int = 2,
    num_heads: int = 2,
    hidden_dim: int = 64,
    intermediate_dim: int = 128,
    max_sequence_length: int = 16,
    batch: int = 2,
    seed: int = 0,
) -> CorpusModel:
    """``keras_hub.models.BertBackbone`` with random weights, traced over
    fixed-shape (batch, max_sequence_length) inputs and frozen."""
    import keras
    import keras_hub
    import tensorflow as tf

    start = time.perf_counter()
    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        max_sequence_length=max_sequence_length,
        dropout=0.0,
    )
    declared = backbone.input  # {"token_ids", "segment_ids", "padding_mask"} -> KerasTensor
    shape = [batch, max_sequence_length]
    specs = {name: tf.TensorSpec(shape, tf.as_dtype(t.dtype), name=name) for name, t in declared.items()}

    def call(**features):
        return backbone(features, training=False)

    graph_def, outputs, keys = freeze_function(call, specs)
    num_segments = backbone.get_config().get("num_segments", 2)
    rng = np.random.default_rng(seed)
    lengths = rng.integers(max_sequence_length // 2, max_sequence_length + 1, size=batch)
    valid = np.arange(max_sequence_length)[None, :] < lengths[:, None]
    values = {
        "token_ids": rng.integers(0, vocabulary_size, size=shape) * valid,
        "segment_ids": (np.arange(max_sequence_length)[None, :] >= lengths[:, None] // 2) * valid,
        "padding_mask": valid,
    }
    feeds = {f"{name}:0": np.asarray(values[name]).astype(spec.dtype.as_numpy_dtype) for name, spec in specs.items()}
    return CorpusModel(
        name="keras_hub_bert",
        graph_def=graph_def,
        inputs=feeds,
        outputs=outputs,
        output_keys=keys,
        layer_norms=_count_layers(backbone, keras.layers.LayerNormalization),
        # one range valid for token ids, segment ids and the padding mask alike
        int_range=(0, min(vocabulary_size, num_segments, 2)),
        build_seconds=time.perf_counter() - start,
    )


def keras_mobilenet_v2(image_size: int = 32, alpha: float = 0.35, classes: int = 10, batch: int = 2,
                       seed: int = 0) -> CorpusModel:
    """``keras.applications.MobileNetV2`` (random weights, logits output),
    with random batch-norm statistics so that every BatchNormalization does
    real work, traced over a fixed-shape image batch and frozen."""
    import keras
    import tensorflow as tf

    start = time.perf_counter()
    keras.utils.set_random_seed(seed)
    model = keras.applications.MobileNetV2(
        input_shape=(image_size, image_size, 3), alpha=alpha, weights=None, classes=classes,
        classifier_activation=None,
    )
    rng = np.random.default_rng(seed)
    batch_norms = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            batch_norms += 1
            gamma, beta, moving_mean, moving_variance = layer.get_weights()
            n = gamma.shape
            layer.set_weights([
                rng.uniform(0.5, 1.5, n).astype(np.float32),
                rng.normal(0.0, 0.1, n).astype(np.float32),
                rng.normal(0.0, 0.1, n).astype(np.float32),
                rng.uniform(0.5, 2.0, n).astype(np.float32),
            ])
    specs = {"images": tf.TensorSpec([batch, image_size, image_size, 3], tf.float32, name="images")}

    def call(images):
        return model(images, training=False)

    graph_def, outputs, keys = freeze_function(call, specs)
    feed = rng.normal(size=(batch, image_size, image_size, 3)).astype(np.float32)
    return CorpusModel(
        name="keras_mobilenet_v2",
        graph_def=graph_def,
        inputs={"images:0": feed},
        outputs=outputs,
        output_keys=keys,
        layer_norms=0,
        batch_norms=batch_norms,
        build_seconds=time.perf_counter() - start,
    )


def slim_instance_norm_convnet(
    convs: int = 2, channels: int = 16, image_size: int = 16, batch: int = 2, seed: int = 0,
    norm_scope: str | None = None,
) -> CorpusModel:
    """Conv -> ``tf_slim.instance_norm`` -> ReLU, ``convs`` times, then a
    global average pool and a dense layer (TF1 graph mode, frozen).

    Block ``i`` is the scope ``block<i>``; ``norm_scope`` names the
    instance-norm scope inside it (default: tf_slim's own ``InstanceNorm``),
    e.g. ``norm_scope="LayerNorm"`` makes ``block0/LayerNorm/{moments,
    batchnorm}``, a layer-norm look-alike by name."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    start = time.perf_counter()
    rng = np.random.default_rng(seed)

    def build():
        images = tf1.placeholder(tf.float32, [batch, image_size, image_size, 3], name="images")
        x = images
        for i in range(convs):
            with tf1.variable_scope(f"block{i}"):
                x = tf_slim.layers.conv2d(
                    x, channels * (i + 1), [3, 3], stride=2 if i else 1, activation_fn=None,
                    weights_initializer=tf1.glorot_uniform_initializer(seed=seed + i),
                    biases_initializer=tf1.random_normal_initializer(stddev=0.1, seed=seed + i),
                    scope="conv",
                )
                x = tf_slim.instance_norm(  # tf_slim.layers.normalization.instance_norm
                    x, center=True, scale=True, epsilon=1e-6,
                    param_initializers={
                        "gamma": tf1.random_uniform_initializer(0.5, 1.5, seed=seed + i),
                        "beta": tf1.random_normal_initializer(stddev=0.1, seed=seed + i),
                    },
                    scope=norm_scope,
                )
                x = tf.nn.relu(x)
        pooled = tf.reduce_mean(x, [1, 2], name="pool")
        logits = tf_slim.layers.fully_connected(
            pooled, 10, activation_fn=None, weights_initializer=tf1.glorot_uniform_initializer(seed=seed),
            scope="logits",
        )
        feed = rng.normal(size=(batch, image_size, image_size, 3)).astype(np.float32)
        return {images: feed}, [logits]

    graph_def, feeds, outputs = freeze_graph(build, seed)
    return CorpusModel(
        name="slim_instance_norm_convnet" + (f"[{norm_scope}]" if norm_scope else ""),
        graph_def=graph_def,
        inputs=feeds,
        outputs=outputs,
        output_keys=["logits"],
        layer_norms=0,
        instance_norms=convs,
        build_seconds=time.perf_counter() - start,
    )


def slim_instance_norm_sequence(
    blocks: int = 2, channels: int = 16, length: int = 12, features: int = 8, batch: int = 2, seed: int = 0,
    norm_scope: str | None = None,
) -> CorpusModel:
    """Channels-first instance normalization of a sequence (TF1 graph mode,
    frozen): per block, ``tf_slim.fully_connected`` to ``channels``, a
    transpose to [batch, channels, length] and ``tf_slim.instance_norm(...,
    data_format="NCHW")``, which normalises every (example, channel) over
    the length axis (the last axis) and scales and shifts per channel with
    gamma and beta reshaped to [1, channels, 1]; then back to
    [batch, length, channels] and a ReLU.

    Block ``i`` is the scope ``block<i>``; ``norm_scope`` names the
    instance-norm scope inside it (default ``InstanceNorm``)."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    start = time.perf_counter()
    rng = np.random.default_rng(seed)

    def build():
        seq = tf1.placeholder(tf.float32, [batch, length, features], name="sequence")
        x = seq
        for i in range(blocks):
            with tf1.variable_scope(f"block{i}"):
                x = tf_slim.fully_connected(
                    x, channels, activation_fn=None,
                    weights_initializer=tf1.glorot_uniform_initializer(seed=seed + i),
                    biases_initializer=tf1.random_normal_initializer(stddev=0.1, seed=seed + i),
                    scope="dense",
                )
                x = tf.transpose(x, [0, 2, 1], name="to_channels_first")
                x = tf_slim.instance_norm(
                    x, center=True, scale=True, epsilon=1e-6, data_format="NCHW",
                    param_initializers={
                        "gamma": tf1.random_uniform_initializer(0.5, 1.5, seed=seed + i),
                        "beta": tf1.random_normal_initializer(stddev=0.1, seed=seed + i),
                    },
                    scope=norm_scope,
                )
                x = tf.nn.relu(tf.transpose(x, [0, 2, 1], name="to_channels_last"))
        pooled = tf.reduce_mean(x, [1], name="pool")
        logits = tf_slim.fully_connected(
            pooled, 10, activation_fn=None, weights_initializer=tf1.glorot_uniform_initializer(seed=seed),
            scope="logits",
        )
        feed = rng.normal(size=(batch, length, features)).astype(np.float32)
        return {seq: feed}, [logits]

    graph_def, feeds, outputs = freeze_graph(build, seed)
    return CorpusModel(
        name="slim_instance_norm_sequence" + (f"[{norm_scope}]" if norm_scope else ""),
        graph_def=graph_def,
        inputs=feeds,
        outputs=outputs,
        output_keys=["logits"],
        layer_norms=0,
        instance_norms=blocks,
        build_seconds=time.perf_counter() - start,
    )
