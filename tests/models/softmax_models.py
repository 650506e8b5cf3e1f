"""Frozen graphs with softmaxes written out as ops: openai GPT-2's attention (that
repository is not a pip package, so its lines are written here as it writes them),
tf_keras' ``backend.softmax`` over a tuple of axes, TensorFlow's documented formula, and
softmaxes the stock op cannot be or that are not softmaxes at all.

Every builder returns an ``activation_models2.PassModel`` whose ``expected`` counts the
softmaxes of the model's code the stock ``Softmax`` can replace.

``SOFTMAX_FORMS``, ``SOFTMAX_REFUSALS`` and ``SOFTMAX_LOOK_ALIKES`` name every builder,
for parametrized tests.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from tests.models import activation_models as am
from tests.models.activation_models2 import PassModel, traced
from tests.helpers.freeze import freeze_function
from scopefusion.core.graph.vocabulary import DT_HALF


def gpt2_softmax(x, axis=-1):
    """openai/gpt-2 ``src/model.py`` ``softmax`` (written here as there)."""
    import tensorflow as tf

    x = x - tf.reduce_max(x, axis=axis, keepdims=True)
    ex = tf.exp(x)
    return ex / tf.reduce_sum(ex, axis=axis, keepdims=True)


def gpt2_attention(layers: int = 2, n_head: int = 2, n_embd: int = 8, seq: int = 4) -> PassModel:
    """openai/gpt-2's ``multihead_attn`` with its ``mask_attn_weights`` and ``attention_mask``,
    ``split_heads`` and ``merge_heads`` (written here as there, TF1's ``.value`` dropped), on the
    query/key/value projection ``c`` of ``layers`` attention blocks (fed, as ``conv1d``
    would compute it): one softmax over the last axis of [batch, heads, dst, src] each."""
    import tensorflow as tf

    def shape_list(x):
        static = x.shape.as_list()
        dynamic = tf.shape(x)
        return [dynamic[i] if s is None else s for i, s in enumerate(static)]

    def attention_mask(nd, ns, *, dtype):
        i = tf.range(nd)[:,None]
        j = tf.range(ns)
        m = i >= j - ns + nd
        return tf.cast(m, dtype)

    def split_states(x, n):
        *start, m = shape_list(x)
        return tf.reshape(x, start + [n, m//n])

    def merge_states(x):
        *start, a, b = shape_list(x)
        return tf.reshape(x, start + [a*b])

    def split_heads(x):
        return tf.transpose(split_states(x, n_head), [0, 2, 1, 3])

    def merge_heads(x):
        return merge_states(tf.transpose(x, [0, 2, 1, 3]))

    def mask_attn_weights(w):
        _, _, nd, ns = shape_list(w)
        b = attention_mask(nd, ns, dtype=w.dtype)
        b = tf.reshape(b, [1, 1, nd, ns])
        w = w*b - tf.cast(1e10, w.dtype)*(1-b)
        return w

    def multihead_attn(q, k, v):
        w = tf.matmul(q, k, transpose_b=True)
        w = w * tf.math.rsqrt(tf.cast(v.shape[-1], w.dtype))
        w = mask_attn_weights(w)
        w = gpt2_softmax(w)
        a = tf.matmul(w, v)
        return a

    def fn(x):
        out = []
        for layer in range(layers):
            c = x * float(layer + 1)
            q, k, v = map(split_heads, tf.split(c, 3, axis=2))
            out.append(merge_heads(multihead_attn(q, k, v)))
        return tf.add_n(out)

    return traced("gpt2_attention", fn, [2, seq, 3 * n_embd], layers, signature=("Max", "Sub", "Exp", "Sum", "RealDiv"))


def tf_keras_softmax(axis: tuple[int, ...]) -> PassModel:
    """``tf_keras.activations.softmax(h, axis=<tuple>)``: ``backend.softmax`` writes a tuple
    of axes out as ops, as GPT-2 does (a single int would be the stock op)."""
    import tf_keras

    last = axis in ((-1,), (2,))
    return traced(f"tf_keras_softmax[axis={axis}]", lambda x: tf_keras.activations.softmax(x * 2.0, axis=axis),
                  [2, 3, 8], int(last), signature=("Max", "Exp", "Sum", "RealDiv"))


def documented_softmax(logits, axis=-1):
    """TensorFlow's documentation of ``tf.nn.softmax`` (``nn_ops.py``): the formula it gives
    for the op, written here as there: no maximum subtracted, ``exp`` taken twice."""
    import tensorflow as tf

    return tf.exp(logits) / tf.reduce_sum(tf.exp(logits), axis, keepdims=True)


def softmax_refusal(which: str) -> PassModel:
    """Softmaxes the stock op cannot be: ``axis_1``: GPT-2's over axis 1 of a rank-3 tensor;
    ``max_other_axis``: the maximum over axis 1 but the sum over the last; ``unknown_rank``:
    GPT-2's over axis 1 of an input whose rank is unknown; ``complex``: the documented
    formula on complex64 numbers (Exp, Sum and RealDiv take them, Softmax does not);
    ``exp_read_elsewhere``: GPT-2's whose exponential is a graph output too."""
    import tensorflow as tf

    if which == "axis_1":
        return traced(which, lambda x: gpt2_softmax(x * 2.0, axis=1), [2, 3, 8], 0)
    if which == "max_other_axis":
        def fn(x):
            ex = tf.exp(x - tf.reduce_max(x, axis=1, keepdims=True))
            return ex / tf.reduce_sum(ex, axis=-1, keepdims=True)

        return traced(which, fn, [2, 3, 8], 0)
    if which == "exp_read_elsewhere":
        def fn(x):
            ex = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
            return ex / tf.reduce_sum(ex, axis=-1, keepdims=True), ex

        return traced(which, fn, [2, 3, 8], 0)
    if which == "complex":
        return traced(which, lambda x: documented_softmax(x), [2, 3, 8], 0, dtype="complex64")
    if which == "unknown_rank":  # traced over a TensorSpec of unknown rank, fed [2, 3, 8]
        graph_def, outputs, _ = freeze_function(lambda x: gpt2_softmax(x * 2.0, axis=1),
                                                       {"x": am._spec(None)})
        feeds = {"x:0": np.random.default_rng(0).normal(size=(2, 3, 8)).astype(np.float32)}
        return PassModel(graph_def, feeds, outputs, name=which, input_shapes="x:2,3,8")
    raise ValueError(which)


def softmax_look_alike(which: str) -> PassModel:
    """Not the pattern: ``keras_axes``: Keras 3's ``Softmax(axis=(1, 2))`` (exp minus
    log-sum-exp); ``stock``: ``tf.nn.softmax`` (already the op); ``masked``: the exponential
    masked before it is summed; ``epsilon``: a constant added to the sum; ``sum_no_keepdims``:
    GPT-2's with the sum's ``keepdims`` dropped (it broadcasts along another axis)."""
    import tensorflow as tf

    if which == "keras_axes":
        import keras

        return traced(which, lambda x: keras.layers.Softmax(axis=(1, 2))(x * 2.0), [2, 3, 8], 0)
    if which == "stock":
        return traced(which, lambda x: tf.nn.softmax(x * 2.0), [2, 3, 8], 0)
    mask = (np.arange(8) % 3 != 0).astype(np.float32)

    def fn(x):
        ex = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
        if which == "masked":
            ex = ex * mask
            return ex / tf.reduce_sum(ex, axis=-1, keepdims=True)
        if which == "epsilon":
            return ex / (tf.reduce_sum(ex, axis=-1, keepdims=True) + 1e-9)
        if which == "sum_no_keepdims":
            return ex / tf.reduce_sum(ex, axis=-1)
        raise ValueError(which)

    return traced(which, fn, [8, 8], 0)


SOFTMAX_FORMS: dict[str, Callable[[], PassModel]] = {
    "gpt2_attention": gpt2_attention,
    "gpt2_softmax_float16": lambda: traced("gpt2_softmax_float16", lambda x: gpt2_softmax(x * 2.0), [2, 3, 8], 1,
                                           dtype="float16", signature=("Max", "Exp", "Sum", "RealDiv"), T=DT_HALF),
    **{f"tf_keras_axis_{a[0]}": functools.partial(tf_keras_softmax, a) for a in ((-1,), (2,))},
    "documented": lambda: traced("documented", lambda x: documented_softmax(x * 2.0), [2, 3, 8], 1,
                                 signature=("Exp", "Sum", "RealDiv")),
}

SOFTMAX_REFUSALS: dict[str, Callable[[], PassModel]] = {
    **{w: functools.partial(softmax_refusal, w) for w in ("axis_1", "max_other_axis", "unknown_rank", "complex",
                                                                  "exp_read_elsewhere")},
    "tf_keras_axes_1_2": functools.partial(tf_keras_softmax, (1, 2)),
    "tf_keras_axis_1": functools.partial(tf_keras_softmax, (1,)),
}

SOFTMAX_LOOK_ALIKES: dict[str, Callable[[], PassModel]] = {
    w: functools.partial(softmax_look_alike, w) for w in ("keras_axes", "stock", "masked", "epsilon",
                                                           "sum_no_keepdims")
}
