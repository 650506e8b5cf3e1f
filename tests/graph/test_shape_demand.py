"""The demand-driven walk of the shape propagation (``core/graph/shape_inference.py``): in a graph
without loops a node's producers are inferred only as far as its rule reads them, and no further
than a node whose shapes come out fully known.  It must tell exactly what the walk that infers
every producer first tells: the same shapes, values and op types outside the table, for every
tensor, whichever tensors are asked first."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from scopefusion.core.graph.index import GraphIndex  # noqa: E402
from scopefusion.core.graph.shape_inference import ShapeInference  # noqa: E402
from scopefusion.core.graph.view import GraphView  # noqa: E402
from tests.helpers.freeze import freeze_function  # noqa: E402


def _told(index: GraphIndex, *, demand: bool, first: list[int]) -> tuple[list[Any], list[Any], list[Any]]:
    """Every tensor's shape, value and missing op types, the tensors of ``first`` asked first."""
    view = GraphView(index)
    inference = ShapeInference(index, view.same_shape, view._folded_value, demand=demand)
    for i in first:
        inference.shape(i, 0)
    everything = range(len(index))
    return ([inference.shape(i, port) for i in everything for port in range(3)],
            [inference.missing(i) for i in everything],
            [inference.value(i, 0) for i in everything])


def _bucketized_graph() -> Any:
    """A tensor of unknown shape here (``Bucketize`` lies outside the shape table), reshaped to a
    constant shape (fully known whatever its input) and to one with a ``-1`` (not fully known)."""
    kernel = np.ones([16, 4], np.float32)

    def fn(x: Any) -> Any:
        buckets = tf.cast(tf.raw_ops.Bucketize(input=x, boundaries=[0.0]), tf.float32)
        mixed = buckets * x
        fixed = tf.matmul(tf.reshape(mixed, [16, 16]), kernel)
        loose = tf.matmul(tf.reshape(mixed, [-1, 16]), kernel)
        return {"fixed": tf.nn.relu(fixed), "loose": tf.nn.relu(loose), "size": tf.shape(mixed)[0]}

    graph_def, _, _ = freeze_function(fn, {"x": tf.TensorSpec([2, 8, 16], tf.float32)})
    return graph_def


def _named(index: GraphIndex, op: str, *, reading: str | None = None) -> int:
    found = [i for i, o in enumerate(index.ops) if o == op
             and (reading is None or any(index.ops[p] == reading for p, _ in index.inputs[i]))]
    assert found, op
    return found[-1]


def test_a_reshape_to_a_constant_shape_ends_the_walk() -> None:
    index = GraphIndex(_bucketized_graph())
    relus = [i for i, op in enumerate(index.ops) if op == "Relu"]
    bucketize = _named(index, "Bucketize")
    view = GraphView(index)
    inference = view.shape_inference()
    shapes = {i: inference.shape(i, 0) for i in relus}
    assert sorted(map(str, shapes.values())) == ["[16, 4]", "[None, 4]"]
    whole = [i for i in relus if shapes[i] == [16, 4]]
    assert len(whole) == 1
    # a fresh walk asked only for the fully known product: nothing above the constant Reshape
    inference = GraphView(index).shape_inference()
    assert inference.shape(whole[0], 0) == [16, 4] and inference.missing(whole[0]) == frozenset()
    assert not inference.known(bucketize)
    # the other product's rank-2 shape is left short by Bucketize, which is said
    loose = next(i for i in relus if i != whole[0])
    assert inference.shape(loose, 0) == [None, 4] and inference.missing(loose) == {"Bucketize"}
    assert inference.known(bucketize)


def test_a_graph_with_loops_is_walked_producers_first() -> None:
    def fn(x: Any) -> Any:
        return tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0), [0, x])[1]

    graph_def, _, _ = freeze_function(fn, {"x": tf.TensorSpec([2, 3], tf.float32)})
    index = GraphIndex(graph_def)
    assert "Merge" in index.op_types()
    inference = GraphView(index).shape_inference()
    last = len(index) - 1
    inference.shape(last, 0)
    assert all(inference.known(p) for p, port in index.inputs[last] if port >= 0)


@pytest.mark.parametrize("graph", ["bucketized", "bert_encoder", "keras_mha"])
def test_the_demand_driven_walk_tells_what_the_producers_first_walk_tells(graph: str) -> None:
    if graph == "bucketized":
        graph_def = _bucketized_graph()
    else:
        from tests.models import attention_models as att, model_builders as mb

        graph_def = (mb.bert_style_encoder(layers=2) if graph == "bert_encoder" else att.keras_mha()).graph_def
    index = GraphIndex(graph_def)
    assert not index.op_types() & {"Merge", "NextIteration"}
    everything = list(range(len(index)))
    for first in (everything, everything[::-1], [len(index) - 1], everything[::7]):
        demanded = _told(index, demand=True, first=first)
        assert demanded == _told(index, demand=False, first=first)
    assert any(shape is not None for shape in demanded[0])
