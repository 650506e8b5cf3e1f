"""Frozen graphs with scaled dot-product attention, built by the real library code that
writes it (transformers TF classes, Keras 3 and tf_keras ``MultiHeadAttention``), tiny and
with random weights, and look-alikes that are not attention.

Every builder returns an :class:`AttentionModel` whose ``attentions`` counts the attention
softmaxes of the model's code (from its configuration: one per layer, or per attention
layer), with the attributes every fused op must carry, and ``refusal`` for a look-alike:
what the pass's refusal must say (None: it must not match at all).

``ATTENTION_FORMS`` and ``ATTENTION_LOOK_ALIKES`` name every builder, for parametrized tests.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tests.models import activation_models as am


@dataclass(repr=False)
class AttentionModel(am.ActivationModel):
    """A frozen model and the attention blocks its code computes."""

    attentions: int = 0  # attention softmaxes: ScaledDotProductAttention nodes expected
    attrs: dict[str, Any] = field(default_factory=dict)  # attributes of every expected fused op
    refusal: str | None = None  # a look-alike: what every refusal must say (None: no match at all)

    def __repr__(self) -> str:
        return f"AttentionModel({self.name!r}, attentions={self.attentions})"


def _of(m: am.ActivationModel, **known: Any) -> AttentionModel:
    return AttentionModel(m.graph_def, m.inputs, m.outputs, name=m.name, signature=m.signature,
                          int_range=m.int_range, input_shapes=m.input_shapes, **known)


def traced(name: str, fn: Callable, specs: dict, seed: int = 0, **known: Any) -> AttentionModel:
    int_range = known.pop("int_range", (0, 10))
    signature = known.pop("signature", ())
    m = am._traced(name, fn, specs, np.random.default_rng(seed), int_range=int_range, signature=signature)
    return _of(m, **known)


def ids(*names: str, seq: int = 8) -> dict:
    return {k: am._spec([2, seq], k, "int32") for k in names}


# ------------------------------------------------------------------ transformers


def _transformers(name: str, model, inputs: dict, seed: int, output: str = "last_hidden_state",
                  **known: Any) -> AttentionModel:
    """A transformers TF model built on ``inputs`` (specs), perturbed, traced (inference) and frozen."""
    import tensorflow as tf

    dummy = {k: tf.ones(s.shape, s.dtype) for k, s in inputs.items()}
    model(dummy, training=False)
    am._perturb_keras(model, seed)

    def fn(**features):
        out = model(features, training=False)
        return {output: getattr(out, output)}

    return traced(name, fn, inputs, seed, **known)


def transformers_bert(num_layers: int = 2, seed: int = 0) -> AttentionModel:
    """``TFBertModel``: ``q @ k^T / sqrt(d) + (1 - mask) * -10000``, transformers' stable
    softmax (``+ 1e-9``), one attention per layer."""
    m = am.transformers_bert(num_layers, seed)
    return _of(m, attentions=num_layers,
               attrs={"scale": 1 / np.sqrt(8), "is_causal": False, "num_heads": 2, "num_kv_heads": 2})


def transformers_gpt2(num_layers: int = 2, seed: int = 0) -> AttentionModel:
    """``TFGPT2Model``: ``w / sqrt(d)``, the causal mask built in the graph from a range
    compare (``w * b - 1e4 * (1 - b)``), plus the padding mask: one attention per layer."""
    m = am.transformers_gpt2(num_layers, seed)
    return _of(m, attentions=num_layers, attrs={"scale": 1 / np.sqrt(8), "num_heads": 2, "num_kv_heads": 2})


def transformers_t5(num_layers: int = 2, seed: int = 0) -> AttentionModel:
    """``TFT5EncoderModel``: no scale (T5 folds it into the weights), the relative position
    bias plus the padding mask added to the scores."""
    import tf_keras
    from transformers import T5Config, TFT5EncoderModel

    tf_keras.utils.set_random_seed(seed)
    config = T5Config(vocab_size=50, d_model=16, d_kv=8, d_ff=32, num_layers=num_layers, num_heads=2,
                      dropout_rate=0.0, relative_attention_num_buckets=8)
    model = TFT5EncoderModel(config, name="t5")
    return _transformers("transformers_t5", model, ids("input_ids", "attention_mask"), seed, int_range=(0, 2),
                         attentions=num_layers, attrs={"scale": 1.0, "is_causal": False, "num_heads": 2})


def transformers_vit(num_layers: int = 2, seed: int = 0) -> AttentionModel:
    """``TFViTModel`` on 16x16 images (patches of 8: 4 patches and the class token), no mask."""
    import tensorflow as tf
    import tf_keras
    from transformers import TFViTModel, ViTConfig

    tf_keras.utils.set_random_seed(seed)
    config = ViTConfig(hidden_size=16, num_hidden_layers=num_layers, num_attention_heads=2, intermediate_size=32,
                       image_size=16, patch_size=8, num_channels=3, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0)
    model = TFViTModel(config, name="vit", add_pooling_layer=False)
    specs = {"pixel_values": tf.TensorSpec([2, 3, 16, 16], tf.float32, name="pixel_values")}
    return _transformers("transformers_vit", model, specs, seed, attentions=num_layers,
                         attrs={"scale": 1 / np.sqrt(8), "is_causal": False, "num_heads": 2})


def transformers_mistral(num_layers: int = 2, seed: int = 0) -> AttentionModel:
    """``TFMistralModel``: grouped-query attention (4 query heads, 2 key/value heads, repeated
    by ``repeat_kv``), a causal mask combined with the padding mask."""
    import tf_keras
    from transformers import MistralConfig, TFMistralModel

    tf_keras.utils.set_random_seed(seed)
    config = MistralConfig(vocab_size=50, hidden_size=32, intermediate_size=32, num_hidden_layers=num_layers,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    model = TFMistralModel(config, name="mistral")
    return _transformers("transformers_mistral", model, ids("input_ids", "attention_mask"), seed,
                         int_range=(0, 2), attentions=num_layers,
                         attrs={"scale": 1 / np.sqrt(8), "num_heads": 4, "num_kv_heads": 2})


def transformers_clip_text(num_layers: int = 2, seed: int = 0) -> AttentionModel:
    """``TFCLIPTextModel``: the query scaled before the product, a causal mask and the padding
    mask added to the scores."""
    import tf_keras
    from transformers import CLIPTextConfig, TFCLIPTextModel

    tf_keras.utils.set_random_seed(seed)
    config = CLIPTextConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=num_layers,
                            num_attention_heads=2, max_position_embeddings=16)
    model = TFCLIPTextModel(config, name="clip")
    return _transformers("transformers_clip_text", model, ids("input_ids", "attention_mask"), seed,
                         int_range=(0, 2), attentions=num_layers, attrs={"scale": 1 / np.sqrt(8)})


def transformers_swin(seed: int = 0) -> AttentionModel:
    """``TFSwinModel`` on 32x32 images, patches of 4, windows of 4x4, depths [2, 2] (1 then 2
    heads of 8): window attention with a relative position bias (the op's ``bias``) and the
    window mask (zero for an unshifted block, -100 across the shifted windows' seams), added
    to the scores viewed per window and viewed back: the op's ``mask`` with ``mask_windows``
    4 in the first stage (8x8 patches), 1 in the second (4x4).  Swin computes every view's
    shape from ``Shape`` ops, its mask in ``tf.cond`` branches."""
    import tensorflow as tf
    import tf_keras
    from transformers import SwinConfig, TFSwinModel

    tf_keras.utils.set_random_seed(seed)
    config = SwinConfig(image_size=32, patch_size=4, num_channels=3, embed_dim=8, depths=[2, 2],
                        num_heads=[1, 2], window_size=4, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, drop_path_rate=0.0)
    model = TFSwinModel(config, name="swin", add_pooling_layer=False)
    specs = {"pixel_values": tf.TensorSpec([2, 3, 32, 32], tf.float32, name="pixel_values")}
    return _transformers("transformers_swin", model, specs, seed, attentions=sum(config.depths),
                         attrs={"is_causal": False, "scale": 1 / np.sqrt(8), "layout": "BNSH",
                                "optional_inputs": ["mask", "bias"]})


# ------------------------------------------------------------------ Keras MultiHeadAttention


def keras_mha(mask: str = "none", library: str = "keras", seed: int = 0, layers: int = 2,
              policy: str = "float32") -> AttentionModel:
    """Keras 3 or tf_keras ``MultiHeadAttention`` (einsum projections and products), self
    attention of ``layers`` stacked layers on [2, 6, 16]; ``mask``: ``none``, ``padding``
    (``attention_mask`` from a [2, 6] keep mask), ``causal`` (``use_causal_mask=True``) or
    ``both``."""
    import tensorflow as tf

    dtype = tf.float16 if "float16" in policy else tf.float32
    if library == "keras":
        import keras
        keras.utils.set_random_seed(seed)

        def make(**kwargs):
            return keras.layers.MultiHeadAttention(dtype=policy, **kwargs)
    else:
        import tf_keras
        tf_keras.utils.set_random_seed(seed)
        make = tf_keras.layers.MultiHeadAttention
    blocks = [make(num_heads=2, key_dim=8) for _ in range(layers)]
    for block in blocks:
        block(tf.ones([2, 6, 16], dtype), tf.ones([2, 6, 16], dtype))
    am._randomize_keras(blocks, seed, scale=0.3)
    causal = mask in ("causal", "both")
    padded = mask in ("padding", "both")

    def fn(x, keep=None):
        attention_mask = None
        if padded:
            k = tf.cast(keep, tf.bool)
            attention_mask = tf.logical_and(k[:, :, None], k[:, None, :])
        for block in blocks:
            x = block(x, x, attention_mask=attention_mask, use_causal_mask=causal)
        return x

    specs = {"x": am._spec([2, 6, 16], "x", dtype.name)}
    if padded:
        specs["keep"] = am._spec([2, 6], "keep", "int32")
    attrs = {"scale": 1 / np.sqrt(8), "num_heads": 2, "num_kv_heads": 2}
    if mask != "both":
        attrs["is_causal"] = causal
    if policy != "float32":  # float16 products, the softmax in float32 between Keras' casts
        attrs.update(T=19, softmax_dtype=1)
    name = f"{library}_mha[{mask}]" + ("" if policy == "float32" else f"[{policy}]")
    return traced(name, fn, specs, seed, int_range=(0, 2), attentions=layers, attrs=attrs)


def keras_dot_attention(library: str = "keras") -> AttentionModel:
    """Keras 3 or tf_keras ``layers.Attention()([query, value])`` (Luong dot-product attention, no
    projections), whose key defaults to the value: one tensor is both k and v."""

    lib = __import__(library)
    layer = lib.layers.Attention()

    def fn(q, v):
        return layer([q, v])

    specs = {"q": am._spec([2, 6, 8], "q"), "v": am._spec([2, 5, 8], "v")}
    return traced(f"{library}_dot_attention", fn, specs, attentions=1,
                  attrs={"scale": 1.0, "num_heads": 1, "num_kv_heads": 1, "is_causal": False})


ATTENTION_FORMS: dict[str, Callable[[], AttentionModel]] = {
    "transformers_bert": transformers_bert,
    "transformers_gpt2": transformers_gpt2,
    "transformers_t5": transformers_t5,
    "transformers_vit": transformers_vit,
    "transformers_mistral": transformers_mistral,
    "transformers_clip_text": transformers_clip_text,
    "transformers_swin": transformers_swin,
    **{f"{lib}_mha_{mask}": (lambda lib=lib, mask=mask: keras_mha(mask, lib))
       for lib in ("keras", "tf_keras") for mask in ("none", "padding", "causal", "both")},
    **{f"keras_mha_{mask}_{policy}": (lambda mask=mask, policy=policy: keras_mha(mask, policy=policy))
       for mask in ("padding", "causal") for policy in ("float16", "mixed_float16")},
}


# ------------------------------------------------------------------ look-alikes


def _heads(x, w, heads: int = 2):
    """[2, 6, 16] -> [2, heads, 6, 16 // heads] after a projection by ``w``."""
    import tensorflow as tf

    h = tf.reshape(tf.einsum("bsd,de->bse", x, w), [2, 6, heads, 16 // heads])
    return tf.transpose(h, [0, 2, 1, 3])


def hand_written(which: str, seed: int = 0) -> AttentionModel:
    """Attention as a few lines of TensorFlow write it (projections by random weights), in a
    form ``which`` names; the forms are fused, the look-alikes (``refusal`` set, or no match
    expected) are not:

    * ``scale_on_k``: ``q @ (k * d^-0.5)^T`` with an explicit ``Transpose`` of k;
    * ``rsqrt_scale``: ``q @ k^T * rsqrt(d)``, d a constant cast in the graph;
    * ``other_scale``: ``q @ k^T * 0.3``: any scalar is the scale the op carries;
    * ``band_part_causal``: ``where(band_part(ones, -1, 0) > 0, s, -1e9)``, exactly causal;
    * ``windowed_mask``: a relative position bias added, then (as Swin's shifted windows) a mask
      per window added to the scores viewed ``[batch / 2, 2, heads, q, k]`` and viewed back;
    * ``softmax_hand_written``: ``exp(s - max s) / sum(exp(...))`` (the softmax pass makes it a
      ``Softmax`` in the graph stage, the attention pass then takes it);
    * look-alikes: ``wrong_axis`` (softmax over the queries), ``not_causal`` (GPT-2's
      ``w * b - 1e4 * (1 - b)`` with a band that keeps one key more), ``matrix_scale`` (the
      scores multiplied by a constant matrix, not a scalar), ``op_between`` (the
      probabilities squared before the product with v), ``dropout`` (``tf.nn.dropout`` left
      in the graph), ``k_not_transposed`` (``q @ k`` of square heads), ``window_not_batch``
      (a term added to the scores viewed with the queries split, not the batch), ``key_parts``
      (the scores viewed with the keys split in two, the softmax over each part).
    """
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    wq, wk, wv = (rng.normal(0, 0.4, (16, 16)).astype(np.float32) for _ in range(3))
    d = 8.0

    def fn(x):
        q, k, v = _heads(x, wq), _heads(x, wk), _heads(x, wv)
        causal = False
        if which == "scale_on_k":
            s = tf.matmul(q, tf.transpose(k * d ** -0.5, [0, 1, 3, 2]))
        elif which == "rsqrt_scale":
            s = tf.matmul(q, k, transpose_b=True) * tf.math.rsqrt(tf.cast(8, tf.float32))
        elif which == "other_scale":
            s = tf.matmul(q, k, transpose_b=True) * 0.3
        elif which == "matrix_scale":
            s = tf.matmul(q, k, transpose_b=True) * rng.uniform(0.1, 1.0, (6, 6)).astype(np.float32)
        elif which == "k_not_transposed":
            s = tf.matmul(q[..., :6], k[..., :6]) / np.sqrt(d).astype(np.float32)  # square heads: q @ k
        else:
            s = tf.matmul(q, k, transpose_b=True) / np.sqrt(d).astype(np.float32)
        if which == "band_part_causal":
            keep = tf.linalg.band_part(tf.ones([6, 6]), -1, 0) > 0
            s = tf.where(keep, s, -1e9)
            causal = True
        if which == "windowed_mask":  # Swin: a relative position bias, then a mask per window
            s = s + rng.normal(0, 1, (1, 2, 6, 6)).astype(np.float32)
            windows = np.where(rng.uniform(size=(2, 6, 6)) < 0.3, -100.0, 0.0).astype(np.float32)
            s = tf.reshape(tf.reshape(s, [1, 2, 2, 6, 6]) + windows[None, :, None], [2, 2, 6, 6])
        if which == "window_not_batch":  # the view splits the queries, not the batch
            term = rng.normal(0, 1, (2, 3, 6)).astype(np.float32)
            s = tf.reshape(tf.reshape(s, [2, 2, 2, 3, 6]) + term, [2, 2, 6, 6])
        if which == "not_causal":
            i, j = tf.range(6)[:, None], tf.range(6)
            b = tf.cast(i + 1 >= j, tf.float32)  # one key beyond the query
            s = s * b - 1e4 * (1 - b)
        if which == "key_parts":  # the scores viewed with the keys split: a softmax over parts of them
            s = tf.reshape(s, [2, 2, 6, 2, 3])
        if which == "softmax_hand_written":
            e = tf.exp(s - tf.reduce_max(s, -1, keepdims=True))
            p = e / tf.reduce_sum(e, -1, keepdims=True)
        elif which == "wrong_axis":
            p = tf.nn.softmax(s, axis=-2)
        else:
            p = tf.nn.softmax(s)
        if which == "key_parts":
            p = tf.reshape(p, [2, 2, 6, 6])
        if which == "op_between":
            p = p * p
        if which == "dropout":
            p = tf.nn.dropout(p, rate=0.1, seed=1)
        del causal
        return tf.matmul(p, v)

    refusals = {"wrong_axis": "another axis", "not_causal": "not the causal triangle", "matrix_scale": "not a scalar",
                "op_between": "lies between the softmax", "dropout": "dropout",
                "window_not_batch": "changes other axes than the batch",
                "key_parts": "does not split the rows of the scores into query groups",
                "k_not_transposed": "without transposing"}
    attrs = {"scale": {"scale_on_k": d ** -0.5, "rsqrt_scale": d ** -0.5, "other_scale": 0.3}.get(which, d ** -0.5),
             "is_causal": which == "band_part_causal", "num_heads": 2, "num_kv_heads": 2, "layout": "BNSH"}
    if which == "windowed_mask":
        attrs.update(mask_windows=2, optional_inputs=["mask", "bias"])
    look_alike = which in refusals
    return traced(f"hand_written[{which}]", fn, {"x": am._spec([2, 6, 16], "x")}, seed,
                  attentions=0 if look_alike else 1, attrs={} if look_alike else attrs,
                  refusal=refusals.get(which))


HAND_WRITTEN_FORMS = ("scale_on_k", "rsqrt_scale", "other_scale", "band_part_causal", "softmax_hand_written",
                      "windowed_mask")
ATTENTION_FORMS.update({f"hand_written_{w}": (lambda w=w: hand_written(w)) for w in HAND_WRITTEN_FORMS})
ATTENTION_LOOK_ALIKES: dict[str, Callable[[], AttentionModel]] = {
    w: (lambda w=w: hand_written(w))
    for w in ("wrong_axis", "not_causal", "matrix_scale", "op_between", "dropout", "k_not_transposed",
              "window_not_batch", "key_parts")
}


def openai_gpt2(layers: int = 2) -> AttentionModel:
    """openai/gpt-2's ``multihead_attn`` (``softmax_models.gpt2_attention``, its lines as that
    repository writes them): ``w * rsqrt(d)``, ``mask_attn_weights`` (``w * b - 1e10 * (1 - b)``,
    b from a range compare: causal) and its hand-written softmax."""
    from tests.models import softmax_models as sm

    m = sm.gpt2_attention(layers=layers)
    return AttentionModel(m.graph_def, m.inputs, m.outputs, name="openai_gpt2", signature=m.signature,
                          attentions=layers, attrs={"scale": 0.5, "is_causal": True, "mask_fill": -1e10,
                                                    "num_heads": 2, "num_kv_heads": 2})


ATTENTION_FORMS["openai_gpt2"] = openai_gpt2


# ------------------------------------------------------------------ keras-hub


def keras_hub_backbone(kind: str, num_layers: int = 2, seed: int = 0) -> AttentionModel:
    """keras-hub ``LlamaBackbone`` / ``MistralBackbone`` (grouped-query: 2 query heads, 1
    key/value head, causal and padding masks), ``GPT2Backbone``, ``BertBackbone``: one
    attention per layer, random weights.  Keras' masked softmax selects the scores by a
    boolean mask and zeroes the dropped keys' probabilities after it (``zero_dropped``).

    Keras computes its einsums here as batch matmuls of transposed operands.  GPT-2 and BERT
    compute ``k q^T`` and transpose it, q scaled before the transpose the op reads (the scale
    is inside q: ``scale`` 1, ``transpose_q``); Llama and Mistral repeat k over the heads
    before the transpose the op reads, so the op takes k repeated (``num_kv_heads`` 2)."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(seed)
    if kind in ("llama", "mistral"):
        cls = keras_hub.models.LlamaBackbone if kind == "llama" else keras_hub.models.MistralBackbone
        backbone = cls(vocabulary_size=50, num_layers=num_layers, num_query_heads=2, num_key_value_heads=1,
                       hidden_dim=16, intermediate_dim=32)
        attrs = {"num_heads": 2, "num_kv_heads": 2, "scale": 1 / np.sqrt(8), "transpose_k": True}
    elif kind == "gpt2":
        backbone = keras_hub.models.GPT2Backbone(vocabulary_size=50, num_layers=num_layers, num_heads=2,
                                                 hidden_dim=16, intermediate_dim=32, max_sequence_length=16)
        attrs = {"num_heads": 2, "scale": 1.0, "transpose_q": True}
    else:
        backbone = keras_hub.models.BertBackbone(vocabulary_size=50, num_layers=num_layers, num_heads=2,
                                                 hidden_dim=16, intermediate_dim=32, max_sequence_length=16)
        attrs = {"num_heads": 2, "scale": 1.0, "transpose_q": True}
    attrs.update(zero_dropped=True, Tmask=10, is_causal=False)
    am._perturb_keras(backbone, seed, scale=0.1)
    names = ("token_ids", "padding_mask") + (("segment_ids",) if kind == "bert" else ())

    def fn(**features):
        out = backbone(features, training=False)
        return out["sequence_output"] if isinstance(out, dict) else out

    return traced(f"keras_hub_{kind}", fn, ids(*names), seed, int_range=(0, 2), attentions=num_layers, attrs=attrs)


ATTENTION_FORMS.update({f"keras_hub_{k}": (lambda k=k: keras_hub_backbone(k)) for k in ("llama", "mistral", "gpt2",
                                                                                          "bert")})
