"""The shape propagation through function calls, TF1 loop Merges, and values no value rule
gives (``core/graph/shape_functions.py``, ``shape_calls.py``, ``shape_loops.py``)."""
from __future__ import annotations

from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")

from scopefusion.core.graph.index import GraphIndex  # noqa: E402
from scopefusion.core.graph.view import GraphView  # noqa: E402
from tests.models.detection_models import tf1_graph_mode  # noqa: E402

FLOAT = 1  # DT_FLOAT


def _shape(graph_def: Any, name: str, port: int = 0) -> tuple[Any, GraphView]:
    view = GraphView(GraphIndex(graph_def))
    return view.static_shape((view.index.index[name], port)), view


# -- function calls ---------------------------------------------------------------------------


def test_a_call_has_the_shape_its_body_gives_through_a_nested_call() -> None:
    @tf.function
    def inner(t: Any) -> Any:
        return tf.reshape(tf.concat([t, t], axis=1), [-1, 3, 4])

    @tf.function
    def outer(t: Any) -> Any:
        return inner(t) * 2.0

    graph_def = outer.get_concrete_function(tf.TensorSpec([2, 6, 2], tf.float32)).graph.as_graph_def()
    calls = [n.name for n in graph_def.node if n.op in ("PartitionedCall", "StatefulPartitionedCall")]
    assert calls and not any("_output_shapes" in n.attr for n in graph_def.node)
    shape, view = _shape(graph_def, calls[0])
    assert shape == [4, 3, 4]
    assert view.tensorflow_shape_ops == set()  # answered without TensorFlow
    followed = view.shape_inference().functions.followed()
    assert [shapes for _, shapes in followed] == [((2, 6, 2),)]


def _call(graph: Any, name: str, source: str, function: str) -> None:
    node = graph.node.add(name=name, op="PartitionedCall", input=[source])
    node.attr["f"].func.name = function
    node.attr["Tin"].list.type.append(FLOAT)
    node.attr["Tout"].list.type.append(FLOAT)


def _placeholder(graph: Any, name: str, dims: list[int]) -> None:
    node = graph.node.add(name=name, op="Placeholder")
    node.attr["dtype"].type = FLOAT
    for d in dims:
        node.attr["shape"].shape.dim.add(size=d)


def _function(graph: Any, name: str, body: list[tuple[str, str, str]], result: str) -> None:
    """A function of one float argument ``a``; ``body`` is (name, op, input) per node."""
    function = graph.library.function.add()
    function.signature.name = name
    function.signature.input_arg.add(name="a", type=FLOAT)
    function.signature.output_arg.add(name="b", type=FLOAT)
    for node_name, op, source in body:
        node = function.node_def.add(name=node_name, op=op, input=[source])
        if op == "PartitionedCall":
            node.attr["f"].func.name = name
            node.attr["Tin"].list.type.append(FLOAT)
            node.attr["Tout"].list.type.append(FLOAT)
        else:
            node.attr["T"].type = FLOAT
    function.ret["b"] = result


def test_a_recursive_function_gives_unknown_shapes_and_stops() -> None:
    graph = tf.compat.v1.GraphDef()
    _placeholder(graph, "x", [3])
    _call(graph, "call", "x", "f")
    _function(graph, "f", [("again", "PartitionedCall", "a"), ("neg", "Neg", "again:output:0")], "neg:y:0")
    index = GraphIndex(graph, validate=False)  # loading refuses a recursive library; inference must not loop
    inference = GraphView(index).shape_inference()
    assert inference.shape(index.index["call"], 0) is None
    assert inference.missing(index.index["call"]) == frozenset()
    assert inference.functions.followed() == [("f", ((3,),))]


def test_calls_are_followed_once_per_function_and_input_shapes() -> None:
    graph = tf.compat.v1.GraphDef()
    for name, dims in (("x", [2]), ("y", [2]), ("z", [5, 1])):
        _placeholder(graph, name, dims)
        _call(graph, f"call_{name}", name, "square")
    _function(graph, "square", [("sq", "Square", "a")], "sq:y:0")
    index = GraphIndex(graph)
    inference = GraphView(index).shape_inference()
    shapes = [inference.shape(index.index[f"call_{n}"], 0) for n in "xyz"]
    assert shapes == [[2], [2], [5, 1]]
    assert inference.functions.followed() == [("square", ((2,),)), ("square", ((5, 1),))]


def test_a_body_that_cannot_be_followed_is_reported_as_outside_the_table() -> None:
    graph = tf.compat.v1.GraphDef()
    _placeholder(graph, "x", [2])
    _call(graph, "call", "x", "f")
    _function(graph, "f", [("sq", "Square", "a")], "sq:no_such_output:0")
    index = GraphIndex(graph, validate=False)
    inference = GraphView(index).shape_inference()
    assert inference.shape(index.index["call"], 0) is None
    assert inference.missing(index.index["call"]) == {"PartitionedCall"}


# -- TF1 loops ---------------------------------------------------------------------------------


def _tf1_loop() -> tuple[Any, list[str], list[Any]]:
    tf1 = tf.compat.v1
    with tf1_graph_mode():
        graph = tf.Graph()
        with graph.as_default():
            x = tf1.placeholder(tf.float32, [2, 3], name="x")
            i0 = tf.constant(0)

            def body(i: Any, grown: Any, same: Any, flat: Any) -> tuple[Any, ...]:
                return i + 1, tf.concat([grown, grown[:, :1]], axis=1), tf.tanh(same), tf.reshape(flat, [-1])

            outputs = tf1.while_loop(lambda i, *_: i < 3, body, [i0, x, x, x], shape_invariants=[
                i0.shape, tf.TensorShape([2, None]), x.shape, tf.TensorShape(None)])
            merges = sorted(op.name for op in graph.get_operations() if op.type == "Merge")
            names = [t.op.name for t in outputs]
            with tf1.Session() as session:
                values = session.run(outputs, {x: [[1.0, 2.0, 3.0]] * 2})
        return graph.as_graph_def(), merges + names, values


def test_a_tf1_loop_merge_is_relaxed_over_its_back_edge() -> None:
    graph_def, names, values = _tf1_loop()
    index = GraphIndex(graph_def)
    inference = GraphView(index).shape_inference()
    merges, exits = names[:4], names[4:]
    assert [inference.shape(index.index[m], 0) for m in merges] == [[], [2, None], [2, 3], None]
    found = [inference.shape(index.index[e], 0) for e in exits]
    assert found == [[], [2, None], [2, 3], None]
    for shape, value in zip(found, values, strict=True):  # what running the loop gives fits them
        assert shape is None or (len(shape) == value.ndim and all(
            d is None or d == v for d, v in zip(shape, value.shape, strict=True)))
    assert values[1].shape == (2, 6) and values[3].shape == (6,)


# -- values no value rule gives ---------------------------------------------------------------


def _reshaped(through: Any) -> Any:
    tf1 = tf.compat.v1
    with tf1_graph_mode():
        graph = tf.Graph()
        with graph.as_default():
            x = tf1.placeholder(tf.float32, [None, 6], name="x")
            target = through(tf.shape(x, out_type=tf.int32)[1:] // 2)
            tf.reshape(x, tf.concat([[-1], target, [2]], axis=0), name="out")
        return graph.as_graph_def()


def test_a_value_no_value_rule_gives_is_reported_like_an_op_outside_the_table() -> None:
    graph_def = _reshaped(tf.abs)  # Abs: no value rule
    index = GraphIndex(graph_def)
    inference = GraphView(index).shape_inference()
    out = index.index["out"]
    assert inference.shape(out, 0) == [None, None, 2]
    assert inference.missing(out) == {"Abs"}
    view = GraphView(index)
    assert view.static_shape((out, 0)) == [None, None, 2]  # TensorFlow was asked (and knows no more)
    assert view.tensorflow_shape_ops == {"Abs"}
    warnings: list[str] = []
    view.note_tensorflow_shapes(warnings)
    assert len(warnings) == 1 and "past Abs nodes" in warnings[0]


def test_a_value_its_rules_give_is_not_reported() -> None:
    graph_def = _reshaped(tf.identity)
    index = GraphIndex(graph_def)
    inference = GraphView(index).shape_inference()
    out = index.index["out"]
    assert inference.shape(out, 0) == [None, 3, 2]
    assert inference.missing(out) == frozenset()
