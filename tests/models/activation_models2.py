"""Frozen graphs with SiLU / swish / quick GELU activations, built by the real libraries
that produce them (TensorFlow, tf_slim, Keras 3, tf_keras, keras-hub, transformers) or,
where the code is not a pip package (TF Model Garden's ``simple_swish``), by the lines
that project writes, as it writes them.

Every builder returns a :class:`PassModel`: an ``activation_models.ActivationModel``
(the frozen graph, a feed, the op types the form is made of) plus how many fused ops
the model's code calls for (``expected``, from its configuration) and the attributes
every one of them must carry.  Sizes are tiny and weights random.  ``softmax_models``,
``concat_models`` and ``epilogue_models`` build theirs with the same two helpers.

``SWISH_FORMS`` and ``SWISH_LOOK_ALIKES`` name every builder, for parametrized tests.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tests.models import activation_models as am
from scopefusion.core.graph.vocabulary import DT_BFLOAT16, DT_FLOAT, DT_HALF


@dataclass(repr=False)
class PassModel(am.ActivationModel):
    """A frozen model, the number of fused ops its code calls for and their attributes."""

    expected: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"PassModel({self.name!r}, expected={self.expected})"

    @classmethod
    def of(cls, model: am.ActivationModel, expected: int, **attrs: Any) -> "PassModel":
        values = {f.name: getattr(model, f.name) for f in dataclasses.fields(model)}
        return cls(**values, expected=expected, attrs=attrs)


def traced(name: str, fn: Callable, shape: list, expected: int, *, dtype: str = "float32", signature=(),
           **attrs: Any) -> PassModel:
    """``fn(x)`` traced over one input ``x`` of ``shape``, frozen."""
    model = am._traced(name, fn, {"x": am._spec(shape, "x", dtype)}, np.random.default_rng(0), signature=signature)
    return PassModel.of(model, expected, **attrs)


# ------------------------------------------------------------------ SiLU / swish


def tf_nn_silu(beta: float | None = None) -> PassModel:
    """``tf.nn.silu(h)`` or ``tf.nn.swish(h, beta)`` of a tensor computed from the input."""
    import tensorflow as tf

    def fn(x):
        h = x * 2.0
        return tf.nn.silu(h) if beta is None else tf.nn.swish(h, beta=beta)

    return traced(f"tf_nn_silu[beta={beta}]", fn, [2, 8], 1, signature=("IdentityN", "Sigmoid"),
                  beta=1.0 if beta is None else beta)


def tf_slim_silu(layers: int = 2, seed: int = 0) -> PassModel:
    """``tf_slim.fully_connected(activation_fn=tf.nn.silu)`` in a TF1 graph (the custom
    gradient's IdentityN is there in graph mode too)."""
    import tensorflow as tf

    build = am.tf_slim_dense_stack(tf.nn.silu, [8] * layers, seed)
    return PassModel.of(am._tf1("tf_slim_silu", build, seed, signature=("IdentityN", "Sigmoid")), layers, beta=1.0)


def keras_silu(library: str, dtype: str | None = None, seed: int = 0) -> PassModel:
    """Keras 3 (``library="keras"``) or tf_keras: ``Dense(16, activation="silu")`` then
    ``Dense(8, activation="swish")``; ``dtype`` is a layer dtype policy (``mixed_float16``,
    ``bfloat16``)."""
    lib = __import__(library)
    lib.utils.set_random_seed(seed)
    kwargs = {"dtype": dtype} if dtype else {}
    layers = [lib.layers.Dense(16, activation="silu", name="gate", **kwargs),
              lib.layers.Dense(8, activation="swish", name="out", **kwargs)]
    for layer, width in zip(layers, (8, 16), strict=True):
        layer.build((2, width))
    am._randomize_keras(layers, seed)
    model = am._traced(f"{library}_silu[{dtype or 'float32'}]", lambda x: layers[1](layers[0](x)),
                       {"x": am._spec([2, 8])}, np.random.default_rng(seed), signature=("IdentityN", "Sigmoid"))
    return PassModel.of(model, len(layers), beta=1.0, T={"mixed_float16": DT_HALF, "bfloat16": DT_BFLOAT16}.get(
        dtype or "", DT_FLOAT))


def keras_hub_llama(num_layers: int = 2, seed: int = 0) -> PassModel:
    """``keras_hub.models.LlamaBackbone``: the gate of every feed-forward is ``silu``."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.LlamaBackbone(vocabulary_size=50, num_layers=num_layers, num_query_heads=2,
                                              num_key_value_heads=1, hidden_dim=8, intermediate_dim=16,
                                              dtype="float32")
    specs = {k: am._spec([2, 6], k, "int32") for k in ("token_ids", "padding_mask")}
    model = am._traced("keras_hub_llama", lambda **f: backbone(f, training=False), specs,
                       np.random.default_rng(seed), int_range=(0, 2), signature=("IdentityN", "Sigmoid"))
    return PassModel.of(model, num_layers, beta=1.0)


def transformers_activation(name: str) -> PassModel:
    """transformers' ``silu`` and ``swish`` (both ``tf.nn.silu``) and ``quick_gelu``
    (``x * sigmoid(1.702 x)``), from ``activations_tf.get_tf_activation``."""
    from transformers import activations_tf

    act = activations_tf.get_tf_activation(name)
    beta = 1.702 if name == "quick_gelu" else 1.0
    return traced(f"transformers_{name}", lambda x: act(x * 2.0), [2, 8], 1, signature=("Sigmoid",), beta=beta)


def transformers_mistral(num_layers: int = 2, seed: int = 0) -> PassModel:
    """``transformers.TFMistralModel`` (``hidden_act="silu"``: one SiLU per layer's MLP)."""
    import tf_keras
    from transformers import MistralConfig, TFMistralModel

    tf_keras.utils.set_random_seed(seed)
    config = MistralConfig(vocab_size=50, hidden_size=8, intermediate_size=16, num_hidden_layers=num_layers,
                           num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16,
                           sliding_window=None, hidden_act="silu")
    fn, specs = am._transformers_model(TFMistralModel(config, name="mistral"), seed, ("input_ids", "attention_mask"))
    model = am._traced("transformers_mistral", fn, specs, np.random.default_rng(seed), int_range=(0, 2),
                       signature=("IdentityN", "Sigmoid"))
    return PassModel.of(model, config.num_hidden_layers, beta=1.0)


def transformers_clip_text(num_layers: int = 2, seed: int = 0) -> PassModel:
    """``transformers.TFCLIPTextModel`` (``hidden_act="quick_gelu"``, after the MLP's fc1)."""
    import tf_keras
    from transformers import CLIPTextConfig, TFCLIPTextModel

    tf_keras.utils.set_random_seed(seed)
    config = CLIPTextConfig(vocab_size=50, hidden_size=8, intermediate_size=16, num_hidden_layers=num_layers,
                            num_attention_heads=2, max_position_embeddings=16, hidden_act="quick_gelu")
    fn, specs = am._transformers_model(TFCLIPTextModel(config, name="clip"), seed, ("input_ids", "attention_mask"))
    model = am._traced("transformers_clip_text", fn, specs, np.random.default_rng(seed), int_range=(0, 2),
                       signature=("Sigmoid",))
    return PassModel.of(model, config.num_hidden_layers, beta=1.702)


def simple_swish(features):
    """TF Model Garden ``official/modeling/activations/swish.py`` ``simple_swish`` (the swish
    without a custom gradient, for SavedModels), written here as there."""
    import tensorflow as tf

    features = tf.convert_to_tensor(features)
    return features * tf.nn.sigmoid(features)


def model_garden_simple_swish() -> PassModel:
    return traced("model_garden_simple_swish", lambda x: simple_swish(x * 2.0), [2, 8], 1, signature=("Sigmoid",),
                  beta=1.0)


def swish_look_alike(which: str) -> PassModel:
    """Not a swish: ``vector_beta``: ``x * sigmoid(b * x)`` with a per-channel ``b`` (a
    Swish takes one number); ``keras_hard_silu``: Keras 3's ``hard_silu`` (``x * relu6(x + 3) / 6``);
    ``glu`` and ``mish``: transformers' activations (``a * sigmoid(b)``, ``x * tanh(softplus(x))``)."""
    import tensorflow as tf

    if which in ("glu", "mish"):
        from transformers import activations_tf

        act = activations_tf.get_tf_activation(which)
        return traced(f"transformers_{which}", lambda x: act(x * 2.0), [2, 8], 0)
    if which == "keras_hard_silu":
        import keras

        return traced(which, lambda x: keras.activations.hard_silu(x * 2.0), [2, 8], 0)
    if which == "vector_beta":
        beta = np.linspace(0.5, 2.0, 8).astype(np.float32)
        return traced(which, lambda x: x * tf.sigmoid(beta * x), [2, 8], 0, signature=("Sigmoid",))
    raise ValueError(which)


def sigmoid_read_elsewhere() -> PassModel:
    """``simple_swish`` whose sigmoid is a graph output of its own too: fusing would lose it."""
    import tensorflow as tf

    def fn(x):
        gate = tf.nn.sigmoid(x)
        return x * gate, gate

    return traced("sigmoid_read_elsewhere", fn, [2, 8], 0, signature=("Sigmoid",))


SWISH_FORMS: dict[str, Callable[[], PassModel]] = {
    "tf_nn_silu": tf_nn_silu,
    "tf_nn_swish_beta": lambda: tf_nn_silu(1.5),
    "tf_slim_silu": tf_slim_silu,
    **{f"{lib}_silu": functools.partial(keras_silu, lib) for lib in ("keras", "tf_keras")},
    **{f"keras_silu_{d}": functools.partial(keras_silu, "keras", d) for d in ("mixed_float16", "bfloat16")},
    "keras_hub_llama": keras_hub_llama,
    **{f"transformers_{a}": functools.partial(transformers_activation, a) for a in ("silu", "swish", "quick_gelu")},
    "transformers_mistral": transformers_mistral,
    "transformers_clip_text": transformers_clip_text,
    "model_garden_simple_swish": model_garden_simple_swish,
}

SWISH_LOOK_ALIKES: dict[str, Callable[[], PassModel]] = {
    w: functools.partial(swish_look_alike, w) for w in ("vector_beta", "keras_hard_silu", "glu", "mish")
}
