"""Our shape propagation against TensorFlow's shape inference, tensor by tensor, on one graph."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.graph.view import GraphView
from scopefusion.core.graph.vocabulary import tensor_name


@dataclass
class ShapeComparison:
    """Every output tensor of a graph: where the two disagree, and how much each told."""

    tensors: int = 0
    both: int = 0  # tensors whose rank both tell
    disagree: list[str] = field(default_factory=list)  # a rank, or a dimension both know, differs
    tf_knows_more: list[str] = field(default_factory=list)  # TensorFlow tells a rank or dimension we do not
    outside: set[str] = field(default_factory=set)  # op types outside our table


def _show(shape: Any) -> str:
    return "unknown rank" if shape is None else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def compare_shapes(graph_def: Any) -> ShapeComparison:
    """Compare, for every output of every node that TensorFlow imports, our shape with TensorFlow's."""
    import tensorflow as tf

    index = GraphIndex(graph_def)
    view = GraphView(index)
    ours_of = view.shape_inference()
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    result = ShapeComparison()
    for i, name in enumerate(index.names):
        operation = graph.get_operation_by_name(name)
        result.outside |= ours_of.missing(i)
        for port, tensor in enumerate(operation.outputs):
            result.tensors += 1
            theirs = None if tensor.shape.rank is None else tensor.shape.as_list()
            ours = ours_of.shape(i, port)
            where = f"{tensor_name(name, port)} ({index.ops[i]}): ours {_show(ours)}, TensorFlow's {_show(theirs)}"
            if theirs is None:
                continue
            if ours is None:
                result.tf_knows_more.append(where)
                continue
            result.both += 1
            if len(ours) != len(theirs) or any(a is not None and b is not None and a != b
                                               for a, b in zip(ours, theirs, strict=False)):
                result.disagree.append(where)
            elif any(a is None and b is not None for a, b in zip(ours, theirs, strict=True)):
                result.tf_knows_more.append(where)
    return result
