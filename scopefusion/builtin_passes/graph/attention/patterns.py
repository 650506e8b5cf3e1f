"""The op pattern of scaled dot-product attention, from the second product back to q, k and v.

Read from the output: ``context = probs @ v`` (``BatchMatMul``, ``MatMul`` or ``Einsum``),
``probs = Softmax(logits)``, ``logits`` the scaled scores with up to :data:`MAX_STEPS`
additive terms, boolean selections or GPT-2's ``w * b - c * (1 - b)`` applied to them,
``scores = q @ k^T`` with a scale on q, on k or on the product (a ``Mul`` or a ``RealDiv``
by a constant, ``sqrt`` or ``rsqrt`` of one).  Which input of the first product is the
query, whether k is transposed and what every constant is worth, the pass reads from the
match (:mod:`.reading`).

A second pattern matches look-alikes only so that they are refused with the reason instead
of being no match: ``between`` (an op between the softmax and the second product: dropout,
a Cast) and ``softmax_transpose`` (a softmax over another axis).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....core.graph.pattern import ANY, OpPattern, const, one_of, op
from ....core.graph.vocabulary import ADD_OPS as ADD, DIV_OPS as DIV

BMM = ("BatchMatMulV2", "BatchMatMul", "BatchMatMulV3", "MatMul")
PRODUCTS = BMM + ("Einsum",)
SELECT = ("SelectV2", "Select")
#: How many masking steps (additive terms, selections) the logits may have.
MAX_STEPS = 3


def _floating(value: np.ndarray) -> bool:
    return value.dtype.kind == "f"


def _scalar(value: np.ndarray) -> bool:
    return value.size == 1


def _uniform(value: np.ndarray) -> bool:
    """One number, as a scalar or over a whole shape (``tf.ones_like(scores) * c``)."""
    return value.size >= 1 and bool((value == value.reshape(-1)[0]).all())


# Labels: the alternatives of one step share their op's label (``<prefix>_scale``, ``step<n>``) and
# the pass tells them apart by the op's type; a label only one alternative had would make every
# alternative below it a different case when the pattern's smallest match is counted.


def factor(prefix: str) -> Any:
    """A scale factor: a float constant (any shape: the pass refuses one that is not a scalar),
    or the square root or reciprocal square root of a scalar constant (``sqrt(d)`` computed in
    the graph, a ``Cast`` of an integer ``d`` included)."""
    return one_of(
        const(where=_floating, label=f"{prefix}_const", description="a float constant"),
        op("Sqrt", const(where=_scalar, label=f"{prefix}_sqrt_of")),
        op("Rsqrt", const(where=_scalar, label=f"{prefix}_rsqrt_of")),
    )


def scaled(x: Any, prefix: str) -> Any:
    """``x * f``, ``x / f`` (the op labelled ``<prefix>_scale``) or ``x`` itself."""
    return one_of(op("Mul", x, factor(prefix), label=f"{prefix}_scale"),
                  op(DIV, x, factor(prefix), label=f"{prefix}_scale"),
                  x)


#: k as the product reads it: transposed over its last two axes by a Transpose, or not
KEY = one_of(op("Transpose", scaled("$k", "k"), const(label="k_perm"), label="k_transpose"), scaled("$k", "k"))
PRODUCT = op(PRODUCTS, scaled("$q", "q"), KEY, label="scores")
#: the product, or its transpose over the last two axes (keras-hub computes k q^T, then transposes),
#: or a Cast of it (Keras under float16 computes its softmax in float32)
_PRODUCT = one_of(PRODUCT, op("Transpose", PRODUCT, const(label="scores_perm"), label="scores_transpose"))
_SCALED = scaled(one_of(_PRODUCT, op("Cast", _PRODUCT, label="scores_cast")), "s")
#: the scaled scores, or (Keras' grouped einsum as a batch matmul: the query heads of each kv head
#: stacked along the rows) viewed ``[.., kv_heads, groups, q_len, k_len]`` for the masks and softmax
SCORES = one_of(op("Reshape", _SCALED, ANY, label="rows_split"), _SCALED)


def logits(scores: Any, steps: int = MAX_STEPS) -> Any:
    """``scores`` after up to ``steps`` masking steps (the op labelled ``step<n>``, step ``n`` the
    outermost): an added or subtracted term (``$term<n>``), a selection ``where(keep, x, fill)``, GPT-2's
    ``x * band - c * (1 - band)`` or a term added to the scores viewed per window."""
    if steps == 0:
        return scores
    inner = logits(scores, steps - 1)
    n = steps
    band = op("Sub", op("Mul", inner, f"$band{n}"),
              op("Mul", const(where=_scalar, label=f"band_c{n}"), op("Sub", const(1.0), f"$band{n}")),
              label=f"step{n}")
    # Swin's shifted windows: the scores viewed as [batch / windows, windows, ..] by a Reshape, a
    # term added per window, reshaped back (the pass checks that the views only split the batch)
    windowed = op("Reshape", op(ADD, op("Reshape", inner, ANY, label=f"window_split{n}"), f"$term{n}",
                                label=f"step{n}"), ANY, label=f"window_merge{n}")
    return one_of(
        op(ADD, inner, f"$term{n}", label=f"step{n}"),
        op(SELECT, f"$keep{n}", inner, const(where=_uniform, label=f"fill{n}"), label=f"step{n}"),
        band,
        windowed,
        # a term subtracted (keras-self-attention: x - 1e4 * (1 - keep)); after the band, which
        # is a Sub too
        op("Sub", inner, f"$term{n}", label=f"step{n}"),
        inner,
    )


SOFTMAX = one_of(op("Softmax", logits(SCORES), label="softmax"),
                 op("Cast", op("Softmax", logits(SCORES), label="softmax"), label="probs_cast"))
#: the probabilities, or Keras' masked softmax zeroing the dropped keys' after it: where(keep, p, 0)
_PROBS = one_of(SOFTMAX, op(SELECT, "$keep_after", SOFTMAX, const(0.0, label="zero"), label="zero_dropped"))
#: the probabilities, viewed back as the scores were before the softmax (``rows_split``)
PROBS = one_of(op("Reshape", _PROBS, ANY, label="rows_merge"), _PROBS)
ATTENTION_PATTERN = OpPattern("ScaledDotProductAttention", op(PRODUCTS, PROBS, "$v", label="context"))

# Look-alikes, matched only to be refused with the reason: an op between the softmax and the
# product with v (dropout left in the graph, a Cast), a softmax over another axis
# (tf.nn.softmax(x, axis) moves that axis last and back).  q and k are any ops here: a
# failed look-alike then never got far enough to be reported as a near miss.
_ANY_OP = op((), any_inputs=True)
_LOOK_ALIKE_LOGITS = logits(scaled(op(PRODUCTS, _ANY_OP, _ANY_OP, label="scores"), "s"))
_LOOK_ALIKE_SOFTMAX = op("Softmax", _LOOK_ALIKE_LOGITS, label="softmax")
#: ops that may sit between the softmax and the product: dropout's, a Cast
BETWEEN = ("Mul", "Select", "SelectV2", "RealDiv", "Div", "Cast")


def between(x: Any, label: str) -> Any:
    """An op of :data:`BETWEEN` reading ``x`` (in any of its inputs)."""
    return one_of(op(BETWEEN, x, label=label),
                  op(BETWEEN, x, ANY, label=label, commutative=True),
                  op(BETWEEN, ANY, x, ANY, label=label))


LOOK_ALIKE_PATTERN = OpPattern("AttentionLookAlike", op(PRODUCTS, one_of(
    between(_LOOK_ALIKE_SOFTMAX, "between"),
    # tf.nn.dropout: where(keep, p * (1 / (1 - rate)), 0)
    op(SELECT, ANY, op("Mul", _LOOK_ALIKE_SOFTMAX, ANY, label="between_inner"), ANY, label="between"),
    op("Transpose", op("Softmax", op("Transpose", _LOOK_ALIKE_LOGITS, ANY), label="softmax"), ANY,
       label="softmax_transpose"),
), "$v", label="context"))
