"""``TensorEvaluator`` (``scopefusion/core/graph/constant_eval.py``): tensors a graph computes from
constants, in numpy, on TensorFlow 1 graphs built with the ops models write: index arithmetic
(a causal mask from ``range``), a ``tf.cond`` on a predicate computed from constants
(``Switch``/``Merge``: the branch taken), a slice of a shape of which only part is known, a
scatter update; and why a tensor is not a constant.
"""
from __future__ import annotations

import numpy as np
import pytest

from scopefusion import GraphView
from scopefusion.core.graph.constant_eval import NotConstant, TensorEvaluator


def graph(build):
    """``build()`` in a fresh TensorFlow 1 graph: its GraphDef and a view of it."""
    import tensorflow as tf

    g = tf.Graph()
    with g.as_default():
        build()
    graph_def = g.as_graph_def()
    return graph_def, GraphView(graph_def)


def value(view: GraphView, name: str, **options) -> np.ndarray:
    return TensorEvaluator(view, **options).value((view.index.index[name], 0))


def test_a_causal_mask_from_ranges():
    import tensorflow as tf

    def build():
        i, j = tf.range(5)[:, None], tf.range(5)[None, :]
        tf.identity(tf.cast(i >= j, tf.float32) * tf.ones([1, 5]), name="mask")

    _, view = graph(build)
    np.testing.assert_array_equal(value(view, "mask"), np.tril(np.ones((5, 5), np.float32)))


@pytest.mark.parametrize("size, expected", [(3, 1.0), (0, 2.0)])
def test_a_cond_takes_the_branch_its_predicate_computes(size, expected):
    """``Switch`` passes its data to the output the predicate names; ``Merge`` gives the live input."""
    import tensorflow as tf

    def build():
        predicate = tf.greater_equal(tf.size(tf.zeros([size, 2])), 1)
        a_false, a_true = tf.raw_ops.Switch(data=tf.constant(1.0), pred=predicate)
        b_false, b_true = tf.raw_ops.Switch(data=tf.constant(2.0), pred=predicate)
        merged, _ = tf.raw_ops.Merge(inputs=[a_true * 1.0, b_false * 1.0])
        tf.identity(merged, name="out")

    _, view = graph(build)
    assert float(value(view, "out")) == expected


def test_a_slice_of_a_shape_needs_only_the_sizes_it_takes():
    import tensorflow as tf

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 6], name="x")
        tf.identity(tf.shape(x)[1] * tf.shape(x)[2], name="area")
        tf.identity(tf.shape(x)[0], name="batch")

    _, view = graph(build)

    def shape_of(tensor):
        return view.static_shape(tensor, infer=False)

    assert int(value(view, "area", shape_of=shape_of)) == 24
    with pytest.raises(NotConstant, match="not static"):
        value(view, "batch", shape_of=shape_of)


def test_a_scatter_update_of_constants():
    import tensorflow as tf

    def build():
        tf.identity(tf.tensor_scatter_nd_update(tf.zeros([3, 3]), [[0, 1], [2, 2]], [5.0, 7.0]), name="out")

    _, view = graph(build)
    expected = np.zeros((3, 3), np.float32)
    expected[0, 1], expected[2, 2] = 5.0, 7.0
    np.testing.assert_array_equal(value(view, "out"), expected)


def test_a_graph_input_is_no_constant_and_the_reason_names_it():
    import tensorflow as tf

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        tf.identity(x + 1.0, name="out")

    _, view = graph(build)
    with pytest.raises(NotConstant, match="'x' is a Placeholder"):
        value(view, "out")


def test_a_probe_given_for_a_tensor_is_carried_through_copies():
    import tensorflow as tf

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        tf.identity(tf.tile(tf.transpose(x), [1, 2]), name="out")

    _, view = graph(build)
    probe = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = TensorEvaluator(view, given={(view.index.index["x"], 0): probe}).value((view.index.index["out"], 0))
    np.testing.assert_array_equal(out, np.tile(probe.T, [1, 2]))
