"""Sizes the graph's shapes know are constants to every pass (``GraphView.folded_constant``, what a
pattern's ``const()`` reads): ``tf.shape(x)[-1]`` of a static axis, arithmetic on it, the
``Shape`` of a fully known tensor, ``tf.ones_like`` of a static shape; told by the project's own
shape propagation, not TensorFlow's.  A size the graph does not know (a dynamic batch) is none.
"""
from __future__ import annotations

import numpy as np

from scopefusion import GraphView


def graph(build):
    """``build()`` in a fresh TensorFlow 1 graph over ``x`` of shape [None, 6, 8]: a view of it."""
    import tensorflow as tf

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 8], name="x")
        build(x)
    return GraphView(g.as_graph_def())


def folded(view: GraphView, name: str):
    return view.folded_constant(view.index.index[name])


def test_a_static_axis_of_a_dynamic_shape_is_a_constant():
    import tensorflow as tf

    def build(x):
        d = tf.shape(x)[-1]
        tf.identity(d, name="d")
        tf.math.sqrt(tf.maximum(tf.cast(d, tf.float32), 0.0), name="sqrt_d")  # K.sqrt(K.cast(K.shape(x)[-1]))
        tf.identity(tf.shape(x)[1] // 2, name="half_rows")
        tf.identity(tf.shape(x)[0], name="batch")

    view = graph(build)
    d = folded(view, "d")
    assert d is not None and d[0].dtype == np.int32 and d[0].shape == () and int(d[0]) == 8
    names = {view.index.names[i] for i in d[1]}
    assert "Shape" in {view.index.ops[i] for i in d[1]} and "x" not in names  # x read for its shape only
    sqrt_d = folded(view, "sqrt_d")
    assert sqrt_d is not None and sqrt_d[0].dtype == np.float32
    np.testing.assert_allclose(sqrt_d[0], np.sqrt(8.0))
    half = folded(view, "half_rows")
    assert half is not None and int(half[0]) == 3
    assert folded(view, "batch") is None  # the batch is not known


def test_the_shape_of_a_static_tensor_and_ones_like_it():
    import tensorflow as tf

    def build(x):
        y = tf.reshape(x[:1], [1, 6, 8])
        tf.identity(tf.shape(y, out_type=tf.int64), name="static_shape")
        tf.identity(tf.ones_like(y) * -1e4, name="fill")
        tf.identity(tf.shape(x), name="dynamic")
        tf.identity(tf.zeros_like(x), name="dynamic_zeros")

    view = graph(build)
    shape = folded(view, "static_shape")
    assert shape is not None and shape[0].dtype == np.int64 and shape[0].tolist() == [1, 6, 8]
    fill = folded(view, "fill")
    assert fill is not None and fill[0].shape == (1, 6, 8) and (fill[0] == np.float32(-1e4)).all()
    assert folded(view, "dynamic") is None and folded(view, "dynamic_zeros") is None
