"""Training graphs: the gradients of a loss through a layer norm, made by ``tf.gradients`` (tf_slim,
TF1 style) or ``tf.GradientTape`` (tf_keras, Keras 3, traced in a ``tf.function``), frozen with random
weights.  Each graph's outputs are the gradients: of the input, then of every trainable variable.

Each builder returns an ``activation_models2.PassModel`` whose ``expected`` counts the layer norms
whose gradient becomes a ``LayerNormGrad``, and whose ``attrs`` say how many ``LayerNorm`` the
forward becomes (``forward``), and, for look-alikes, the reason (``reason``).  ``GRAD_FORMS`` and
``GRAD_LOOK_ALIKES`` name every builder.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from tests.models import activation_models as am
from tests.models.activation_models2 import PassModel
from tests.helpers.freeze import freeze_graph, random_variables

SHAPE = [2, 3, 8]


def slim_gradients(residual: bool = False, seed: int = 0) -> PassModel:
    """tf_slim ``layer_norm`` of ``x * 2`` (random gamma and beta), a loss ``sum(tanh(y) * w)``, and
    ``tf.gradients`` of it with respect to x, gamma and beta.  With ``residual`` the loss reads
    ``y + h`` too, so x's gradient sums the layer norm's contributions and the residual's in one
    AddN."""
    import tensorflow as tf
    import tf_slim as slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        x = tf1.placeholder(tf.float32, SHAPE, name="x")
        h = x * 2.0
        y = slim.layer_norm(h, begin_norm_axis=-1, begin_params_axis=-1)
        out = y + h if residual else y
        loss = tf.reduce_sum(tf.tanh(out) * tf.constant(rng.normal(size=SHAPE[-1]).astype(np.float32)))
        grads = tf.gradients(loss, [x, *tf1.trainable_variables()])
        return {x: rng.normal(size=SHAPE).astype(np.float32)}, [tf.identity(g) for g in grads]

    graph_def, feeds, outputs = freeze_graph(build, seed, initialize=random_variables(seed))
    model = am.ActivationModel(graph_def, feeds, outputs, name=f"slim_gradients[residual={residual}]",
                               signature=("RsqrtGrad", "AddN"))
    return PassModel.of(model, 1, forward=1)


def _tape(name: str, layer_of: Callable[[], object], seed: int, *, rms: bool = False,
          signature: tuple[str, ...] = ("RsqrtGrad",), shape: list[int | None] = SHAPE) -> am.ActivationModel:
    """``GradientTape`` gradients of ``sum(tanh(layer(x * 2)) * w)`` with respect to x and the layer's
    weights, traced and frozen (the weights random)."""
    import tensorflow as tf

    layer = layer_of()
    layer.build(shape)
    rng = np.random.default_rng(seed)
    w = tf.constant(_random_weights(layer, rng))

    def fn(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.tanh(layer(x * 2.0)) * w)
        return tape.gradient(loss, [x, *layer.trainable_variables])

    return am._traced(name, fn, {"x": am._spec(shape)}, rng, signature=signature)


def keras_tape(library: str, seed: int = 0) -> PassModel:
    """Keras 3 (``library="keras"``) or tf_keras ``LayerNormalization(epsilon=1e-6)`` (tf_keras, at an
    epsilon below 1.001e-5, writes tf.nn.moments and tf.nn.batch_normalization; Keras 3 its own
    ops), through ``GradientTape``.  Keras 3 multiplies by gamma reshaped to the input's rank, which
    the gradient reads: the fused gradient takes gamma itself."""
    lib = __import__(library)
    model = _tape(f"{library}_tape", lambda: lib.layers.LayerNormalization(epsilon=1e-6), seed)
    return PassModel.of(model, 1, forward=1)


def tf_keras_fused_tape(epsilon: float = 1e-3, dynamic: bool = False, seed: int = 0) -> PassModel:
    """tf_keras ``LayerNormalization`` at an epsilon of 1.001e-5 or more (its default, 1e-3): the forward
    reshapes x to ``[1, rows, features, 1]`` and normalises it with a training-mode NCHW
    ``FusedBatchNormV3``; its gradient is a ``FusedBatchNormGradV3`` between two reshapes, and the
    gamma and beta products' gradients.  The forward stays as it is (the scope stage refuses it while
    its gradient reads its batch statistics; the graph stage has no form for it).  With ``dynamic`` the
    batch is unknown: the gradient reshapes dy * gamma to the ``Shape`` of the forward's normalised
    tensor rather than to a constant."""
    import tf_keras

    model = _tape(f"tf_keras_fused_tape[epsilon={epsilon:g}, dynamic={dynamic}]",
                  lambda: tf_keras.layers.LayerNormalization(epsilon=epsilon), seed,
                  signature=("FusedBatchNormV3", "FusedBatchNormGradV3"),
                  shape=[None, *SHAPE[1:]] if dynamic else SHAPE)
    return PassModel.of(model, 1, forward=0, epsilon=epsilon)


def twice_tape(library: str, epsilon: float, same_input: bool = False, seed: int = 0) -> PassModel:
    """One ``LayerNormalization`` called twice inside a ``GradientTape``: ``ln(tanh(ln(x * 2)) * 3)``, or with
    ``same_input`` ``ln(h) + 0.5 * ln(h)``.  tf_keras puts both calls in the layer's one name scope
    (``layer_normalization/batchnorm`` and ``batchnorm_1``, or two ``FusedBatchNormV3``), so both
    gradients lie in ``gradient_tape/layer_normalization``; Keras 3 numbers the calls' scopes.  Chained
    calls are two pieces of that scope's dataflow, each with its own normaliser gradient: both fused.
    Calls of one input read the same x and the same dy: refused with the reason."""
    import tensorflow as tf

    lib = __import__(library)
    layer = lib.layers.LayerNormalization(epsilon=epsilon)
    layer.build(SHAPE)
    rng = np.random.default_rng(seed)
    w = tf.constant(_random_weights(layer, rng))

    def fn(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            h = x * 2.0
            y = layer(h) + 0.5 * layer(h) if same_input else layer(tf.tanh(layer(h)) * 3.0)
            loss = tf.reduce_sum(tf.tanh(y) * w)
        return tape.gradient(loss, [x, *layer.trainable_variables])

    signature = ("FusedBatchNormGradV3",) if epsilon >= 1.001e-5 and library == "tf_keras" else ("RsqrtGrad",)
    model = am._traced(f"{library}_twice_tape[epsilon={epsilon:g}, same_input={same_input}]", fn,
                       {"x": am._spec(SHAPE)}, rng, signature=signature)
    if same_input:
        return PassModel.of(model, 0, forward=0, reason="calls of a layer that read the same tensor")
    return PassModel.of(model, 2, forward=2 if signature == ("RsqrtGrad",) else 0, epsilon=epsilon)


def batch_norm_tape(trick: bool, seed: int = 0) -> PassModel:
    """Look-alikes of the fused path's gradient: ``tf.compat.v1.nn.fused_batch_norm`` in training mode
    under a name scope, with a learnt scale and offset, differentiated with ``GradientTape``.  With
    ``trick``, x reshaped to ``[1, rows, features, 1]`` NCHW as tf_keras does, but scaled per row (a batch
    norm over rows); without, x as ``[2, 3, 1, 8]`` NHWC (a batch norm over features)."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    channels = SHAPE[0] * SHAPE[1] if trick else SHAPE[-1]
    scale = tf.Variable(rng.normal(1.0, 0.5, channels).astype(np.float32), name="scale")
    offset = tf.Variable(rng.normal(0.0, 0.5, channels).astype(np.float32), name="offset")
    w = tf.constant(rng.normal(size=SHAPE[-1]).astype(np.float32))
    shape, data_format = ([1, channels, SHAPE[-1], 1], "NCHW") if trick else ([SHAPE[0], SHAPE[1], 1, SHAPE[2]], "NHWC")

    def fn(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            with tf.name_scope("batch_norm"):
                y, _, _ = tf.compat.v1.nn.fused_batch_norm(tf.reshape(x * 2.0, shape), scale, offset, epsilon=1e-3,
                                                           is_training=True, data_format=data_format)
                y = tf.reshape(y, SHAPE)
            loss = tf.reduce_sum(tf.tanh(y) * w)
        return tape.gradient(loss, [x, scale, offset])

    model = am._traced(f"batch_norm_tape[trick={trick}]", fn, {"x": am._spec(SHAPE)}, rng,
                       signature=("FusedBatchNormGradV3",))
    reason = "scales or shifts by more than ones and zeros: the gradient of a batch norm" if trick \
        else "the gradient of a NHWC batch norm, not of tf_keras' NCHW layer-norm trick"
    return PassModel.of(model, 0, forward=0, reason=reason)


def keras_rms_tape(seed: int = 0) -> PassModel:
    """Keras 3 ``LayerNormalization(rms_scaling=True)``: ``x * rsqrt(variance + eps) * gamma``, no mean
    subtracted from x (and no beta): its gradient has an RsqrtGrad, but it is no layer norm's."""
    import keras

    model = _tape("keras_rms_tape", lambda: keras.layers.LayerNormalization(epsilon=1e-6, rms_scaling=True), seed)
    return PassModel.of(model, 0, forward=0,
                        reason="it does not subtract the mean (RMS-style scaling), not a layer norm")


def inference(seed: int = 0) -> PassModel:
    """The tf_slim layer norm alone, no gradient: an inference graph (its forward becomes a LayerNorm
    in the scope stage; the gradient pass finds nothing)."""
    import tensorflow as tf
    import tf_slim as slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)

    def build():
        x = tf1.placeholder(tf.float32, SHAPE, name="x")
        return {x: rng.normal(size=SHAPE).astype(np.float32)}, [tf.identity(slim.layer_norm(x * 2.0))]

    model = am._tf1("inference", build, seed, signature=("Rsqrt",))
    return PassModel.of(model, 0, forward=1)


GRAD_FORMS: dict[str, Callable[[], PassModel]] = {
    "slim_gradients": slim_gradients,
    "slim_gradients_residual": functools.partial(slim_gradients, True),
    "tf_keras_tape": functools.partial(keras_tape, "tf_keras"),
    "keras_tape": functools.partial(keras_tape, "keras"),
    "tf_keras_fused_tape": tf_keras_fused_tape,
    "tf_keras_fused_tape_dynamic_batch": functools.partial(tf_keras_fused_tape, dynamic=True),
    "tf_keras_twice_tape": functools.partial(twice_tape, "tf_keras", 1e-6),
    "tf_keras_fused_twice_tape": functools.partial(twice_tape, "tf_keras", 1e-3),
    "keras_twice_tape": functools.partial(twice_tape, "keras", 1e-6),
}
GRAD_LOOK_ALIKES: dict[str, Callable[[], PassModel]] = {
    "keras_rms_tape": keras_rms_tape,
    "inference": inference,
    "batch_norm_trick_tape": functools.partial(batch_norm_tape, True),
    "batch_norm_nhwc_tape": functools.partial(batch_norm_tape, False),
    "tf_keras_twice_same_input_tape": functools.partial(twice_tape, "tf_keras", 1e-6, True),
}


def _random_weights(layer: Any, rng: np.random.Generator) -> Any:
    """Random weights for a built layer norm (gamma about 1, beta about 0), and the random vector the
    loss weighs its outputs by."""
    for weight in layer.weights:
        weight.assign(rng.normal(1.0 if "gamma" in weight.name else 0.0, 0.5, weight.shape).astype(np.float32))
    return rng.normal(size=SHAPE[-1]).astype(np.float32)
