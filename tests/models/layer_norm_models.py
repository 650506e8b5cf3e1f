"""Layer norms written without a scope of their own, and their look-alikes, as
``NormModel`` builders for ``LayerNormFusionPass`` (see ``norm_models``)."""
from __future__ import annotations

from typing import Callable


from tests.models import activation_models as am
from tests.models.norm_models import HIDDEN, NormModel, encoder, params, spec, traced


def hand_written_layer_norm(spelling: str, layers: int = 2, axis: int = -1, batch: int | None = 2) -> NormModel:
    """Layer norms written with TensorFlow ops at the top level, ``layers`` of them:

    ``rsqrt``: ``mean = tf.reduce_mean(x, axis, keepdims=True)``, ``var =
    tf.reduce_mean(tf.square(x - mean), axis, keepdims=True)``, ``(x - mean) *
    tf.math.rsqrt(var + eps) * gamma + beta``; ``reduce_variance``: ``var =
    tf.math.reduce_variance(x, axis, keepdims=True)`` and ``(x - mean) / tf.sqrt(var + eps)
    * gamma + beta``; ``moments``: ``tf.nn.moments(x, [axis], keepdims=True)`` and the
    rsqrt formula; ``batch_normalization``: ``tf.nn.moments`` then
    ``tf.nn.batch_normalization(x, mean, var, beta, gamma, eps)``."""
    import tensorflow as tf

    eps = 1e-5

    def norm(x, i):
        gamma, beta = params(HIDDEN, 10 + i, 1.0), params(HIDDEN, 20 + i)
        if spelling in ("rsqrt", "reduce_variance"):
            mean = tf.reduce_mean(x, axis, keepdims=True)
            if spelling == "rsqrt":
                var = tf.reduce_mean(tf.square(x - mean), axis, keepdims=True)
                return (x - mean) * tf.math.rsqrt(var + eps) * gamma + beta
            var = tf.math.reduce_variance(x, axis, keepdims=True)
            return (x - mean) / tf.sqrt(var + eps) * gamma + beta
        mean, var = tf.nn.moments(x, [axis], keepdims=True)
        if spelling == "moments":
            return (x - mean) * tf.math.rsqrt(var + eps) * gamma + beta
        return tf.nn.batch_normalization(x, mean, var, beta, gamma, eps)

    signatures = {"rsqrt": ("Mean", "Square", "Rsqrt"), "reduce_variance": ("Mean", "Sqrt", "RealDiv"),
                  "moments": ("SquaredDifference", "StopGradient", "Rsqrt"),
                  "batch_normalization": ("SquaredDifference", "Rsqrt", "Sub")}
    fn, specs = encoder(norm, layers, batch)
    suffix = "" if batch else ",batch=None"
    return traced(f"hand_written[{spelling},axis={axis}{suffix}]", fn, specs, graph_layer_norms=layers,
                  layer_norms=layers, signature=signatures[spelling],
                  attrs={"begin_norm_axis": axis, "begin_params_axis": -1, "epsilon": eps},
                  input_shapes=None if batch else f"x:2,4,{HIDDEN}")


def shared_scale_and_offset(layers: int = 2) -> NormModel:
    """``tf.nn.moments`` + ``tf.nn.batch_normalization(x, mean, var, p, p, eps)``: one tensor ``p``
    is both the offset and the scale (beta and gamma), ``layers`` times."""
    import tensorflow as tf

    def norm(x, i):
        p = tf.constant(params(HIDDEN, 30 + i, 1.0), name=f"scale_and_offset_{i}")
        mean, var = tf.nn.moments(x, [-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, var, p, p, 1e-5)

    fn, specs = encoder(norm, layers)
    return traced("shared_scale_and_offset", fn, specs, graph_layer_norms=layers, layer_norms=layers,
                  signature=("SquaredDifference", "Rsqrt", "Sub"),
                  attrs={"begin_norm_axis": -1, "begin_params_axis": -1, "epsilon": 1e-5})


def keras_layer_norm_merged_weights() -> NormModel:
    """Keras 3 ``LayerNormalization`` whose gamma and beta hold the same values, frozen and then
    optimized by Grappler's ``common_subgraph_elimination``, which makes them one tensor (one
    constant, one Reshape) read as both."""
    import keras

    from tests.helpers.grappler import merge_common_subgraphs

    layer = keras.layers.LayerNormalization(epsilon=1e-3)
    layer.build((2, 4, HIDDEN))
    p = params(HIDDEN, 40, 1.0)
    layer.set_weights([p, p])
    m = traced("keras_layer_norm_merged_weights", lambda x: layer(x), {"x": spec([2, 4, HIDDEN])},
               graph_layer_norms=1, attrs={"begin_norm_axis": -1, "begin_params_axis": -1, "epsilon": 1e-3})
    m.graph_def = merge_common_subgraphs(m.graph_def, m.outputs)
    return m


def transformers_functional_layernorm(layers: int = 2) -> NormModel:
    """``transformers.tf_utils.functional_layernorm(x, weight, bias, epsilon, axis=-1)``
    (``tf.nn.moments`` + ``tf.nn.batch_normalization``, no scope of its own), ``layers`` times."""
    import tensorflow as tf
    from transformers.tf_utils import functional_layernorm

    def norm(x, i):
        w, b = tf.constant(params(HIDDEN, 30 + i, 1.0)), tf.constant(params(HIDDEN, 40 + i))
        return functional_layernorm(x, w, b, epsilon=1e-6, axis=-1)

    fn, specs = encoder(norm, layers)
    return traced("transformers_functional_layernorm", fn, specs, graph_layer_norms=layers, layer_norms=layers,
                  signature=("SquaredDifference", "Rsqrt"),
                  attrs={"begin_norm_axis": -1, "begin_params_axis": -1, "epsilon": 1e-6})


def keras_ops_layer_normalization(layers: int = 2) -> NormModel:
    """``keras.ops.layer_normalization(x, gamma, beta, axis=-1, epsilon=1e-5)`` called in a
    traced function (Keras 3, TensorFlow backend): no layer, so no scope; gamma and beta are
    reshaped to the input's rank with leading 1s."""
    import keras

    def norm(x, i):
        return keras.ops.layer_normalization(x, params(HIDDEN, 50 + i, 1.0), params(HIDDEN, 60 + i), axis=-1,
                                             epsilon=1e-5)

    fn, specs = encoder(norm, layers)
    return traced("keras_ops_layer_normalization", fn, specs, graph_layer_norms=layers, layer_norms=layers,
                  signature=("SquaredDifference", "Rsqrt", "Reshape", "Neg"),
                  attrs={"begin_norm_axis": -1, "begin_params_axis": -1, "epsilon": 1e-5})


def deberta_layer_norm_call(layers: int = 2) -> NormModel:
    """transformers ``TFDebertaLayerNorm`` ("epsilon inside the square root"), its ``call``
    run without the layer's scope: ``gamma * (x - mean) / sqrt(variance + eps) + beta``."""
    from transformers.models.deberta.modeling_tf_deberta import TFDebertaLayerNorm

    norms = []
    for i in range(layers):
        layer = TFDebertaLayerNorm(HIDDEN, eps=1e-7, name=f"LayerNorm_{i}")
        layer.build((None, HIDDEN))
        layer.set_weights([params(HIDDEN, 70 + i, 1.0), params(HIDDEN, 80 + i)])
        norms.append(layer)
    fn, specs = encoder(lambda x, i: norms[i].call(x), layers)
    return traced("deberta_layer_norm_call", fn, specs, graph_layer_norms=layers, layer_norms=layers,
                  signature=("Mean", "Square", "Sqrt", "RealDiv"),
                  attrs={"begin_norm_axis": -1, "begin_params_axis": -1, "epsilon": 1e-7})


def statistics_read_outside() -> NormModel:
    """``tf.nn.moments`` + ``tf.nn.batch_normalization``, with the mean and the variance also
    returned (a model that exposes its statistics): the LayerNorm's mean and variance outputs."""
    import tensorflow as tf

    gamma, beta = params(HIDDEN, 1, 1.0), params(HIDDEN, 2)

    def fn(x):
        mean, var = tf.nn.moments(x, [-1], keepdims=True)
        y = tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-5)
        return {"y": y, "mean": mean * 1.0, "variance": var + 0.0}

    return traced("statistics_read_outside", fn, {"x": spec([2, 4, HIDDEN])}, graph_layer_norms=1,
                  layer_norms=1, signature=("SquaredDifference",),
                  attrs={"begin_norm_axis": -1, "begin_params_axis": -1, "epsilon": 1e-5})


def scope_pass_first() -> NormModel:
    """transformers ``TFBertModel`` (tf_keras ``LayerNormalization`` layers, each in its own
    scope): the scope pass fuses all 2 * layers + 1; the graph pass finds none left."""
    m = am.transformers_bert(num_layers=2)
    return NormModel(m.graph_def, m.inputs, m.outputs, name="transformers_bert", layer_norms=5,
                     graph_layer_norms=0, signature=("Rsqrt",), int_range=m.int_range)


def layer_norm_refusal(which: str) -> NormModel:
    """Layer-norm look-alikes at the top level that LayerNorm cannot take (refused):

    ``no_gamma`` / ``no_beta``: ``tf.nn.batch_normalization`` with ``scale=None`` /
    ``offset=None``; ``epsilon_on_std``: ``(x - mean) / (tf.sqrt(var) + eps) * gamma + beta``;
    ``uncentred``: ``x * tf.math.rsqrt(tf.math.reduce_variance(x) + eps) * gamma + beta``;
    ``channels_first``: transformers ``functional_layernorm(..., axis=1)`` on NCHW data, as
    ``TFSamLayerNorm(data_format="channels_first")`` calls it; ``rstd_read_outside``: the
    hand-written form whose ``rsqrt(var + eps)`` is also returned; ``no_beta_residual``: the
    hand-written form without beta, ``h = (x - mean) * rsqrt(var + eps) * gamma``, followed by a
    residual block ``h + relu(h @ w)`` (whose sum looks like the offset Add)."""
    import tensorflow as tf
    from transformers.tf_utils import functional_layernorm

    gamma, beta, eps = params(HIDDEN, 3, 1.0), params(HIDDEN, 4), 1e-5
    shape = [2, HIDDEN, 3, 3] if which == "channels_first" else [2, 4, HIDDEN]

    def fn(x):
        if which == "channels_first":
            return functional_layernorm(x, tf.constant(gamma), tf.constant(beta), epsilon=eps, axis=1)
        mean, var = tf.nn.moments(x, [-1], keepdims=True)
        if which == "no_gamma":
            return tf.nn.batch_normalization(x, mean, var, beta, None, eps)
        if which == "no_beta":
            return tf.nn.batch_normalization(x, mean, var, None, gamma, eps)
        if which == "epsilon_on_std":
            return (x - mean) / (tf.sqrt(var) + eps) * gamma + beta
        if which == "uncentred":
            return x * tf.math.rsqrt(tf.math.reduce_variance(x, -1, keepdims=True) + eps) * gamma + beta
        if which == "no_beta_residual":
            h = (x - mean) * tf.math.rsqrt(var + eps) * gamma
            return h + tf.nn.relu(tf.matmul(h, tf.constant(params(HIDDEN * HIDDEN, 5).reshape(HIDDEN, HIDDEN))))
        if which == "rstd_read_outside":
            rstd = tf.math.rsqrt(var + eps)
            return {"y": (x - mean) * rstd * gamma + beta, "rstd": rstd * 1.0}
        raise ValueError(which)

    reasons = {"no_gamma": "no gamma", "no_beta": "no beta", "epsilon_on_std": "standard deviation",
               "uncentred": "not x - mean", "channels_first": "not the trailing axes",
               "rstd_read_outside": "also read by", "no_beta_residual": "no beta: the normalization ends at"}
    return traced(f"refusal[{which}]", fn, {"x": spec(shape)}, refusal=reasons[which], signature=("Mean",))


FORMS: dict[str, Callable[[], NormModel]] = {
    **{f"hand_written_{s}": (lambda s=s: hand_written_layer_norm(s))
       for s in ("rsqrt", "reduce_variance", "moments", "batch_normalization")},
    "hand_written_positive_axis": lambda: hand_written_layer_norm("rsqrt", axis=2),
    "hand_written_unknown_batch": lambda: hand_written_layer_norm("batch_normalization", batch=None),
    "transformers_functional_layernorm": transformers_functional_layernorm,
    "keras_ops_layer_normalization": keras_ops_layer_normalization,
    "deberta_layer_norm_call": deberta_layer_norm_call,
    "statistics_read_outside": statistics_read_outside,
}
DECOYS: dict[str, Callable[[], NormModel]] = {
    **{f"refusal_{w}": (lambda w=w: layer_norm_refusal(w))
       for w in ("no_gamma", "no_beta", "epsilon_on_std", "uncentred", "channels_first", "rstd_read_outside",
                 "no_beta_residual")},
    "scope_pass_first_transformers_bert": scope_pass_first,
}
