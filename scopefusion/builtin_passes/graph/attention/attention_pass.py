"""AttentionFusionPass: scaled dot-product attention, wherever it sits -> one
``ScaledDotProductAttention(q, k, v[, mask][, bias])``.

The forms (see :mod:`.patterns`, :mod:`.products` and :mod:`.masking`):

* the scale on q, on k or on the scores, a ``Mul`` or a ``RealDiv`` by a constant, by
  ``sqrt(d)`` or ``rsqrt(d)`` computed in the graph, or none (T5: ``scale = 1``);
* ``BatchMatMul`` / ``MatMul`` with k transposed by the product (``adj_y``,
  ``transpose_b``) or by a ``Transpose``, or ``Einsum`` (Keras 3 and tf_keras
  ``MultiHeadAttention``, layout ``BSNH``), either operand first;
* additive masks and biases, a float mask subtracted (keras-self-attention), a mask added
  per window (Swin's shifted windows), boolean masks applied by ``Select``/``SelectV2``
  (Keras' masked softmax), GPT-2's ``w * b - c * (1 - b)``; a mask computed from constants
  that is exactly causal becomes ``is_causal`` (unless other nodes read what it is computed
  from: it then stays an input);
* grouped-query attention as Keras computes its grouped einsum: each kv head's query heads
  stacked along the rows of q, the scores viewed per group for the masks and the softmax
  (``query_groups``, :mod:`.views`);
* the stock ``Softmax``, however the model wrote it: the pass runs in the ``UBFusion``
  stage, after ``SoftmaxFusionPass`` has turned a softmax written out as ops (openai
  GPT-2's) into that op.

Refused with the reason: anything between the softmax and the product with v (dropout
left in the graph, a Cast), a softmax over another axis than the keys', a scale that is
not a scalar, k not transposed, masks in an order the op does not apply them.
"""
from __future__ import annotations

from ....core.fusion.refusal import fail
from ....core.graph.matching import PatternMatch
from ....core.graph.vocabulary import FLOAT_DTYPES, dtype_name
from ....core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass
from .dims import dim
from .masking import masking, scale_of
from .op_def import ATTENTION
from .patterns import ATTENTION_PATTERN, LOOK_ALIKE_PATTERN
from .products import Operands, operands
from .repeat_kv import unrepeated
from .views import query_groups

#: ops whose presence above a node between the softmax and the product marks dropout
RANDOM_OPS = ("RandomUniform", "RandomStandardNormal", "StatelessRandomUniformV2", "StatelessRandomUniform",
              "StatelessRandomGetKeyCounter", "RandomUniformInt")


class AttentionFusionPass(PatternFusionBasePass):
    """softmax(scale * q @ k^T [+ bias] [masked]) @ v -> ScaledDotProductAttention."""

    name = "AttentionFusionPass"
    fusion_type = "UBFusion"
    description = ("softmax(scale * q @ k^T + bias, causal/mask) @ v (BatchMatMul, MatMul or Einsum) "
                   "-> ScaledDotProductAttention")

    def define_patterns(self) -> list:
        return [ATTENTION_PATTERN, LOOK_ALIKE_PATTERN]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        return _attention(match)


def _attention(match: PatternMatch) -> FusedOp:
    if match.pattern.name == LOOK_ALIKE_PATTERN.name:
        _nothing_between(match)
        fail("the softmax is taken over another axis than the keys' (a Transpose moves that "
             "axis last and back): not attention over the keys")
    dtype, softmax_dtype = _dtypes(match)
    parts = operands(match)
    scale = scale_of(match, parts.k_scaled_inside)
    masks = masking(match)
    heads, kv_heads = _heads(match, parts.q, parts.k, parts.layout)
    absorbed = set(masks.absorbed)
    groups, group_shapes = query_groups(match)
    if groups:  # each kv head's query heads stacked along the rows of q
        if parts.layout != "BNSH" or heads != kv_heads or masks.windows:
            fail(f"query groups in layout {parts.layout} with {heads} query and {kv_heads} key heads"
                 + (" and windows" if masks.windows else "") + ": q must be [batch, kv_heads, groups * q_len, size]")
        heads = kv_heads * groups
    else:
        kv_heads = _grouped(match, parts, heads, kv_heads, absorbed)
    inputs = [parts.q, parts.k, parts.v]
    optional = []
    if masks.mask is not None:
        inputs.append(masks.mask)
        optional.append("mask")
    if masks.bias is not None:
        inputs.append(masks.bias)
        optional.append("bias")
    attrs = {"scale": scale, "is_causal": masks.is_causal, "num_heads": heads, "num_kv_heads": kv_heads,
             "layout": parts.layout, "T": dtype,
             "Tmask": 10 if masks.mask_is_bool else softmax_dtype}  # 10: DT_BOOL
    attrs["softmax_dtype"] = softmax_dtype
    if softmax_dtype != dtype and masks.bias is not None:
        fail(f"a bias added in {dtype_name(softmax_dtype)} to {dtype_name(dtype)} products")
    if masks.fill is not None:
        attrs["mask_fill"] = masks.fill
    if masks.mask_subtracted:
        attrs["subtract_mask"] = True
    if masks.zero_dropped:
        attrs["zero_dropped"] = True
    if masks.windows:
        attrs["mask_windows"] = masks.windows
    if groups:
        attrs["query_groups"] = groups
    if parts.transpose_q:
        attrs["transpose_q"] = True
    if parts.transpose_k:
        attrs["transpose_k"] = True
    if optional:
        attrs["optional_inputs"] = optional
    described = ", ".join(x for x in (
        f"scale {scale:.6g}", "causal" if masks.is_causal else "", f"mask {masks.mask}" if masks.mask else "",
        f"bias {masks.bias}" if masks.bias else "", parts.layout) if x)
    return FusedOp(ATTENTION.name, inputs=inputs, attrs=attrs, absorbed=frozenset(absorbed),
                   view_shapes=frozenset(masks.view_shapes | group_shapes),
                   description=f"ScaledDotProductAttention ({described})")


def _dtypes(match: PatternMatch) -> tuple[int, int]:
    """(the products' dtype, the softmax's): a Cast of the scores and one of the probabilities
    back (Keras computes its softmax in float32 under float16) come together or not at all."""
    softmax = match.node("softmax").attr["T"].type
    if softmax not in FLOAT_DTYPES:
        fail(f"a softmax of {dtype_name(softmax)}")
    casts = [label in match.nodes for label in ("scores_cast", "probs_cast")]
    if not any(casts):
        return softmax, softmax
    if not all(casts):
        fail("the scores are cast for the softmax but the probabilities not back, or the other way")
    product = match.node("scores").attr["T"].type
    back = match.node("probs_cast").attr["DstT"].type
    if back != product or product not in FLOAT_DTYPES:
        fail(f"the probabilities are cast to {dtype_name(back)}, the products are "
             f"{dtype_name(product)}")
    return product, softmax


def _nothing_between(match: PatternMatch) -> None:
    if "between" not in match.nodes:
        return
    view = match.view
    node = match.nodes["between"]
    index = view.index
    name, op = index.names[node], index.ops[node]
    stack, seen = [node], {node}
    while stack and len(seen) < 64:  # dropout: a random op a few steps above the node
        i = stack.pop()
        if index.ops[i] in RANDOM_OPS:
            fail(f"dropout ({name!r}, fed by the random {index.ops[i]} {index.names[i]!r}) lies "
                 "between the softmax and the product with v: an inference graph has none "
                 "(trace the model with training=False)")
        for p, _ in index.inputs[i]:
            if p not in seen and p != match.nodes["softmax"]:
                seen.add(p)
                stack.append(p)
    fail(f"a {op} ({name!r}) lies between the softmax and the product with v: the "
         "probabilities are not used as they are")


def _grouped(match: PatternMatch, parts: Operands, heads: int, kv_heads: int, absorbed: set[int]) -> int:
    """Grouped-query attention: when k and v are both repeated over the heads, the op takes
    them un-repeated (``parts`` then names those) and the kv heads are theirs."""
    if "N" not in parts.layout or kv_heads != heads:
        return kv_heads
    axis = parts.layout.index("N")
    found = [unrepeated(match, ref, axis, heads, len(parts.layout)) for ref in (parts.k, parts.v)]
    if any(f is None for f in found) or found[0][1] != found[1][1]:  # type: ignore[index]
        return kv_heads
    for ref, (source, _, nodes) in zip(("k_kv", "v_kv"), found, strict=True):  # type: ignore[misc]
        match.tensors[ref] = source  # a tensor found beyond the pattern, named for the fused op
        absorbed |= nodes
    parts.k, parts.v = "k_kv", "v_kv"
    return found[0][1]  # type: ignore[index]


def _heads(match: PatternMatch, q: str, k: str, layout: str) -> tuple[int, int]:
    """(num_heads, num_kv_heads) from the static shapes of q and k (1 without a head axis)."""
    if "N" not in layout:
        return 1, 1
    axis = layout.index("N") - len(layout)  # from the end: needs no rank
    counts = []
    for ref in (q, k):
        count = dim(match.view, match.tensor(ref), axis)
        if count is None:
            fail(f"cannot tell the number of heads of {match.tensor_name(ref)!r} (layout {layout})")
        counts.append(count)
    return counts[0], counts[1]
