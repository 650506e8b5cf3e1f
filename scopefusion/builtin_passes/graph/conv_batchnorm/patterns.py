"""The op patterns of a convolution followed by an inference batch norm, as libraries emit them.

The convolution is a ``Conv2D`` or ``DepthwiseConv2dNative`` of ``x`` by a filter,
optionally followed by a ``BiasAdd``.  A 1-D convolution (Keras ``Conv1D``, ``tf.nn.conv1d``)
is a ``Conv2D`` over an ``ExpandDims`` of its input whose output is squeezed back
(``Squeeze``), dilated ones (Keras 3) then ``BatchToSpaceND``: both keep the channels last.  The batch norm is one of:

* ``FusedBatchNorm`` / ``V2`` / ``V3`` (tf_keras ``BatchNormalization``, tf_slim
  ``batch_norm(fused=True)``, Keras applications under tf_keras)::

      FusedBatchNormV3(conv, gamma, beta, mean, variance)    # output 0

* ``tf.nn.batch_normalization`` written out as ops (Keras 3 ``BatchNormalization``,
  tf_keras and tf_slim with ``fused=False``)::

      inv   = Rsqrt(variance + epsilon) * gamma              # gamma optional
      shift = beta - mean * inv                              # no beta: -mean * inv (Neg, Mul)
      y     = conv * inv + shift

Parameters are matched as libraries pass them: a constant (read through
``Identity`` and ``Cast``), the constant reshaped to broadcast over channels
first (Keras 3 and tf_slim on NCHW data: ``Reshape(c, [1, C, 1, 1])``), or, for
Keras 3's conv bias, reshaped and squeezed back (``Squeeze(Reshape(c, [1, 1, 1, C]))``).
Anything else is still matched, through a variable ``$<name>_tensor``, so that the
pass can say that the parameter is no constant instead of missing the match.
"""
from __future__ import annotations

from typing import Any

from ....core.graph.pattern import OpPattern, const, one_of, op
from ....core.graph.vocabulary import ADD_OPS as ADDS

CONVOLUTIONS = ("Conv2D", "DepthwiseConv2dNative")
FUSED_BATCH_NORMS = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")

#: Pattern names.
FUSED = "ConvFusedBatchNorm"
DECOMPOSED = "ConvBatchNormalization"

#: The parameters a match may hold; each is a constant label when it is a constant.
PARAMETERS = ("filter", "bias", "gamma", "beta", "mean", "variance")


def _is_scalar(value: Any) -> bool:
    return bool(value.size == 1)


def parameter(name: str) -> Any:
    """A per-channel parameter: a constant, reshaped or reshaped and squeezed, else any tensor.

    Labels: ``<name>`` (the constant), ``<name>_shape`` and ``<name>_reshape`` (the
    Reshape), ``<name>_squeeze`` (the Squeeze); variable ``<name>_tensor`` otherwise."""
    value = const(label=name)
    reshaped = op("Reshape", value, const(label=f"{name}_shape"), label=f"{name}_reshape")
    return one_of(value, reshaped, op("Squeeze", reshaped, label=f"{name}_squeeze"), f"${name}_tensor")


def convolution_output() -> Any:
    """``conv(x, filter)``, or that plus a bias (``BiasAdd``); the convolution may be a 1-D one
    (``Squeeze`` of a ``Conv2D``'s unit axis, then ``BatchToSpaceND`` when it is dilated)."""
    conv = op(CONVOLUTIONS, "$x", one_of(const(label="filter"), "$filter_tensor"), label="conv")
    squeezed = op("Squeeze", conv, label="conv_squeeze")
    dilated = op("BatchToSpaceND", squeezed, const(label="block_shape"), const(label="crops"),
                 label="conv_batch_to_space")
    conv_out = one_of(conv, squeezed, dilated)
    return one_of(op("BiasAdd", conv_out, parameter("bias"), label="bias_add"), conv_out)


def fused_pattern() -> OpPattern:
    """A ``FusedBatchNorm*`` of a convolution's output (its output 0)."""
    root = op(FUSED_BATCH_NORMS, convolution_output(), parameter("gamma"), parameter("beta"), parameter("mean"),
              parameter("variance"), label="bn")
    return OpPattern(FUSED, root)


def decomposed_pattern() -> OpPattern:
    """``tf.nn.batch_normalization`` of a convolution's output, with or without gamma and beta."""
    epsilon = const(label="epsilon", where=_is_scalar, description="a scalar epsilon")
    rsqrt = op("Rsqrt", op(ADDS, parameter("variance"), epsilon, label="variance_epsilon"), label="rsqrt")
    inv = one_of(op("Mul", rsqrt, parameter("gamma"), label="inv"), rsqrt)
    shift = one_of(
        op("Sub", parameter("beta"), op("Mul", parameter("mean"), inv, label="mean_inv"), label="shift"),
        op("Mul", op("Neg", parameter("mean"), label="neg_mean"), inv, label="shift"),
    )
    root = op(ADDS, op("Mul", convolution_output(), inv, label="scaled"), shift, label="bn")
    return OpPattern(DECOMPOSED, root)
