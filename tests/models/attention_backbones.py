"""More real attention, built by the library code that writes it (tiny, random weights,
frozen): transformers ``TFWav2Vec2Model`` (heads folded into the batch, layout ``BSH``),
keras-hub ``GemmaBackbone`` (grouped-query, the query scaled by ``head_dim**-0.5``, no
soft-capping) and TF Model Garden's ``TransformerEncoderBlock`` and ``BertEncoderV2``
(tf_keras ``MultiHeadAttention`` with a padding mask, or causal).

Model Garden is no dependency of the project: its builders need ``official`` importable
(the tests install it with the ``model_garden_site`` fixture of ``tests.helpers.model_garden``).
``BACKBONE_FORMS`` names the builders that need nothing more, ``MODEL_GARDEN_FORMS`` the others.
Each model's ``attentions`` counts its attention softmaxes; ``attrs`` every fused op's attributes.
"""
from __future__ import annotations

from typing import Callable


from tests.models import activation_models as am
from tests.models.attention_models import AttentionModel, _transformers, ids, traced


def transformers_wav2vec2(num_layers: int = 2, seed: int = 0) -> AttentionModel:
    """``TFWav2Vec2Model`` on 400 samples (a convolutional feature encoder, then 2 encoder
    layers): heads folded into the batch ([batch * heads, seq, size]: layout ``BSH``), no mask.
    The query is scaled by ``d^-0.5`` right after its projection, before the head split the op
    reads: the scale is inside q (``scale`` 1)."""
    import tensorflow as tf
    import tf_keras
    from transformers import TFWav2Vec2Model, Wav2Vec2Config

    tf_keras.utils.set_random_seed(seed)
    config = Wav2Vec2Config(hidden_size=16, num_hidden_layers=num_layers, num_attention_heads=2,
                            intermediate_size=32, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
                            num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2, hidden_dropout=0.0,
                            attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
                            layerdrop=0.0, apply_spec_augment=False, do_stable_layer_norm=False)
    model = TFWav2Vec2Model(config, name="wav2vec2")
    specs = {"input_values": tf.TensorSpec([2, 400], tf.float32, name="input_values")}
    return _transformers("transformers_wav2vec2", model, specs, seed, attentions=num_layers,
                         attrs={"scale": 1.0, "is_causal": False, "num_heads": 1, "num_kv_heads": 1,
                                "layout": "BSH"})


def keras_hub_gemma(num_layers: int = 2, seed: int = 0) -> AttentionModel:
    """keras-hub ``GemmaBackbone``: 2 query heads sharing 1 key/value head, head size 8, the
    query scaled by ``head_dim**-0.5`` before the product, causal and padding masks (Keras'
    masked softmax), no logit soft-capping (the default).  Keras computes the grouped einsum
    ``btkgh,bskh->bkgts`` as a batch matmul of q viewed ``[batch, kv_heads, groups * q_len,
    size]`` (the op's q, ``query_groups`` 2: 2 heads on 1 kv head) and views the scores
    ``[batch, kv_heads, groups, q_len, k_len]`` for the masks and the softmax.  The query is
    scaled by ``head_dim**-0.5`` before those views: the scale is inside q (``scale`` 1)."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.GemmaBackbone(vocabulary_size=50, num_layers=num_layers, num_query_heads=2,
                                              num_key_value_heads=1, hidden_dim=16, intermediate_dim=32,
                                              head_dim=8)
    am._perturb_keras(backbone, seed, scale=0.1)

    def fn(**features):
        return backbone(features, training=False)

    return traced("keras_hub_gemma", fn, ids("token_ids", "padding_mask"), seed, int_range=(0, 2),
                  attentions=num_layers, attrs={"num_heads": 2, "num_kv_heads": 1, "query_groups": 2,
                                                "is_causal": False, "scale": 1.0, "layout": "BNSH",
                                                "zero_dropped": True, "optional_inputs": ["mask"]})


BACKBONE_FORMS: dict[str, Callable[[], AttentionModel]] = {
    "transformers_wav2vec2": transformers_wav2vec2,
    "keras_hub_gemma": keras_hub_gemma,
}


# ------------------------------------------------------------------ TF Model Garden


def model_garden_block(causal: bool = False, num_blocks: int = 2, seed: int = 0) -> AttentionModel:
    """``official.nlp.modeling.layers.TransformerEncoderBlock`` x ``num_blocks`` on [2, 6, 16]
    with a [2, 6, 6] attention mask: a padding mask, or (``causal``) the lower triangle as a
    constant.  That causal mask is computed once and read by both blocks: it cannot go with one
    fused op, so it stays the op's (additive) mask input, ``is_causal`` false."""
    import tensorflow as tf
    import tf_keras
    from official.nlp.modeling import layers

    tf_keras.utils.set_random_seed(seed)
    blocks = [layers.TransformerEncoderBlock(num_attention_heads=2, inner_dim=32, inner_activation="relu",
                                             output_dropout=0.0, attention_dropout=0.0) for _ in range(num_blocks)]
    x0, m0 = tf.ones([2, 6, 16]), tf.ones([2, 6, 6])
    for block in blocks:
        block([x0, m0])
    am._randomize_keras(blocks, seed, scale=0.3)

    def fn(x, keep):
        k = tf.cast(keep, tf.float32)
        mask = tf.linalg.band_part(tf.ones([6, 6]), -1, 0)[None] if causal else k[:, None, :] * tf.ones([1, 6, 1])
        for block in blocks:
            x = block([x, mask], training=False)
        return x

    specs = {"x": am._spec([2, 6, 16], "x"), "keep": am._spec([2, 6], "keep", "int32")}
    name = "model_garden_block" + ("_causal" if causal else "")
    attrs = {"num_heads": 2, "num_kv_heads": 2, "scale": 8 ** -0.5, "is_causal": False, "layout": "BSNH",
             "optional_inputs": ["mask"]}
    return traced(name, fn, specs, seed, int_range=(0, 2), attentions=num_blocks, attrs=attrs)


def model_garden_bert(num_layers: int = 2, seed: int = 0) -> AttentionModel:
    """``official.nlp.modeling.networks.BertEncoderV2``: 2 layers, 2 heads of 16, a padding mask."""
    import tf_keras
    from official.nlp.modeling import networks

    tf_keras.utils.set_random_seed(seed)
    encoder = networks.BertEncoderV2(vocab_size=50, hidden_size=32, num_layers=num_layers, num_attention_heads=2,
                                     max_sequence_length=8, inner_dim=64, type_vocab_size=2, dropout_rate=0.0,
                                     attention_dropout_rate=0.0, name="bert_encoder_v2")
    names = ("input_word_ids", "input_mask", "input_type_ids")

    def fn(**inputs):
        return encoder(inputs, training=False)["sequence_output"]

    return traced("model_garden_bert", fn, ids(*names), seed, int_range=(0, 2), attentions=num_layers,
                  attrs={"num_heads": 2, "num_kv_heads": 2, "scale": 16 ** -0.5, "is_causal": False,
                         "layout": "BSNH", "optional_inputs": ["mask"]})


MODEL_GARDEN_FORMS: dict[str, Callable[[], AttentionModel]] = {
    "model_garden_block": model_garden_block,
    "model_garden_block_causal": lambda: model_garden_block(causal=True),
    "model_garden_bert": model_garden_bert,
}
