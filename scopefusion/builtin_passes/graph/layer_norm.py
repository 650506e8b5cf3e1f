"""LayerNormFusionPass: layer norms written without a name scope of their own -> ``LayerNorm``.

``ScopeLayerNormPass`` fuses layer norms that sit in a scope of their own (tf_slim,
Keras layers, GPT-2's ``norm``), and it runs first; what it fused is a ``LayerNorm``
node by the time this pass runs.  This pass finds the ones written straight into a
larger function, by their wiring (every form of :mod:`.norm_patterns`):

* hand-written statistics: ``mean = tf.reduce_mean(x, -1, keepdims=True)`` and
  ``tf.reduce_mean(tf.square(x - mean), -1, keepdims=True)`` or
  ``tf.math.reduce_variance(x, -1, keepdims=True)``; or ``tf.nn.moments(x, [-1],
  keepdims=True)``;
* then ``(x - mean) * tf.math.rsqrt(variance + eps) * gamma + beta`` (any grouping),
  ``(x - mean) / tf.sqrt(variance + eps) * gamma + beta``, ``gamma * (x - mean) /
  tf.sqrt(...) + beta``, ``tf.nn.batch_normalization(x, mean, variance, beta, gamma,
  eps)``, or the Keras 3 and tf_slim spellings of the same.

The result is ``LayerNorm(x, gamma, beta)`` with ``begin_norm_axis`` the first reduced
axis (negative when the graph counts from the end), ``begin_params_axis`` from gamma's
rank, ``epsilon`` (0 when none is added) and ``T``.  Only its ``y`` output is wired,
unless the graph reads the mean or the variance elsewhere: those are exactly the op's
``mean`` and ``variance`` outputs, and are then wired too.

Refused, with the reason: a missing gamma or beta (``scale=False`` / ``center=False``
in the batch-normalization spellings, ``(x - mean) * rstd + beta``), epsilon added to
the standard deviation (``(x - mean) / (tf.sqrt(variance) + eps)``), reduction over
axes that are not the input's trailing axes (instance, group and batch norms),
gamma or beta not shaped like those trailing axes, an input that is not centred
(``x * rsqrt(variance + eps) * gamma + beta``, RMS-style scaling) and an inner
statistic read outside.  RMS norms (no mean at all) do not match.

Not matched at all: ``(x - mean) * rsqrt(variance + eps) * gamma`` with no beta, and the
same without gamma.  Their last node is a Mul, the same Mul that every layer norm of that
spelling holds one step before its offset Add: a pattern rooted there would match inside
each complete layer norm too, and the engine would report those inner matches as
refusals of their own.  (``x * rsqrt(variance + eps) * gamma`` without beta, Keras'
``rms_scaling``, is in its own scope, where the scope pass refuses it.)  When such a norm is
followed by a residual block, ``h + f(h)``, the complete pattern matches the residual Add as
the offset: that is refused as what it is, a norm without beta followed by a residual
connection.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...core.fusion.refusal import fail
from ...core.graph.matching import PatternMatch
from ...core.graph.vocabulary import CONTROL
from ...core.graph.pattern import OpPattern, const, one_of, op
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass
from ..scope.layer_norm.op import LAYER_NORM
from .norm_checks import (
    epsilon_of, float_dtype, independent_of, inner_readers, input_rank, known_shape, name_of,
    params_shape, same_axes, shape_of, trailing_dims, trailing_start,
)
from .norm_patterns import (
    ADD, CENTRE_AXES, DIV, EPSILON, INV, MEAN, MEAN_AXES, MUL, OUTPUT, STD_EPSILON, VARIANCE, VARIANCE_AXES,
    affine_forms, moments, normaliser, scaled_forms,
)

X = "$x"
RSTD, STD = "rstd", "std"


def _parameter(name: str) -> Any:
    """``$name``, possibly reshaped first (Keras 3 ``ops.layer_normalization`` gives gamma and
    beta leading 1s to the input's rank): the Reshape joins the match."""
    return one_of(op("Reshape", f"${name}", const(label=f"{name}_shape"), label=f"{name}_reshaped"), f"${name}")


GAMMA, BETA = _parameter("gamma"), _parameter("beta")

#: Patterns of layer norms the op cannot take, and why.
_MISSING = {
    "LayerNormWithoutScale": "no gamma (scale=False): LayerNorm needs a scale input",
    "LayerNormWithoutOffset": "no beta (center=False): LayerNorm needs an offset input",
    "LayerNormWithoutScaleOrOffset": "no gamma and no beta (scale=False, center=False): LayerNorm needs both",
    "UncentredNorm": ("the output scales x itself, not x - mean, by 1 / sqrt(variance + epsilon) "
                      "(RMS-style scaling): not a layer norm"),
}


def _patterns() -> list[OpPattern]:
    stats = moments(X)
    norm = normaliser(stats.variance, RSTD, STD)
    centred = op("Sub", X, stats.mean)
    shifted = [op(ADD, scaled, BETA, label=OUTPUT) for scaled in scaled_forms(centred, norm, GAMMA)]
    unscaled = [op(ADD, op(MUL, centred, norm.factor), BETA, label=OUTPUT),
                op(ADD, op(DIV, centred, norm.divisor), BETA, label=OUTPUT)]
    uncentred = [op(ADD, scaled, BETA, label=OUTPUT) for scaled in scaled_forms(X, norm, GAMMA)]

    def forms(gamma: Any, beta: Any, extra: Sequence[Any] = ()) -> Any:
        return one_of(*extra, *affine_forms(X, stats.mean, norm.factor, gamma, beta))

    return [
        OpPattern("LayerNorm", forms(GAMMA, BETA, shifted)),
        OpPattern("LayerNormWithoutScale", forms(None, BETA, unscaled)),
        OpPattern("LayerNormWithoutOffset", forms(GAMMA, None)),
        OpPattern("LayerNormWithoutScaleOrOffset", forms(None, None)),
        OpPattern("UncentredNorm", one_of(*uncentred)),
    ]


class LayerNormFusionPass(PatternFusionBasePass):
    """Layer norms without a scope of their own (hand-written, tf.nn.moments) -> LayerNorm."""

    name = "LayerNormFusionPass"
    fusion_type = "GraphFusion"
    description = ("layer norms written without a scope of their own (reduce_mean/reduce_variance or "
                   "tf.nn.moments, then rsqrt or sqrt, or tf.nn.batch_normalization) -> LayerNorm")

    def define_patterns(self) -> list[OpPattern]:
        return _patterns()

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        return _layer_norm(match)


def _layer_norm(match: PatternMatch) -> FusedOp:
    missing = _MISSING.get(match.pattern.name)
    if missing:
        fail(missing)
    if STD_EPSILON in match.nodes:
        fail("epsilon is added to the standard deviation (sqrt(variance) + epsilon), "
             "LayerNorm adds it to the variance")
    dtype = float_dtype(match.node(OUTPUT), "a layer norm")
    axes = same_axes(match, (MEAN_AXES, CENTRE_AXES, VARIANCE_AXES))
    x_shape = shape_of(match, "x")  # None: unknown (negative axes tell without a rank)
    rank = input_rank(match, "x", x_shape)
    begin_norm_axis = trailing_start(axes, rank, "the input")
    gamma, beta = _unreshaped(match, "gamma"), _unreshaped(match, "beta")
    independent_of(match, gamma, "x", "gamma")
    independent_of(match, beta, "x", "beta", after=_added_to(match, beta))
    gamma_shape = known_shape(match, gamma, "gamma")
    if not gamma_shape:
        fail(f"gamma {name_of(match, gamma)!r} is a scalar; LayerNorm needs one of the input's "
             "trailing shape")
    trailing = trailing_dims(x_shape, rank, len(gamma_shape))  # unknown sizes fit any gamma size but 1
    params_shape(match, gamma, trailing, "gamma")
    params_shape(match, beta, trailing, "beta")
    outputs = _statistics_outputs(match)
    inner_readers(match, {match.nodes[label] for label in (OUTPUT, *outputs[1:])})
    normaliser_text = "rsqrt" if RSTD in match.nodes and match.node(RSTD).op == "Rsqrt" else "1 / sqrt"
    form = "tf.nn.batch_normalization form" if INV in match.nodes else "(x - mean) scaled form"
    return FusedOp(
        LAYER_NORM.name, inputs=["x", gamma, beta], outputs=outputs,
        attrs={"begin_norm_axis": begin_norm_axis, "begin_params_axis": -len(gamma_shape),
               "epsilon": epsilon_of(match, EPSILON), "T": dtype},
        description=f"LayerNorm over axes {axes}: {form}, {normaliser_text}(variance + epsilon)",
    )


def _added_to(match: PatternMatch, beta: str) -> int | None:
    """The node the output Add adds beta to (the scaled, normalised input)."""
    index = match.view.index
    add = match.nodes[OUTPUT]
    others = [p for p, port in index.inputs[add] if port != CONTROL and (p, port) != match.tensor(beta)]
    return others[0] if len(others) == 1 else None


def _unreshaped(match: PatternMatch, name: str) -> str:
    """The parameter the op takes: the source of a Reshape that only prepends 1s, else the
    tensor the normalization multiplies (or adds), reshaped or not."""
    reshaped = f"{name}_reshaped"
    if reshaped not in match.nodes:
        return name
    target = [int(d) for d in match.consts[f"{name}_shape"].reshape(-1)]
    source = match.view.static_shape(match.tensor(name))
    if source is not None and len(target) >= len(source) and target[len(target) - len(source):] == source \
            and all(d == 1 for d in target[:len(target) - len(source)]):
        return name
    return reshaped


def _statistics_outputs(match: PatternMatch) -> list[str]:
    """``[output, mean, variance]`` when the graph reads the mean or the variance outside the
    match (they are exactly the op's mean and variance outputs), else ``[]`` (y only)."""
    index = match.view.index
    for label in (MEAN, VARIANCE):
        node = match.nodes[label]
        if any(c not in match.members and port == 0 for c, port, _ in index.consumers[node]):
            return [OUTPUT, MEAN, VARIANCE]
    return []
