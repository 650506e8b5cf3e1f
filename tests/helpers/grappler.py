"""TensorFlow's own graph optimizer (Grappler) on a frozen graph, for graphs as a deployment
pipeline leaves them: ``common_subgraph_elimination`` merges nodes that compute one thing
(constants of one value, reads of them), so two weights that happen to be equal become one
tensor read in two places."""
from __future__ import annotations

from typing import Any, Sequence


def merge_common_subgraphs(graph_def: Any, outputs: Sequence[str]) -> Any:
    """``graph_def`` after Grappler's ``common_subgraph_elimination`` alone, keeping the nodes
    of ``outputs`` (tensor names)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import config_pb2, meta_graph_pb2, rewriter_config_pb2
    from tensorflow.python.grappler import tf_optimizer

    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        meta = tf.compat.v1.train.export_meta_graph(graph=graph)
    fetch = meta_graph_pb2.CollectionDef()
    fetch.node_list.value.extend(dict.fromkeys(name.split(":")[0] for name in outputs))
    meta.collection_def["train_op"].CopyFrom(fetch)
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.optimizers.append("common_subgraph_elimination")
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    return tf_optimizer.OptimizeGraph(config, meta)
