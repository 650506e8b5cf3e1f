"""Frozen graphs with concats of concats, built by the real libraries that produce them
(tf_slim's Inception v3, Keras 3 and tf_keras ``Concatenate``, Keras' DenseNet) or by
``tf.concat`` written by hand where a case has no library of its own.

Every builder returns an ``activation_models2.PassModel`` whose ``expected`` counts the
outer concats whose inner concats can all be spliced in, from the architecture, and
whose ``attrs`` say how many inner concats go (``spliced``) and how many inputs each
new concat has (``N``).  Sizes are tiny and weights random.

``CONCAT_FORMS`` and ``CONCAT_REFUSALS`` name every builder, for parametrized tests.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from tests.models import activation_models as am
from tests.models.activation_models2 import PassModel, traced
from tests.helpers.freeze import freeze_function


def slim_inception_v3(seed: int = 0) -> PassModel:
    """tf_slim's ``inception_v3_base`` up to ``Mixed_7c`` (75x75 images, depth multiplier 0.1):
    in ``Mixed_7b`` and ``Mixed_7c`` branches 1 and 2 are each a ``tf.concat`` of a 1x3 and a
    3x1 convolution, inside the block's concat of four branches, all along axis 3; the nine
    blocks before concatenate plain branches.  2 blocks, 4 inner concats, 6 inputs each."""
    import tensorflow as tf
    from tf_slim.nets import inception_v3

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        x = tf1.placeholder(tf.float32, [1, 75, 75, 3], name="x")
        net, _ = inception_v3.inception_v3_base(x, final_endpoint="Mixed_7c", depth_multiplier=0.1, min_depth=4)
        return {x: rng.normal(size=(1, 75, 75, 3)).astype(np.float32)}, [tf.identity(net, name="out")]

    model = am._tf1("slim_inception_v3", build, seed, signature=("ConcatV2", "Conv2D"))
    return PassModel.of(model, 2, spliced=4, N=6)


def keras_nested(library: str, outer_axis: int = -1, seed: int = 0) -> PassModel:
    """Keras 3 (``library="keras"``) or tf_keras: ``Concatenate(axis=outer_axis)`` of
    ``Concatenate()([a, b])`` and ``Concatenate(axis=3)([c, d])`` over four 1x1 convolutions
    of a [2, 4, 4, 3] image.  Keras 3 keeps ``-1`` in the graph, tf_keras writes ``3``: on
    rank 4 both are the last axis.  With ``outer_axis=1`` (the inner concats then
    ``[a, b]`` and ``[b, a]``) the axes differ and the inner concats stay."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    layers = lib.layers
    image = lib.Input((4, 4, 3), batch_size=2)
    a, b, c, d = (layers.Conv2D(width, 1)(image) for width in (2, 3, 4, 5))
    inner = [layers.Concatenate()([a, b]), layers.Concatenate(axis=3)([c, d])]
    if outer_axis == 1:  # both inner concats 5 channels wide, to be joined along the rows
        inner[1] = layers.Concatenate()([b, a])
    net = lib.Model(image, layers.Concatenate(axis=outer_axis)(inner))
    model = am._traced(f"{library}_nested[outer_axis={outer_axis}]", lambda x: net(x), {"x": am._spec([2, 4, 4, 3])},
                       np.random.default_rng(seed), signature=("ConcatV2",))
    if outer_axis == 1:
        return PassModel.of(model, 0, refused=1)
    return PassModel.of(model, 1, spliced=2, N=4)


def keras_densenet(seed: int = 0) -> PassModel:
    """Keras 3's DenseNet (``keras.src.applications.densenet.DenseNet``) with two conv blocks
    per dense block on 32x32 images: each block's second concat joins the first concat with
    a new convolution, and the first concat also feeds that convolution's batch norm: no
    inner concat is read by its outer concat alone (4 dense blocks, 4 refusals)."""
    import keras
    from keras.src.applications.densenet import DenseNet

    keras.utils.set_random_seed(seed)
    net = DenseNet([2, 2, 2, 2], include_top=True, weights=None, input_shape=(32, 32, 3), classes=4)
    model = am._traced("keras_densenet", lambda x: net(x, training=False), {"x": am._spec([1, 32, 32, 3])},
                       np.random.default_rng(seed), signature=("ConcatV2",))
    return PassModel.of(model, 0, refused=4)


def concat_chain() -> PassModel:
    """Three ``tf.concat`` along the last axis, each of the one before: one level goes per
    run (the two candidates overlap in the middle concat)."""
    import tensorflow as tf

    def fn(x):
        first = tf.concat([x, x * 2.0], -1)
        second = tf.concat([first, x * 3.0], -1)
        return tf.concat([second, x * 4.0], -1)

    return traced("concat_chain", fn, [2, 4], 1, signature=("ConcatV2",), spliced=1, N=3)


def partly_spliced() -> PassModel:
    """``tf.concat([tf.concat([x, 2x], 1), tf.concat([3x, 4x], 1)], 1)`` where the second inner
    concat is a graph output too: the first is spliced in, the second stays an input."""
    import tensorflow as tf

    def fn(x):
        kept = tf.concat([x * 3.0, x * 4.0], 1, name="kept")
        return tf.concat([tf.concat([x, x * 2.0], 1), kept], 1), kept

    return traced("partly_spliced", fn, [2, 3], 1, signature=("ConcatV2",), spliced=1, N=3, kept=["kept"])


def unknown_rank() -> PassModel:
    """``tf.concat([tf.concat([a, b], 1), c], -1)`` over inputs of unknown rank (fed [2, 3]):
    axis 1 and -1 cannot be compared."""
    import tensorflow as tf

    def fn(a, b, c):
        return tf.concat([tf.concat([a, b], 1), c], -1)

    names = ("a", "b", "c")
    graph_def, outputs, _ = freeze_function(fn, {k: am._spec(None, k) for k in names})
    rng = np.random.default_rng(0)
    feeds = {f"{k}:0": rng.normal(size=(2, 3)).astype(np.float32) for k in names}
    shapes = ";".join(f"{k}:2,3" for k in names)
    return PassModel(graph_def, feeds, outputs, name="unknown_rank", input_shapes=shapes, expected=0,
                     attrs={"refused": 1})


def fed_axis() -> PassModel:
    """``tf.concat([tf.concat([a, b], axis), c], axis)`` with ``axis`` fed: not a constant
    axis, so not the pattern."""
    import tensorflow as tf

    def fn(x, axis):
        return tf.concat([tf.concat([x, x * 2.0], axis), x * 3.0], axis)

    specs = {"x": am._spec([2, 3]), "axis": am._spec([], "axis", "int32")}
    model = am._traced("fed_axis", fn, specs, np.random.default_rng(0), int_range=(1, 2), signature=("ConcatV2",))
    return PassModel.of(model, 0, refused=0)


CONCAT_FORMS: dict[str, Callable[[], PassModel]] = {
    "slim_inception_v3": slim_inception_v3,
    **{f"{lib}_nested": functools.partial(keras_nested, lib) for lib in ("keras", "tf_keras")},
    "concat_chain": concat_chain,
    "partly_spliced": partly_spliced,
}

CONCAT_REFUSALS: dict[str, Callable[[], PassModel]] = {
    "keras_densenet": keras_densenet,
    "keras_other_axis": functools.partial(keras_nested, "keras", 1),
    "unknown_rank": unknown_rank,
    "fed_axis": fed_axis,
}


# ------------------------------------------------------------------ ConcatV2 -> ConcatV2D


def keras_wide_concat(batch: int | None = 2, width: int = 130, seed: int = 0) -> PassModel:
    """Keras 3 ``Concatenate()`` of ``width`` one-column slices of a ``[batch, width]`` input, each scaled
    by a ``Dense(1)`` (``keras.ops.split``): one ``ConcatV2`` of ``width`` inputs along the last axis.
    With the batch known every input's shape is known and a ConcatV2D takes 63 of them, else 48:
    130 inputs become a tree of runs of 63, 63, 4 (or 48, 48, 34) under one root."""
    import keras

    keras.utils.set_random_seed(seed)
    x = keras.Input((width,), batch_size=batch)
    parts = keras.ops.split(x, width, axis=1)
    dense = keras.layers.Dense(1)
    net = keras.Model(x, keras.layers.Concatenate()([dense(p) for p in parts]))
    am._randomize_keras([dense], seed)
    model = am._traced(f"keras_wide_concat[batch={batch}]", lambda x: net(x), {"x": am._spec([batch, width])},
                       np.random.default_rng(seed), signature=("ConcatV2",))
    limit = 63 if batch is not None else 48
    runs = [min(limit, width - k) for k in range(0, width, limit)]
    return PassModel.of(model, 1, inputs=width, runs=runs)
