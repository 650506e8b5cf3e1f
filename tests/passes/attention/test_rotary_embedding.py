"""RotaryEmbeddingFusionPass: ``x * cos + rotate(x) * sin`` -> ``RotaryEmbedding(x, cos, sin)``,
on the attention of real models (frozen, tiny, random weights).

Expected counts: the queries and the keys of every attention layer are rotated, so ``2n`` per
``n``-layer model:

* rotate-half (``interleaved = False``): transformers ``TFMistralModel`` (``rotate_half``: a
  concat of the negated second half and the first, read by ``StridedSlice``), keras-hub
  ``LlamaBackbone``, ``MistralBackbone``, ``GemmaBackbone`` (``RotaryEmbedding``: ``split``,
  then ``reshape(stack((-x2, x1), axis=-2))``);
* interleaved (``interleaved = True``): transformers ``TFGPTJModel`` (``rotate_every_two``), with
  ``rotary_dim`` 4 of a head dimension of 8 (the rotated part is a slice of the heads) and 8.

Every fused graph verifies numerically.  Look-alikes written with TensorFlow ops are refused with
the reason: the wrong half negated, a stack along the wrong axis, slices that are not halves,
cos that broadcasts x to more, a rotation that something else reads.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.models import activation_models as am
from tests.models import rms_norm_models as rm
from tests.models.norm_models import HIDDEN, spec, traced
from tests.helpers.pass_checks import REGISTRY, op_count, pass_report, refusals
from tests.helpers.verify import assert_verifies

import scopefusion

PASS = "RotaryEmbeddingFusionPass"
LAYERS = 2


def transformers_gptj(rotary_dim: int, seed: int = 0):
    """``TFGPTJModel`` with 2 heads of 8: ``rotary_dim`` 4 rotates half of every head, 8 all of it."""
    import tf_keras
    from transformers import GPTJConfig, TFGPTJModel

    tf_keras.utils.set_random_seed(seed)
    config = GPTJConfig(vocab_size=50, n_positions=16, n_embd=HIDDEN, n_layer=LAYERS, n_head=2,
                        rotary_dim=rotary_dim, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    fn, specs = am._transformers_model(TFGPTJModel(config, name="gptj"), seed, ("input_ids", "attention_mask"))
    return traced(f"transformers_gptj[rotary_dim={rotary_dim}]", fn, specs, seed, int_range=(0, 2))


#: key -> (builder, interleaved)
CASES = {
    "transformers_mistral": (lambda: rm.transformers_rms("mistral"), False),
    "keras_hub_llama": (lambda: rm.keras_hub_backbone("llama"), False),
    "keras_hub_mistral": (lambda: rm.keras_hub_backbone("mistral"), False),
    "keras_hub_gemma": (lambda: rm.keras_hub_backbone("gemma"), False),
    "transformers_gptj_rotary_dim_4": (lambda: transformers_gptj(4), True),
    "transformers_gptj_rotary_dim_8": (lambda: transformers_gptj(8), True),
}


@functools.cache
def model(key: str):
    return CASES[key][0]()


@pytest.mark.parametrize("key", list(CASES))
def test_rotary_embeddings_are_fused(key):
    m, interleaved = model(key), CASES[key][1]
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    nodes = [n for n in result.fused_graph_def.node if n.op == "RotaryEmbedding"]
    assert len(nodes) == 2 * LAYERS, refusals(result, PASS)
    report = pass_report(result, PASS)
    assert len(report.fused) == 2 * LAYERS and report.refused == []
    for node in nodes:
        assert node.attr["interleaved"].b is interleaved and node.attr["T"].type == 1
        assert len([i for i in node.input if not i.startswith("^")]) == 3
    assert op_count(result.fused_graph_def, "Neg") < op_count(m.graph_def, "Neg")
    assert_verifies(m, result)


D = 8


def _angles():
    angles = np.arange(4)[:, None] * (1.0 / 10000 ** (np.arange(0, D, 2) / D))[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _hand_written(which: str):
    """A [2, 4, D] tensor rotated as a look-alike ``which`` (the cos and sin of 4 positions)."""
    import tensorflow as tf

    cos_half, sin_half = _angles()
    cos, sin = np.concatenate([cos_half] * 2, -1), np.concatenate([sin_half] * 2, -1)

    def fn(x):
        h = x * 2.0
        x1, x2 = h[..., : D // 2], h[..., D // 2:]
        if which == "rotate_half":
            return h * cos + tf.concat([-x2, x1], -1) * sin
        if which == "wrong_half_negated":
            return h * cos + tf.concat([-x1, x2], -1) * sin
        if which == "not_halves":
            return h * cos + tf.concat([-h[..., 3:], h[..., :3]], -1) * sin
        if which == "stack_wrong_axis":
            return h * cos + tf.reshape(tf.stack([-h[..., 1::2], h[..., ::2]], axis=-2), tf.shape(h)) * sin
        if which == "cos_broadcasts":
            g = h[0]  # [4, D]; the sin of two sequences makes the product [2, 4, D]
            return g * cos + tf.concat([-g[..., D // 2:], g[..., : D // 2]], -1) * np.stack([sin, sin])
        if which == "rotation_read":
            rotated = tf.concat([-x2, x1], -1)
            return h * cos + rotated * sin, rotated
        raise ValueError(which)

    return traced(f"hand_written[{which}]", fn, {"x": spec([2, 4, D])})


def test_the_hand_written_form_is_fused():
    m = _hand_written("rotate_half")
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    (node,) = [n for n in result.fused_graph_def.node if n.op == "RotaryEmbedding"]
    assert node.attr["interleaved"].b is False
    assert_verifies(m, result)


@pytest.mark.parametrize("which, reason", [
    ("wrong_half_negated", "neither the halves"),
    ("not_halves", "neither the halves"),
    ("stack_wrong_axis", "the stack"),
    ("cos_broadcasts", "must not broadcast"),
    ("rotation_read", "is also read by"),
])
def test_look_alikes_are_refused_with_the_reason(which, reason):
    m = _hand_written(which)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    (refusal,) = pass_report(result, PASS).refused
    assert reason in refusal.reason
    assert op_count(result.fused_graph_def, "RotaryEmbedding") == 0
    assert_verifies(m, result)
