"""RMSNormFusionPass: root-mean-square normalization, wherever it sits -> ``RMSNorm(x, gamma)``.

``y = x / sqrt(mean(x ** 2, axes) + epsilon) * gamma``, in the forms real code writes
(``x`` is one tensor throughout; :mod:`.norm_patterns` lists the spellings):

* transformers ``TFT5LayerNorm``, Keras 3 ``RMSNormalization``
  (``keras.ops.rms_normalization``), keras-hub ``LlamaLayerNorm`` / ``MistralLayerNormalization``:
  ``x * rsqrt(mean(square(x)) + eps) * w`` (``Pow(x, 2)`` for the square in keras-hub);
* transformers ``TFMistralRMSNorm``: ``w * (x / sqrt(mean(square(x)) + eps))``;
* keras-hub Gemma ``RMSNormalization``: ``x * reciprocal(sqrt(var + eps)) * (1 + w)``.

Casts to float32 and back (Keras and keras-hub layers compute in at least float32) stay
where they are: the up-cast is the fused op's input and the down-cast reads its output,
so the op runs in the precision the layer computes in.

Decisions:

* **Gemma's ``1 + w``** stays outside the op: ``gamma`` is whatever tensor scales the
  normalised input, here the sum ``1 + w``, which depends on constants only (a back end
  folds it).  The op has one meaning (``gamma`` multiplies) instead of a flag that every
  back end must implement, and the graph computes ``1 + w`` exactly as the model did.
* **Epsilon 0** is still an RMS norm: ``x * rsqrt(mean(x ** 2))`` is fused with
  ``epsilon = 0.0``, since the op then computes exactly that.
* **``axes``** are the reduction axes as the graph gives them (``[-1]`` from Keras, ``-1``
  from ``tf.reduce_mean(..., axis=-1)`` becomes ``[-1]``); they must be the input's
  trailing axes, and gamma must have the shape of those axes.

Not RMS norms: layer norms (the mean is subtracted, or the input is ``x - mean(x)``:
refused with the reason), L2 normalization (``x / ||x||``, a sum rather than a mean: no
match), epsilon added to the root mean square (refused), a norm without a gamma (no match).
"""
from __future__ import annotations

from typing import Any, Sequence

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, one_of
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass
from .norm_checks import (
    axes_of, epsilon_of, float_dtype, independent_of, inner_readers, input_rank, name_of, params_shape,
    shape_of, trailing_dims, trailing_start,
)
from .norm_patterns import EPSILON, STD_EPSILON, mean_square, normaliser, scaled_forms


def rms_norm_reference(x: Any, gamma: Any, *, epsilon: float, axes: Sequence[int], T: Any) -> tuple[Any]:
    """``x / sqrt(mean(x ** 2 over axes) + epsilon) * gamma``, in the dtype of ``x``."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    mean_square_ = tf.reduce_mean(tf.square(x), [int(a) for a in axes], keepdims=True)
    return (x * tf.math.rsqrt(mean_square_ + tf.cast(epsilon, x.dtype)) * gamma,)


RMS_NORM = FusedOpDef(
    name="RMSNorm",
    inputs=(
        TensorArg("x", type_attr="T"),
        TensorArg("gamma", type_attr="T", description="scale, the shape of x's normalised (trailing) axes"),
    ),
    outputs=(TensorArg("y", type_attr="T", description="same shape as x"),),
    attrs=(
        AttrDef("epsilon", "float", description="added to the mean square (0: none)"),
        AttrDef("axes", "list(int)", description="the normalised axes as the graph gives them (trailing axes)"),
        AttrDef("T", "type"),
    ),
    same_shape={0: 0},
    reference=rms_norm_reference,
    description="RMS normalization: y = x / sqrt(mean(x ** 2, axes) + epsilon) * gamma",
)

X, GAMMA = "$x", "$gamma"
AXES, MEAN_SQUARE = "axes", "mean_square"


class RMSNormFusionPass(PatternFusionBasePass):
    """RMS norms (T5, Llama, Mistral, Gemma, Keras RMSNormalization) -> RMSNorm(x, gamma)."""

    name = "RMSNormFusionPass"
    fusion_type = "GraphFusion"
    description = "x * rsqrt(mean(x^2) + eps) * gamma (rsqrt, sqrt + div or reciprocal forms) -> RMSNorm"

    def define_patterns(self) -> list[OpPattern]:
        norm = normaliser(mean_square(X, AXES, MEAN_SQUARE), "rrms", "rms")
        return [OpPattern("RMSNorm", one_of(*scaled_forms(X, norm, GAMMA)))]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        return _rms_norm(match)


def _rms_norm(match: PatternMatch) -> FusedOp:
    if STD_EPSILON in match.nodes:
        fail("epsilon is added to the root mean square (sqrt(mean(x^2)) + epsilon), "
             "RMSNorm adds it to the mean square")
    dtype = float_dtype(match.view.index.nodes[match.root], "an RMS norm")
    _not_centred(match)
    axes = axes_of(match, AXES)
    x_shape = shape_of(match, "x")  # None: unknown (negative axes tell without a rank)
    rank = input_rank(match, "x", x_shape)
    trailing_start(axes, rank, "the input")
    independent_of(match, "gamma", "x", "gamma")
    params_shape(match, "gamma", trailing_dims(x_shape, rank, len(axes)), "gamma")
    inner_readers(match, {match.root})
    return FusedOp(
        RMS_NORM.name, inputs=["x", "gamma"],
        attrs={"epsilon": epsilon_of(match, EPSILON), "axes": axes, "T": dtype},
        description=f"RMSNorm over axes {axes}",
    )


def _not_centred(match: PatternMatch) -> None:
    """``x`` must not be ``a - mean(a)``: normalising that is a layer norm."""
    view = match.view
    index = view.index
    node = view.forwarded(match.tensor("x")[0])
    if index.ops[node] not in ("Sub", "SquaredDifference"):
        return
    first, second = (view.forwarded(index.data_input(node, k)[0]) for k in (0, 1))
    if index.ops[second] == "Mean" and view.forwarded(index.data_input(second, 0)[0]) == first:
        fail(f"the input {name_of(match, 'x')!r} is centred (x - mean(x)): normalising it by its "
             "root mean square is a layer norm, not an RMS norm")
