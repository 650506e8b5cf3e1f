"""Real graphs for the tests, built with TensorFlow and tf_slim and frozen."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from tests.helpers.freeze import freeze_graph


@dataclass
class FrozenModel:
    graph_def: object
    inputs: dict[str, np.ndarray]  # placeholder tensor name -> feed value
    outputs: list[str]  # tensor names
    layer_norms: int = 0

    @property
    def verify_options(self) -> dict[str, Any]:
        """How ``scopefusion.verify`` feeds this graph (``tests.helpers.verify``): the input shapes
        and the range of the int inputs, where the model has them."""
        return {key: getattr(self, key) for key in ("input_shapes", "int_range") if hasattr(self, key)}


def bert_style_encoder(
    layers: int = 2, hidden: int = 64, heads: int = 4, seq: int = 8, batch: int = 2, seed: int = 0
) -> FrozenModel:
    """A BERT-style encoder (as in google-research/bert ``modeling.py``): the
    embeddings and every attention/FFN block end in ``tf_slim.layers.layer_norm``."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    head = hidden // heads

    def dense(x, units, name, activation=None):
        with tf1.variable_scope(name):
            w = tf1.get_variable("kernel", [x.shape[-1], units], initializer=tf1.glorot_uniform_initializer(seed=seed))
            b = tf1.get_variable("bias", [units], initializer=tf1.random_normal_initializer(stddev=0.1, seed=seed))
            y = tf.nn.bias_add(tf.matmul(x, w), b)
            return activation(y) if activation else y

    def layer_norm(x):
        return tf_slim.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1)

    def build():
        ids = tf1.placeholder(tf.float32, [batch * seq, hidden], name="input_embeddings")
        with tf1.variable_scope("bert"):
            with tf1.variable_scope("embeddings"):
                x = layer_norm(ids * 2.0 + 1.0)
            with tf1.variable_scope("encoder"):
                for i in range(layers):
                    with tf1.variable_scope(f"layer_{i}"):
                        with tf1.variable_scope("attention"):
                            with tf1.variable_scope("self"):
                                q = dense(x, hidden, "query")
                                k = dense(x, hidden, "key")
                                v = dense(x, hidden, "value")

                                def split(t):
                                    t = tf.reshape(t, [batch, seq, heads, head])
                                    return tf.transpose(t, [0, 2, 1, 3])

                                scores = tf.matmul(split(q), split(k), transpose_b=True) / float(np.sqrt(head))
                                probs = tf.nn.softmax(scores)
                                ctx = tf.transpose(tf.matmul(probs, split(v)), [0, 2, 1, 3])
                                ctx = tf.reshape(ctx, [batch * seq, hidden])
                            with tf1.variable_scope("output"):
                                x = layer_norm(dense(ctx, hidden, "dense") + x)
                        with tf1.variable_scope("intermediate"):
                            inter = dense(x, hidden * 2, "dense", activation=tf.nn.gelu)
                        with tf1.variable_scope("output"):
                            x = layer_norm(dense(inter, hidden, "dense") + x)
            with tf1.variable_scope("pooler"):
                pooled = dense(x, hidden, "dense", activation=tf.tanh)
        feed = rng.normal(size=(batch * seq, hidden)).astype(np.float32)
        return {ids: feed}, [pooled]

    frozen, feeds, outputs = freeze_graph(build, seed)
    return FrozenModel(frozen, feeds, outputs, layer_norms=1 + 2 * layers)
