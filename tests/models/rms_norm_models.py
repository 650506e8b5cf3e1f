"""RMS norms as Keras 3, keras-hub and transformers write them, and look-alikes, as
``NormModel`` builders for ``RMSNormFusionPass`` (see ``norm_models``)."""
from __future__ import annotations

from typing import Callable


from tests.models import activation_models as am
from tests.models.corpus_models import _count_layers
from tests.models.norm_models import HIDDEN, NormModel, encoder, ids, params, spec, traced


def keras_rms_normalization(layers: int = 2, policy: str = "float32") -> NormModel:
    """Keras 3 ``RMSNormalization`` (``keras.ops.rms_normalization``) after each of ``layers``
    Dense layers; ``policy="mixed_float16"`` computes in float32 between casts."""
    import keras

    keras.utils.set_random_seed(3)
    keras.config.set_dtype_policy(policy)
    try:
        blocks = [(keras.layers.Dense(HIDDEN), keras.layers.RMSNormalization(epsilon=1e-6)) for _ in range(layers)]
        for dense, rms in blocks:
            dense.build((2, 4, HIDDEN))
            rms.build((2, 4, HIDDEN))
    finally:
        keras.config.set_dtype_policy("float32")
    for _, rms in blocks:
        rms.set_weights([params(HIDDEN, 5, 1.0)])

    def fn(x):
        for dense, rms in blocks:
            x = rms(dense(x))
        return x

    dtype = "float16" if policy == "mixed_float16" else "float32"
    return traced(f"keras_rms_normalization[{policy}]", fn, {"x": spec([2, 4, HIDDEN], dtype=dtype)},
                  rms_norms=layers, signature=("Square", "Mean", "Rsqrt"),
                  attrs={"epsilon": 1e-6, "axes": [-1], "T": 1})


def keras_hub_backbone(kind: str, num_layers: int = 2, seed: int = 0) -> NormModel:
    """keras-hub ``GemmaBackbone`` (``x * reciprocal(sqrt(var + eps)) * (1 + scale)``),
    ``LlamaBackbone`` / ``MistralBackbone`` (``x * rsqrt(mean(pow(x, 2)) + eps) * scale``):
    two RMS norms per decoder layer and a final one, counted from the built layers."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(seed)
    common = dict(vocabulary_size=50, num_layers=num_layers, num_query_heads=2, num_key_value_heads=1,
                  hidden_dim=HIDDEN, intermediate_dim=32)
    if kind == "gemma":
        from keras_hub.src.models.gemma.rms_normalization import RMSNormalization as norm_class
        backbone = keras_hub.models.GemmaBackbone(head_dim=8, **common)
        signature = ("Reciprocal", "Sqrt")
    elif kind == "llama":
        from keras_hub.src.models.llama.llama_layernorm import LlamaLayerNorm as norm_class
        backbone = keras_hub.models.LlamaBackbone(**common)
        signature = ("Pow", "Rsqrt")
    else:
        from keras_hub.src.models.mistral.mistral_layer_norm import MistralLayerNormalization as norm_class
        backbone = keras_hub.models.MistralBackbone(**common)
        signature = ("Pow", "Rsqrt")
    am._perturb_keras(backbone, seed, scale=0.1)
    count = _count_layers(backbone, norm_class)
    assert count == 2 * num_layers + 1, count  # the architecture: pre-attention, pre-FFW, final

    def fn(**features):
        return backbone(features, training=False)

    return traced(f"keras_hub_{kind}", fn, ids("token_ids", "padding_mask"), seed, rms_norms=count,
                  signature=signature, int_range=(0, 2), attrs={"epsilon": 1e-6, "axes": [-1], "T": 1})


def transformers_rms(kind: str, num_layers: int = 2, seed: int = 0) -> NormModel:
    """transformers ``TFT5EncoderModel`` (``TFT5LayerNorm``: ``w * (x * rsqrt(mean(x^2) + eps))``)
    or ``TFMistralModel`` (``TFMistralRMSNorm``: ``w * (x / sqrt(mean(x^2) + eps))``): one norm
    before each attention and feed-forward sub-layer and a final one."""
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    if kind == "t5":
        from transformers import T5Config, TFT5EncoderModel

        config = T5Config(vocab_size=50, d_model=HIDDEN, d_kv=8, d_ff=32, num_layers=num_layers, num_heads=2,
                          dropout_rate=0.0, layer_norm_epsilon=1e-6)
        model, count, eps = TFT5EncoderModel(config, name="t5"), 2 * config.num_layers + 1, config.layer_norm_epsilon
        signature = ("Square", "Rsqrt")
    else:
        from transformers import MistralConfig, TFMistralModel

        config = MistralConfig(vocab_size=50, hidden_size=HIDDEN, intermediate_size=32,
                               num_hidden_layers=num_layers, num_attention_heads=2, num_key_value_heads=1,
                               max_position_embeddings=32, rms_norm_eps=1e-5)
        model, eps = TFMistralModel(config, name="mistral"), config.rms_norm_eps
        count = 2 * config.num_hidden_layers + 1
        signature = ("Square", "Sqrt", "RealDiv")
    fn, specs = am._transformers_model(model, seed, ("input_ids", "attention_mask"))
    return traced(f"transformers_{kind}", fn, specs, seed, rms_norms=count, signature=signature,
                  int_range=(0, 2), attrs={"epsilon": eps, "axes": [-1], "T": 1})


def rms_call_at_top_level(kind: str) -> NormModel:
    """A library's RMS norm ``call`` run at the top level (no scope): transformers
    ``TFT5LayerNorm`` or keras-hub Gemma ``RMSNormalization`` (``1 + scale``)."""
    if kind == "t5":
        from transformers.models.t5.modeling_tf_t5 import TFT5LayerNorm

        layer = TFT5LayerNorm(HIDDEN, epsilon=1e-6, name="t5_norm")
        layer.build((2, 4, HIDDEN))
        layer.set_weights([params(HIDDEN, 6, 1.0)])
    else:
        from keras_hub.src.models.gemma.rms_normalization import RMSNormalization

        layer = RMSNormalization(epsilon=1e-6)
        layer.build((2, 4, HIDDEN))
        layer.set_weights([params(HIDDEN, 7)])
    fn, specs = encoder(lambda x, i: layer.call(x), layers=2)
    signature = ("Mean", "Sqrt" if kind == "gemma" else "Rsqrt")
    return traced(f"rms_call[{kind}]", fn, specs, rms_norms=2, signature=signature,
                  attrs={"epsilon": 1e-6, "axes": [-1], "T": 1})


def rms_without_epsilon() -> NormModel:
    """``x * tf.math.rsqrt(tf.reduce_mean(tf.square(x), -1, keepdims=True)) * w``: epsilon 0."""
    import tensorflow as tf

    w = params(HIDDEN, 8, 1.0)
    fn, specs = encoder(lambda x, i: x * tf.math.rsqrt(tf.reduce_mean(tf.square(x), -1, keepdims=True)) * w, 1)
    return traced("rms_without_epsilon", fn, specs, rms_norms=1, signature=("Rsqrt",),
                  attrs={"epsilon": 0.0, "axes": [-1], "T": 1})


def rms_decoy(which: str) -> NormModel:
    """Not RMS norms: ``layer_norm``: Keras 3 ``LayerNormalization(rms_scaling=True)`` (its
    "RMS" divides by the standard deviation: the mean is subtracted); ``l2``:
    ``tf.math.l2_normalize`` and Keras ``UnitNormalization`` (a sum, not a mean);
    ``centred``: ``d = x - mean(x)``, ``d * rsqrt(mean(d^2) + eps) * w`` (refused);
    ``epsilon_on_rms``: ``x / (sqrt(mean(x^2)) + eps) * w`` (refused); ``no_gamma``:
    ``x * rsqrt(mean(x^2) + eps)``."""
    import keras
    import tensorflow as tf

    w = params(HIDDEN, 9, 1.0)
    if which == "layer_norm":
        layer = keras.layers.LayerNormalization(rms_scaling=True)
        layer.build((2, 4, HIDDEN))
        fn = layer
    elif which == "l2":
        unit = keras.layers.UnitNormalization()

        def fn(x):
            return unit(tf.math.l2_normalize(x, -1) * w)
    else:
        def fn(x):
            if which == "centred":
                d = x - tf.reduce_mean(x, -1, keepdims=True)
                return d * tf.math.rsqrt(tf.reduce_mean(tf.square(d), -1, keepdims=True) + 1e-6) * w
            if which == "epsilon_on_rms":
                return x / (tf.sqrt(tf.reduce_mean(tf.square(x), -1, keepdims=True)) + 1e-6) * w
            if which == "no_gamma":
                return x * tf.math.rsqrt(tf.reduce_mean(tf.square(x), -1, keepdims=True) + 1e-6)
            raise ValueError(which)
    reasons = {"centred": "is centred", "epsilon_on_rms": "root mean square"}

    def call(x):
        return fn(x)

    return traced(f"rms_decoy[{which}]", call, {"x": spec([2, 4, HIDDEN])}, refusal=reasons.get(which))


FORMS: dict[str, Callable[[], NormModel]] = {
    "keras_rms_normalization": keras_rms_normalization,
    "keras_rms_normalization_mixed_float16": lambda: keras_rms_normalization(policy="mixed_float16"),
    **{f"keras_hub_{k}": (lambda k=k: keras_hub_backbone(k)) for k in ("gemma", "llama", "mistral")},
    **{f"transformers_{k}": (lambda k=k: transformers_rms(k)) for k in ("t5", "mistral")},
    **{f"call_{k}": (lambda k=k: rms_call_at_top_level(k)) for k in ("t5", "gemma")},
    "rms_without_epsilon": rms_without_epsilon,
}
DECOYS: dict[str, Callable[[], NormModel]] = {
    w: (lambda w=w: rms_decoy(w)) for w in ("layer_norm", "l2", "centred", "epsilon_on_rms", "no_gamma")
}
