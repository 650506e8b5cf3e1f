"""Frozen templates for the benchmark graphs: small pieces of model that TensorFlow itself
built and froze (see ``bench_graphs.py``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LN_OUTPUT = "LayerNorm/batchnorm/add_1"


@dataclass
class FrozenTemplate:
    """The nodes of one real frozen piece of model, its input placeholder removed."""

    nodes: list[object]
    input_name: str  # the removed placeholder the template reads
    output: str  # the node whose output 0 is the template's output
    producer: int
    source: str  # what built it, for the report


def real_layer_norm_template(rows: int, hidden: int) -> FrozenTemplate:
    """Build and freeze one ``tf_slim.layers.layer_norm`` in TF1 graph mode."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    tf.get_logger().setLevel("ERROR")  # convert_variables_to_constants is deprecated, and says so
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [rows, hidden], name="x")
        y = tf_slim.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1)
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            frozen = tf1.graph_util.convert_variables_to_constants(
                sess, graph.as_graph_def(), [y.op.name]
            )
    nodes = [n for n in frozen.node if n.name != x.op.name]
    ops = sorted(n.op for n in nodes)
    if (not all(n.name.startswith("LayerNorm/") for n in nodes) or ops.count("Mean") != 2 or "Rsqrt" not in ops
            or y.op.name != LN_OUTPUT):
        raise RuntimeError(f"unexpected tf_slim layer norm structure: {[(n.name, n.op) for n in nodes]}")
    return FrozenTemplate(nodes, x.op.name, y.op.name, frozen.versions.producer,
                          "tf_slim.layers.layer_norm, TF1 graph + convert_variables_to_constants")


def real_dense_gelu_template(rows: int, hidden: int, seed: int) -> FrozenTemplate:
    """Trace one tf_keras (else Keras 3) ``Dense(hidden, activation="gelu")`` with ``tf.function``
    and freeze it; the function boundary (placeholder, ``NoOp`` of the variable reads, output
    ``Identity``) is dropped: the template is the layer's own scope."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    try:
        import tf_keras as keras
        lib = "tf_keras"
    except ImportError:  # pragma: no cover - the project's test extra installs tf_keras
        import keras
        lib = "keras"
    keras.utils.set_random_seed(seed)
    layer = keras.layers.Dense(hidden, activation="gelu", name="dense")
    spec = tf.TensorSpec([rows, hidden], tf.float32, name="x")
    frozen = convert_variables_to_constants_v2(tf.function(lambda x: layer(x)).get_concrete_function(spec))
    graph_def = frozen.graph.as_graph_def()
    (feed,) = [t.op.name for t in frozen.inputs]
    (fetch,) = frozen.outputs
    by_name = {n.name: n for n in graph_def.node}
    output = fetch.op.name
    while not output.startswith(layer.name + "/"):  # the boundary Identity reads the layer's output
        output = next(i for i in by_name[output].input if not i.startswith("^")).split(":")[0]
    nodes = [n for n in graph_def.node if n.name.startswith(layer.name + "/")]
    kept = {n.name for n in nodes} | {feed}
    ops = sorted(n.op for n in nodes)
    if (any(ops.count(o) != 1 for o in ("MatMul", "BiasAdd", "Erfc")) or by_name[output].op != "Mul"
            or any(i.lstrip("^").split(":")[0] not in kept for n in nodes for i in n.input)):
        raise RuntimeError(f"unexpected {lib} Dense(gelu) structure: {[(n.name, n.op) for n in nodes]}")
    return FrozenTemplate(nodes, feed, output, graph_def.versions.producer,
                          f"{lib} {keras.__version__} Dense(activation='gelu'), tf.function + "
                          "convert_variables_to_constants_v2")


def real_transformer_encoder_template(batch: int, seq: int, hidden: int, heads: int, seed: int) -> FrozenTemplate:
    """Trace one keras-hub ``TransformerEncoder`` (BERT's layer: multi-head self attention, residual
    and layer norm, a GELU feed-forward, residual and layer norm) between two reshapes of a
    ``[batch * seq, hidden]`` input with ``tf.function``, and freeze it; the function boundary
    (placeholder, ``NoOp`` of the variable reads, output ``Identity``) is dropped."""
    import keras
    import keras_hub
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    keras.utils.set_random_seed(seed)
    layer = keras_hub.layers.TransformerEncoder(intermediate_dim=4 * hidden, num_heads=heads, activation="gelu",
                                                name="encoder")
    layer(tf.zeros([batch, seq, hidden]))
    rng = np.random.default_rng(seed)
    layer.set_weights([w + rng.normal(0.0, 0.1, np.shape(w)).astype(np.float32) for w in layer.get_weights()])

    def block(x):
        return tf.reshape(layer(tf.reshape(x, [batch, seq, hidden]), training=False), [batch * seq, hidden])

    spec = tf.TensorSpec([batch * seq, hidden], tf.float32, name="x")
    frozen = convert_variables_to_constants_v2(tf.function(block).get_concrete_function(spec))
    graph_def = frozen.graph.as_graph_def()
    (feed,) = [t.op.name for t in frozen.inputs]
    (fetch,) = frozen.outputs
    by_name = {n.name: n for n in graph_def.node}
    boundary = by_name[fetch.op.name]
    output = next(i for i in boundary.input if not i.startswith("^")).split(":")[0]
    dropped = {feed, boundary.name} | {n.name for n in graph_def.node if n.op == "NoOp"}
    nodes = [n for n in graph_def.node if n.name not in dropped]
    for n in nodes:
        kept = [i for i in n.input if i.lstrip("^").split(":")[0] not in dropped - {feed}]
        del n.input[:]
        n.input.extend(kept)
    ops = [n.op for n in nodes]
    if ops.count("Softmax") != 1 or ops.count("Erf") + ops.count("Erfc") != 1:
        raise RuntimeError(f"unexpected keras-hub TransformerEncoder structure: {sorted(set(ops))}")
    return FrozenTemplate(nodes, feed, output, graph_def.versions.producer,
                          f"keras-hub {keras_hub.__version__} TransformerEncoder (Keras {keras.__version__}), "
                          "tf.function + convert_variables_to_constants_v2")
