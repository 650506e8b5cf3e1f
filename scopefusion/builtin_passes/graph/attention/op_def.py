"""The fused op ``ScaledDotProductAttention`` and what it computes, in TensorFlow ops."""
from __future__ import annotations

from typing import Any

from ....core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg

#: The layouts of q, k, v and the output: batch, heads, sequence, head size.
LAYOUTS = ("BNSH", "BSNH", "BSH")


def attention_reference(q: Any, k: Any, v: Any, mask: Any = None, bias: Any = None, *, scale: float,
                        is_causal: bool, mask_fill: float, zero_dropped: bool, num_heads: int,
                        num_kv_heads: int, layout: str, transpose_q: bool, transpose_k: bool, T: Any,
                        Tmask: Any, softmax_dtype: Any, mask_windows: int = 0,
                        query_groups: int = 0, subtract_mask: bool = False) -> tuple[Any]:
    """``softmax(mask(causal(scale * q @ k^T + bias))) @ v`` over the keys, in ``layout``."""
    import tensorflow as tf  # deferred: TensorFlow runs the reference only, never the fusion path

    if transpose_q:  # given as [.., size, seq]
        q = tf.linalg.matrix_transpose(q)
    if transpose_k:
        k = tf.linalg.matrix_transpose(k)
    if layout == "BSNH":  # to [batch, heads, seq, size] and back
        q, k, v = (tf.transpose(t, [0, 2, 1, 3]) for t in (q, k, v))
    if query_groups:  # [batch, kv_heads, groups * q_len, size] is [batch, heads, q_len, size] (head k * groups + g)
        rows = tf.shape(q)
        q = tf.reshape(q, [rows[0], rows[1] * query_groups, rows[2] // query_groups, rows[3]])
    if num_kv_heads and num_kv_heads != num_heads:  # grouped-query attention: each kv head serves a group
        k, v = (tf.repeat(t, num_heads // num_kv_heads, axis=1) for t in (k, v))
    scores = tf.matmul(q, k, transpose_b=True)
    if query_groups:  # the mask and bias broadcast to the scores viewed [batch, kv_heads, groups, q_len, k_len]
        shape = tf.shape(scores)
        grouped = tf.stack([shape[0], shape[1] // query_groups, query_groups, shape[2], shape[3]])
        mask, bias = (None if t is None else tf.reshape(tf.broadcast_to(t, grouped), shape) for t in (mask, bias))
    if mask is not None and mask_windows:  # the mask of window b % mask_windows for batch row b
        shape = tf.shape(scores)
        grouped = tf.concat([[shape[0] // mask_windows, mask_windows], shape[1:]], 0)
        mask = tf.reshape(tf.broadcast_to(mask, grouped), shape)
    if softmax_dtype != scores.dtype:  # the softmax in a wider type
        scores = tf.cast(scores, softmax_dtype)
    scores = scores * tf.cast(scale, scores.dtype)
    if bias is not None:
        scores = scores + bias
    fill = tf.cast(mask_fill, scores.dtype)
    if is_causal:  # key j is seen by query i when j <= i + (keys - queries)
        rows, cols = tf.shape(scores)[-2], tf.shape(scores)[-1]
        seen = tf.range(cols)[None, :] <= tf.range(rows)[:, None] + (cols - rows)
        scores = tf.where(seen, scores, fill)
    if mask is not None:
        if mask.dtype == tf.bool:
            scores = tf.where(mask, scores, fill)
        else:
            scores = scores - mask if subtract_mask else scores + mask
    probs = tf.nn.softmax(scores, axis=-1)
    if zero_dropped and mask is not None and mask.dtype == tf.bool:
        probs = tf.where(mask, probs, tf.zeros_like(probs))
    out = tf.matmul(tf.cast(probs, v.dtype), v)
    if query_groups:
        rows = tf.shape(out)
        out = tf.reshape(out, [rows[0], rows[1] // query_groups, rows[2] * query_groups, rows[3]])
    if layout == "BSNH":
        out = tf.transpose(out, [0, 2, 1, 3])
    return (out,)


ATTENTION = FusedOpDef(
    name="ScaledDotProductAttention",
    inputs=(
        TensorArg("q", type_attr="T", description="queries, [batch, heads, q_len, size] in layout BNSH"),
        TensorArg("k", type_attr="T", description="keys, [batch, kv_heads, k_len, size] (not repeated)"),
        TensorArg("v", type_attr="T", description="values, [batch, kv_heads, k_len, v_size]"),
        TensorArg("mask", type_attr="Tmask", optional=True,
                  description="boolean keep mask (False: the score becomes mask_fill) or an additive float "
                              "mask, broadcastable to the scores [batch, heads, q_len, k_len]"),
        TensorArg("bias", type_attr="T", optional=True,
                  description="added to the scaled scores before any mask (relative position bias)"),
    ),
    outputs=(TensorArg("y", type_attr="T", description="[batch, heads, q_len, v_size] in layout BNSH"),),
    attrs=(
        AttrDef("scale", "float", description="multiplies q @ k^T (1.0: the model scales nothing)"),
        AttrDef("is_causal", "bool", default=False,
                description="key j is seen by query i only when j <= i + k_len - q_len; the others "
                            "become mask_fill, before the mask applies"),
        AttrDef("mask_fill", "float", default=-3.4028234663852886e38,
                description="the score a causal or boolean mask drops becomes"),
        AttrDef("zero_dropped", "bool", default=False,
                description="after the softmax, the keys a boolean mask drops weigh 0 (Keras' masked "
                            "softmax: a query whose every key is dropped gets zeros)"),
        AttrDef("num_heads", "int", description="query heads (1 in layout BSH, heads folded into the batch)"),
        AttrDef("num_kv_heads", "int", description="key/value heads; fewer than num_heads: grouped-query"),
        AttrDef("layout", "string", description="axes of q, k, v and y: " + ", ".join(LAYOUTS)),
        AttrDef("transpose_q", "bool", default=False, description="q is given as [.., size, q_len]"),
        AttrDef("transpose_k", "bool", default=False, description="k is given as [.., size, k_len]"),
        AttrDef("T", "type"),
        AttrDef("Tmask", "type", description="the mask's dtype (bool, or the softmax's for an additive mask)"),
        AttrDef("softmax_dtype", "type",
                description="the dtype the scores are scaled, masked and normalised in: T, or wider (Keras "
                            "under float16: float32), the probabilities then cast back to T"),
        AttrDef("mask_windows", "int", default=0,
                description="when not 0, the mask applies to the scores viewed as [batch / mask_windows, "
                            "mask_windows, heads, q_len, k_len] (Swin's shifted windows: batch row b takes "
                            "the mask of window b % mask_windows)"),
        AttrDef("query_groups", "int", default=0,
                description="when not 0, q holds each kv head's query heads stacked along its rows, "
                            "[batch, num_kv_heads, query_groups * q_len, size] (head k * query_groups + g, "
                            "layout BNSH), and y likewise; the mask and bias broadcast to the scores viewed "
                            "[batch, num_kv_heads, query_groups, q_len, k_len]"),
        AttrDef("subtract_mask", "bool", default=False,
                description="a float mask is subtracted from the scores instead of added "
                            "(keras-self-attention: scores - 1e4 * (1 - keep))"),
    ),
    same_shape={},
    reference=attention_reference,
    description="softmax(scale * q @ k^T + bias, causal and mask applied) @ v",
)
