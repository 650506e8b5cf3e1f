"""GroupNormFusionPass: group normalization, wherever it sits -> ``GroupNorm(x, gamma, beta)``.

A group norm splits the channels of ``x`` into ``num_groups`` groups and normalises each
sample's group over the group's channels and all spatial axes.  Libraries write it as
(:mod:`.norm_patterns` lists the spellings of each step):

* reshape ``x`` to ``[N, ..., G, C/G]`` (channels last) or ``[N, G, C/G, ...]`` (channels
  first); moments over every axis but the batch and group axes; the affine step with
  gamma and beta reshaped to ``[1, ..., G, C/G]`` (or ``[1, G, C/G, 1, ...]``); reshape back
  to the shape of ``x``.  This is Keras 3 ``GroupNormalization`` (Keras' moments, its own
  affine spelling), tf_keras ``GroupNormalization`` (``tf.nn.weighted_moments`` with
  weights of ones, ``tf.nn.batch_normalization``), tf_slim ``group_norm`` and transformers'
  ``TFWav2Vec2GroupNorm`` / ``TFHubertGroupNorm`` (``tf.nn.moments``,
  ``tf.nn.batch_normalization``, shapes packed from ``tf.shape``);
* Sonnet's ``GroupNorm``: the same moments and ``tf.nn.batch_normalization`` without scale or
  offset, the reshape back, then ``* scale + offset`` with per-channel ``[C]`` parameters on
  the result (channels last);
* transformers' speech feature encoders (``feat_extract_norm="group"``: the first conv
  layer's norm has as many groups as channels) take the tensorflow-addons shortcut for
  ``groups == channels``: no reshape, moments over the spatial axes of channels-last
  ``x``, gamma and beta reshaped to ``[1, ..., 1, C]``.

A group count equal to the channel count is still a group norm, and is fused as
``GroupNorm`` with ``num_groups == C`` (never as ``InstanceNorm``), whichever way it is
written.  The shortcut form looks exactly like an instance norm's moments; it is taken
for a group norm only with the parameters reshaped to ``[1, ..., 1, C]`` as that library
lineage does: tf_slim ``instance_norm`` (parameters used as ``[C]``, or reshaped to
``[1, C, 1, 1]`` for NCHW) and hand-written instance norms stay as they are, for the
non-general ``ScopeInstanceNormPass`` to fuse when it is enabled.

Attributes: ``num_groups``, ``epsilon``, ``data_format`` (``NHWC``: channels last, the
last axis; ``NCHW``: channels at axis 1, whatever the rank) and ``T``.  Refused with the
reason: no gamma or no beta, epsilon added to the standard deviation, statistics over
other axes, parameters or a reshape back that do not fit, an inner tensor read outside.
Layer norms (trailing axes, no reshape into groups), instance norms and batch norms do
not match.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from ...core.fusion.refusal import fail
from ...core.graph.matching import PatternMatch
from ...core.graph.pattern import OpPattern, const, one_of, op
from ...core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass
from .norm_checks import (
    epsilon_of, float_dtype, independent_of, inner_readers, known_shape, params_shape, positive_axes,
    same_axes, show,
)
from .norm_patterns import (
    EPSILON, MEAN_AXES, OUTPUT, SHAPE, STD_EPSILON, VARIANCE_AXES, WEIGHT_AXES, affine_forms, moments, normaliser,
    ones_reshaped, weighted_moments,
)
from ...core.graph.vocabulary import ADD_OPS as ADD, MUL_OPS as MUL

NHWC, NCHW = "NHWC", "NCHW"


def group_norm_reference(x: Any, gamma: Any, beta: Any, *, num_groups: int, epsilon: float, data_format: str,
                         T: Any) -> tuple[Any]:
    """Normalise each sample's channel groups over the group's channels and the spatial axes,
    then scale and shift per channel; float16 and bfloat16 statistics in float32."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import

    rank = tf.rank(x)  # the rank may be unknown when the function is traced
    channel = rank - 1 if data_format == NHWC else tf.constant(1)
    shape = tf.shape(x)
    per_group = shape[channel] // num_groups
    grouped = tf.reshape(x, tf.concat([shape[:channel], [num_groups, per_group], shape[channel + 1:]], 0))
    low = x.dtype in (tf.float16, tf.bfloat16)
    stats_input = tf.cast(grouped, tf.float32) if low else grouped
    every = tf.range(1, rank + 1)
    axes = tf.boolean_mask(every, tf.not_equal(every, channel))  # all but the batch and group axes
    mean = tf.reduce_mean(stats_input, axes, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(stats_input, mean), axes, keepdims=True)
    params_shape = tf.concat([tf.ones([channel], tf.int32), [num_groups, per_group],
                              tf.ones([rank - channel - 1], tf.int32)], 0)
    scale = tf.cast(tf.reshape(gamma, params_shape), stats_input.dtype)
    offset = tf.cast(tf.reshape(beta, params_shape), stats_input.dtype)
    y = (stats_input - mean) * tf.math.rsqrt(variance + tf.cast(epsilon, stats_input.dtype)) * scale + offset
    return (tf.reshape(tf.cast(y, x.dtype), shape),)


GROUP_NORM = FusedOpDef(
    name="GroupNorm",
    inputs=(
        TensorArg("x", type_attr="T", description="rank >= 2, channels where data_format says"),
        TensorArg("gamma", type_attr="T", description="scale, one per channel: shape [C]"),
        TensorArg("beta", type_attr="T", description="offset, one per channel: shape [C]"),
    ),
    outputs=(TensorArg("y", type_attr="T", description="same shape as x"),),
    attrs=(
        AttrDef("num_groups", "int", description="channel groups; C when every channel is its own group"),
        AttrDef("epsilon", "float", description="added to the variance"),
        AttrDef("data_format", "string", description="NHWC (channels on the last axis) or NCHW (on axis 1)"),
        AttrDef("T", "type"),
    ),
    same_shape={0: 0},
    reference=group_norm_reference,
    description="Group normalization: per sample and group of C / num_groups channels, "
                "y = (x - mean) / sqrt(variance + epsilon) * gamma + beta",
)

X, GAMMA, BETA = "$x", "$gamma", "$beta"
#: Patterns (and the label of their last node) of the scale and offset applied after the reshape back.
AFTER, OFFSET_AFTER, AFFINE = "GroupNormScaledAfter", "GroupNormOffsetAfter", "affine"
GROUPED, GAMMA_GROUPED, BETA_GROUPED = "grouped", "gamma_grouped", "beta_grouped"


def _per_channel(value: np.ndarray) -> bool:
    """A reshape target ``[1, ..., 1, C]`` of rank >= 3 (channels last, C > 1)."""
    flat = np.asarray(value).reshape(-1)
    return value.ndim == 1 and flat.size >= 3 and bool(np.all(flat[:-1] == 1)) and flat[-1] > 1


def _not_last(value: np.ndarray) -> bool:
    """Reduction axes that do not name the last axis as -1 (a layer norm's, not spatial axes)."""
    return -1 not in np.asarray(value).reshape(-1).tolist()


def _tails(x: Any, gamma: Any | None, beta: Any | None, weighted: bool) -> list[Any]:
    """Every affine spelling of a group norm of ``x`` (its statistics plain or weighted by
    ``$weights``)."""
    stats = [moments(x)] + ([weighted_moments(x, "$weights")] if weighted else [])
    forms = []
    for s in stats:
        norm = normaliser(s.variance, "rstd", "std")
        forms.extend(affine_forms(x, s.mean, norm.factor, gamma, beta, label="normalised"))
    return forms


def _patterns() -> list[OpPattern]:
    # the reshapes are variables defined once: each is met several times, and its shape
    # expression (a Pack of sliced dimensions, say) is large
    defs = {"grouped": op("Reshape", X, SHAPE, label=GROUPED),
            "gamma_grouped": op("Reshape", GAMMA, SHAPE, label=GAMMA_GROUPED),
            "beta_grouped": op("Reshape", BETA, SHAPE, label=BETA_GROUPED),
            "weights": ones_reshaped(SHAPE)}
    grouped, gamma, beta = "$grouped", "$gamma_grouped", "$beta_grouped"

    def back(*tails: Any) -> Any:
        return op("Reshape", one_of(*tails), SHAPE, label=OUTPUT)

    partial = [t for g, b in ((gamma, None), (None, beta), (None, None)) for t in _tails(grouped, g, b, True)]
    channel_gamma = op("Reshape", GAMMA, const(where=_per_channel), label=GAMMA_GROUPED)
    channel_beta = op("Reshape", BETA, const(where=_per_channel), label=BETA_GROUPED)
    per_channel = moments(X, axes=_not_last)
    norm = normaliser(per_channel.variance, "rstd", "std")
    # the scale and offset applied per channel after the reshape back (Sonnet's GroupNorm)
    unscaled = _tails(grouped, None, None, True)
    after = op(ADD, op(MUL, back(*unscaled), GAMMA), BETA, label=AFFINE)
    offset_after = op(ADD, back(*unscaled), BETA, label=AFFINE)
    return [
        OpPattern("GroupNorm", back(*_tails(grouped, gamma, beta, True)), defs),
        OpPattern(AFTER, after, defs),
        OpPattern(OFFSET_AFTER, offset_after, defs),
        OpPattern("GroupNormWithoutScaleOrOffset", back(*partial), defs),
        OpPattern("GroupNormPerChannel", one_of(
            *affine_forms(X, per_channel.mean, norm.factor, channel_gamma, channel_beta, label=OUTPUT))),
    ]


class GroupNormFusionPass(PatternFusionBasePass):
    """Group norms (Keras 3, tf_keras, tf_slim, transformers' speech encoders) -> GroupNorm."""

    name = "GroupNormFusionPass"
    fusion_type = "GraphFusion"
    description = ("reshape into channel groups, moments, scale and shift, reshape back (or groups == "
                   "channels without the reshape) -> GroupNorm(x, gamma, beta)")

    def define_patterns(self) -> list[OpPattern]:
        return _patterns()

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        return _group_norm(match)


def _group_norm(match: PatternMatch) -> FusedOp:
    if match.pattern.name == OFFSET_AFTER:
        independent_of(match, "beta", "x", "the offset")
        fail("no gamma (scale=False): the offset is added after the reshape back, with no scale; "
             "GroupNorm needs both a scale and an offset input")
    if match.pattern.name == "GroupNormWithoutScaleOrOffset":
        params = ((GAMMA_GROUPED, "gamma (scale=False)"), (BETA_GROUPED, "beta (center=False)"))
        missing = [what for label, what in params if label not in match.nodes]
        fail(f"no {' and no '.join(missing)}: GroupNorm needs both a scale and an offset input")
    if STD_EPSILON in match.nodes:
        fail("epsilon is added to the standard deviation (sqrt(variance) + epsilon), "
             "GroupNorm adds it to the variance")
    dtype = float_dtype(match.view.index.nodes[match.root], "a group norm")
    x_shape = known_shape(match, "x", "the input")
    axes = same_axes(match, (MEAN_AXES, VARIANCE_AXES, WEIGHT_AXES))
    if match.pattern.name == "GroupNormPerChannel":
        groups, per_group, layout, broadcast = _per_channel_layout(x_shape, axes)
    else:
        groups, per_group, layout, broadcast = _grouped_layout(match, x_shape, axes)
        out_shape = known_shape(match, OUTPUT, "the reshaped result")
        if not _compatible(out_shape, x_shape):
            fail(f"the result is reshaped to {show(out_shape)}, not back to the input's {show(x_shape)}")
    channels = groups * per_group
    for ref, grouped_ref, what in (("gamma", GAMMA_GROUPED, "gamma"), ("beta", BETA_GROUPED, "beta")):
        independent_of(match, ref, "x", what)
        if match.pattern.name == AFTER:  # applied to the result, shaped like x: per channel only as [C], NHWC
            if layout != NHWC:
                fail(f"{what} is applied after the reshape back to a channels-first input; GroupNorm "
                     "takes it as [C] on the channel axis")
            params_shape(match, ref, [channels], f"{what} (applied after the reshape back)")
            continue
        params_shape(match, ref, [channels], what)
        params_shape(match, grouped_ref, broadcast, f"the reshaped {what}")
    inner_readers(match, {match.root})
    return FusedOp(
        GROUP_NORM.name, inputs=["x", "gamma", "beta"],
        attrs={"num_groups": groups, "epsilon": epsilon_of(match, EPSILON), "data_format": layout, "T": dtype},
        description=f"GroupNorm: {groups} group(s) of {per_group} channel(s), {layout}",
    )


def _compatible(a: list, b: list) -> bool:
    return len(a) == len(b) and all(p is None or q is None or p == q for p, q in zip(a, b, strict=True))


def _grouped_layout(match: PatternMatch, x_shape: list, axes: list[int]) -> tuple[int, int, str, list[int]]:
    """``(groups, channels per group, data_format, parameter broadcast shape)`` of the reshape
    into groups, with the statistics' axes checked against it."""
    g_shape = known_shape(match, GROUPED, "the input reshaped into groups")
    rank = len(x_shape)
    if len(g_shape) == rank + 1 and rank >= 2:
        last, first = rank - 1, 1
        if (_compatible(g_shape[:last], x_shape[:last]) and _split(g_shape, last, x_shape[last])):
            layout, channel = NHWC, last
        elif (_compatible(g_shape[:1] + g_shape[3:], x_shape[:1] + x_shape[2:])
              and _split(g_shape, first, x_shape[first])):
            layout, channel = NCHW, first
        else:
            layout = ""
        if layout:
            expected = [a for a in range(1, rank + 1) if a != channel]
            if positive_axes(axes, rank + 1) != expected:
                fail(f"the statistics reduce axes {axes} of the grouped input {show(g_shape)}, not "
                     f"{expected} (every axis but the batch and group axes): not a group norm")
            groups, per_group = g_shape[channel], g_shape[channel + 1]
            broadcast = [1] * (rank + 1)
            broadcast[channel], broadcast[channel + 1] = groups, per_group
            return groups, per_group, layout, broadcast
    fail(f"the input {show(x_shape)} is reshaped to {show(g_shape)}, which does not split its channel "
         "axis (last or second) into groups")


def _split(g_shape: list, axis: int, channels: int | None) -> bool:
    groups, per_group = g_shape[axis], g_shape[axis + 1]
    return None not in (groups, per_group, channels) and groups * per_group == channels


def _per_channel_layout(x_shape: list, axes: list[int]) -> tuple[int, int, str, list[int]]:
    """The shortcut for groups == channels: moments over the spatial axes of channels-last x."""
    rank = len(x_shape)
    channels = x_shape[-1]
    if rank < 3 or channels is None:
        fail(f"a per-channel normalization of an input of shape {show(x_shape)}: the group norm "
             "shortcut needs rank >= 3 and a known channel count")
    spatial = list(range(1, rank - 1))
    if positive_axes(axes, rank) != spatial:
        fail(f"the statistics reduce axes {axes}, not the spatial axes {spatial} of the input "
             f"{show(x_shape)}: not a group norm with one channel per group")
    return channels, 1, NHWC, [1] * (rank - 1) + [channels]
