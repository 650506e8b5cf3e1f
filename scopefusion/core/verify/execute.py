"""Running a GraphDef in stock TensorFlow, for comparisons.

Grappler's remapper rewrites some subgraphs (layer norms among them) into
fused kernels of its own with different rounding; comparing an original graph
with a fused one must not measure that, so it is switched off here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from tensorflow.core.framework.graph_pb2 import GraphDef


def session_config() -> Any:
    """A ConfigProto with numerics-changing graph rewrites disabled."""
    import tensorflow as tf
    from tensorflow.core.protobuf import rewriter_config_pb2

    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return config


def run_graph_def(
    graph_def: "GraphDef", feeds: Mapping[str, "np.ndarray"], fetches: Sequence[str]
) -> list["np.ndarray"]:
    """Import ``graph_def`` into a fresh graph and fetch tensors by name."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph, config=session_config()) as sess:
            return list(sess.run(list(fetches), dict(feeds)))
