"""Group norms as Keras 3, tf_keras, tf_slim and transformers write them, and look-alikes
(instance, layer and batch norms), as ``NormModel`` builders for ``GroupNormFusionPass``
(see ``norm_models``)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from tests.models import activation_models as am
from tests.models.norm_models import HIDDEN, NormModel, params, spec, tf1_graph, traced


def _conv_stack(norms: list, channels: int = 8, image: int = 6, data_format: str = "channels_last",
                batch: int | None = 2):
    """Conv2D (Keras 3) then ``norm`` for each norm of ``norms``, ReLU between."""
    import keras

    keras.utils.set_random_seed(4)
    convs = [keras.layers.Conv2D(channels, 3, padding="same", data_format=data_format) for _ in norms]
    shape = (2, image, image, channels) if data_format == "channels_last" else (2, channels, image, image)
    for conv, norm in zip(convs, norms, strict=True):
        conv.build(shape)
        norm.build(shape)
    am._randomize_keras(convs + norms, 4)
    for norm in norms:  # gammas near 1
        norm.set_weights([w + (1.0 if k == 0 else 0.0) for k, w in enumerate(norm.get_weights())])

    def fn(x):
        for conv, norm in zip(convs, norms, strict=True):
            x = keras.activations.relu(norm(conv(x)))
        return x

    spec_shape = [batch, *shape[1:]]
    return fn, {"x": spec(spec_shape)}


def keras_group_normalization(data_format: str = "channels_last", batch: int | None = 2) -> NormModel:
    """Keras 3 ``GroupNormalization`` after convolutions: groups=4 and groups=channels (8)."""
    import keras

    axis = -1 if data_format == "channels_last" else 1
    norms = [keras.layers.GroupNormalization(groups=4, axis=axis, epsilon=1e-3),
             keras.layers.GroupNormalization(groups=8, axis=axis, epsilon=1e-3)]
    fn, specs = _conv_stack(norms, data_format=data_format, batch=batch)
    layout = "NHWC" if data_format == "channels_last" else "NCHW"
    shapes = None if batch else ("x:2,6,6,8" if layout == "NHWC" else "x:2,8,6,6")
    return traced(f"keras_group_normalization[{layout}{'' if batch else ',batch=None'}]", fn, specs,
                  group_norms=len(norms), signature=("Reshape", "SquaredDifference", "Neg"),
                  attrs={"epsilon": 1e-3, "data_format": layout, "num_groups": [4, 8]}, input_shapes=shapes)


def tf_keras_group_normalization(batch: int | None = 2) -> NormModel:
    """tf_keras ``GroupNormalization`` (``tf.nn.weighted_moments`` with weights of ones)."""
    import tensorflow as tf
    import tf_keras

    tf_keras.utils.set_random_seed(4)
    norms = [tf_keras.layers.GroupNormalization(groups=2, epsilon=1e-3),
             tf_keras.layers.GroupNormalization(groups=4, epsilon=1e-3)]
    for norm in norms:
        norm.build((2, 5, 8))
    am._randomize_keras(norms, 4)
    w = params(64, 11).reshape(8, 8)

    def fn(x):
        for norm in norms:
            x = norm(tf.nn.relu(tf.matmul(x, w)))
        return x

    return traced(f"tf_keras_group_normalization[{'static' if batch else 'batch=None'}]", fn,
                  {"x": spec([batch, 5, 8])}, group_norms=2, signature=("DivNoNan", "Sum", "Reshape"),
                  attrs={"epsilon": 1e-3, "data_format": "NHWC", "num_groups": [2, 4]},
                  input_shapes=None if batch else "x:2,5,8")


def slim_group_norm() -> NormModel:
    """tf_slim ``group_norm`` (groups=4 of 16 channels, NHWC) after a convolution, TF1 graph."""
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1
    rng = np.random.default_rng(5)

    def build():
        x = tf1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
        h = tf_slim.conv2d(x, 16, 3, activation_fn=None, scope="conv")
        h = tf_slim.group_norm(h, groups=4, epsilon=1e-6, scope="gn",
                               param_initializers={"gamma": tf1.random_normal_initializer(1.0, 0.3, seed=5),
                                                   "beta": tf1.random_normal_initializer(0.0, 0.3, seed=6)})
        return {x: rng.normal(size=(2, 6, 6, 3)).astype(np.float32)}, [tf.identity(tf.nn.relu(h), name="out")]

    return tf1_graph("tf_slim_group_norm", build, group_norms=1, signature=("Reshape", "Neg", "Rsqrt"),
                     attrs={"epsilon": 1e-6, "data_format": "NHWC", "num_groups": [4]})


def transformers_speech(kind: str, seed: int = 0) -> NormModel:
    """transformers ``TFWav2Vec2Model`` / ``TFHubertModel`` with ``feat_extract_norm="group"``:
    the first conv layer's ``TFWav2Vec2GroupNorm`` has groups == conv_dim[0] channels (the
    tensorflow-addons shortcut: no reshape); its other norms are Keras layer norms."""
    import tensorflow as tf
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    common = dict(vocab_size=10, hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=32, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
                  feat_extract_norm="group", num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2,
                  do_stable_layer_norm=False, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                  feat_proj_dropout=0.0, layerdrop=0.0, layer_norm_eps=1e-5)
    if kind == "wav2vec2":
        from transformers import TFWav2Vec2Model, Wav2Vec2Config

        model = TFWav2Vec2Model(Wav2Vec2Config(**common), name="wav2vec2")
    else:
        from transformers import HubertConfig, TFHubertModel

        model = TFHubertModel(HubertConfig(**common), name="hubert")
    model({"input_values": tf.ones([2, 400])}, training=False)
    am._perturb_keras(model, seed)

    def fn(input_values):
        return {"last_hidden_state": model({"input_values": input_values}, training=False).last_hidden_state}

    # the config's group norm is the first conv layer's; layer norms: feature projection,
    # encoder, and two per encoder layer
    layer_norms = 2 + 2 * common["num_hidden_layers"]
    return traced(f"transformers_{kind}", fn, {"input_values": spec([2, 400], "input_values")}, seed,
                  group_norms=1, layer_norms=layer_norms, signature=("SquaredDifference", "Reshape"),
                  attrs={"epsilon": 1e-5, "data_format": "NHWC", "num_groups": [common["conv_dim"][0]]})


def wav2vec2_group_norm_layer(groups: int = 2) -> NormModel:
    """transformers ``TFWav2Vec2GroupNorm(groups=2)`` on 8 channels (its grouped path, shapes
    packed from ``tf.shape``) after a Keras 3 ``Conv1D``, unknown batch and time."""
    import keras
    from transformers.models.wav2vec2.modeling_tf_wav2vec2 import TFWav2Vec2GroupNorm

    keras.utils.set_random_seed(6)
    conv = keras.layers.Conv1D(8, 3, padding="same")
    conv.build((2, 6, 4))
    norm = TFWav2Vec2GroupNorm(groups=groups, epsilon=1e-5, name="group_norm")
    norm.build((None, None, 8))
    am._randomize_keras([conv, norm], 6)

    def fn(x):
        return norm(conv(x))

    return traced("wav2vec2_group_norm_layer", fn, {"x": spec([None, None, 4])}, group_norms=1,
                  signature=("Pack", "StridedSlice", "Reshape"), input_shapes="x:2,6,4",
                  attrs={"epsilon": 1e-5, "data_format": "NHWC", "num_groups": [groups]})


def group_norm_decoy(which: str) -> NormModel:
    """Not group norms: tf_slim ``instance_norm`` (NHWC and NCHW; the non-general
    ``ScopeInstanceNormPass`` takes them when enabled), tf_slim ``layer_norm``, Keras 3
    ``BatchNormalization`` (inference) and ``LayerNormalization``, and Keras 3
    ``GroupNormalization(center=False)`` (refused: no beta)."""
    import keras
    import tensorflow as tf
    import tf_slim

    if which in ("instance_norm_nhwc", "instance_norm_nchw", "slim_layer_norm"):
        tf1 = tf.compat.v1
        rng = np.random.default_rng(7)
        nchw = which == "instance_norm_nchw"

        def build():
            x = tf1.placeholder(tf.float32, [2, 8, 5, 5] if nchw else [2, 5, 5, 8], name="x")
            init = {"gamma": tf1.random_normal_initializer(1.0, 0.3, seed=7),
                    "beta": tf1.random_normal_initializer(0.0, 0.3, seed=8)}
            if which == "slim_layer_norm":
                h = tf_slim.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1)
            else:
                h = tf_slim.instance_norm(x, data_format="NCHW" if nchw else "NHWC", param_initializers=init)
            return {x: rng.normal(size=x.shape.as_list()).astype(np.float32)}, [tf.identity(h, name="out")]

        return tf1_graph(f"group_norm_decoy[{which}]", build, layer_norms=int(which == "slim_layer_norm"))
    keras.utils.set_random_seed(8)
    layer = {"batch_norm": keras.layers.BatchNormalization(), "layer_norm": keras.layers.LayerNormalization(),
             "no_beta": keras.layers.GroupNormalization(groups=2, center=False)}[which]
    layer.build((2, 5, 5, 8))
    am._randomize_keras([layer], 8)
    if which == "batch_norm":
        gamma, beta, mean, var = layer.get_weights()
        layer.set_weights([gamma, beta, mean, np.abs(var) + 0.5])

    def fn(x):
        return layer(x, training=False)

    return traced(f"group_norm_decoy[{which}]", fn, {"x": spec([2, 5, 5, 8])},
                  layer_norms=int(which == "layer_norm"), refusal="no beta" if which == "no_beta" else None)


FORMS: dict[str, Callable[[], NormModel]] = {
    "keras_nhwc": keras_group_normalization,
    "keras_nchw": lambda: keras_group_normalization("channels_first"),
    "keras_unknown_batch": lambda: keras_group_normalization(batch=None),
    "tf_keras": tf_keras_group_normalization,
    "tf_keras_unknown_batch": lambda: tf_keras_group_normalization(batch=None),
    "tf_slim": slim_group_norm,
    **{f"transformers_{k}": (lambda k=k: transformers_speech(k)) for k in ("wav2vec2", "hubert")},
    "wav2vec2_group_norm_layer": wav2vec2_group_norm_layer,
}
DECOYS: dict[str, Callable[[], NormModel]] = {
    w: (lambda w=w: group_norm_decoy(w))
    for w in ("instance_norm_nhwc", "instance_norm_nchw", "slim_layer_norm", "batch_norm", "layer_norm", "no_beta")
}
