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
            _compare(result, name, index_op=index.ops[i], port=port, ours=ours_of.shape(i, port), theirs=tensor)
    return result


def compare_function_bodies(graph_def: Any) -> tuple[ShapeComparison, int]:
    """Compare, inside every library function our propagation followed (for each set of input
    shapes it was called with), our shapes with TensorFlow's for the body instantiated with those
    input shapes.  Also answers how many (function, input shapes) were followed."""
    import tensorflow as tf
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph

    index = GraphIndex(graph_def)
    ours_of = GraphView(index).shape_inference()
    for i in range(len(index.names)):
        ours_of.shape(i, 0)
    functions = {f.signature.name: f for f in graph_def.library.function}
    result = ShapeComparison()
    followed = ours_of.functions.followed()
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")  # the library, for nested calls
        for name, inputs in followed:
            body = ours_of.functions.body_inference(name, [None if s is None else list(s) for s in inputs])
            assert body is not None, name
            theirs_of = function_def_to_graph(functions[name], input_shapes=[
                tf.TensorShape(None if s is None else list(s)) for s in inputs])
            for i, node_name in enumerate(body.index.names):
                result.outside |= body.missing(i)
                try:
                    operation = theirs_of.get_operation_by_name(node_name)
                except KeyError:
                    continue
                for port, tensor in enumerate(operation.outputs):
                    _compare(result, f"{name}/{node_name}", index_op=body.index.ops[i], port=port,
                             ours=body.shape(i, port), theirs=tensor)
    return result, len(followed)


def _compare(result: ShapeComparison, name: str, *, index_op: str, port: int, ours: Any, theirs: Any) -> None:
    result.tensors += 1
    theirs = None if theirs.shape.rank is None else theirs.shape.as_list()
    where = f"{tensor_name(name, port)} ({index_op}): ours {_show(ours)}, TensorFlow's {_show(theirs)}"
    if theirs is None:
        return
    if ours is None:
        result.tf_knows_more.append(where)
        return
    result.both += 1
    if len(ours) != len(theirs) or any(a is not None and b is not None and a != b
                                       for a, b in zip(ours, theirs, strict=False)):
        result.disagree.append(where)
    elif any(a is None and b is not None for a, b in zip(ours, theirs, strict=True)):
        result.tf_knows_more.append(where)
