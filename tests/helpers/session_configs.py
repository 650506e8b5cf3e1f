"""Session configurations written as the seeds write them, and graphs to run them on."""
from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

tf1 = tf.compat.v1


def npu_config(**params: Any) -> Any:
    """A ``ConfigProto`` with the ``NpuOptimizer`` custom optimizer (``use_off_line`` on, as seed 000
    writes it) and ``params`` (bool, int or str values), remapping off as the seeds' examples turn it."""
    config = tf1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["use_off_line"].b = True
    for key, value in params.items():
        if isinstance(value, bool):
            custom_op.parameter_map[key].b = value
        elif isinstance(value, int):
            custom_op.parameter_map[key].i = value
        else:
            custom_op.parameter_map[key].s = tf.compat.as_bytes(value)
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    return config


def imported(graph_def: Any) -> tf.Graph:
    """``graph_def`` imported into a graph of its own, its names kept."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(graph_def, name="")
    return graph
