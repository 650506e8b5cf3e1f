"""Op patterns of the normalizations real code writes, shared by the graph passes that fuse them.

A normalization is made of three parts, each written in a few ways:

* **statistics** of a tensor ``x`` over some axes, with kept dimensions:

  - ``tf.nn.moments``: ``mean = Mean(x)``, ``variance = Mean(SquaredDifference(x,
    StopGradient(mean)))``;
  - by hand: ``Mean(Square(x - mean))`` (also ``Pow(x - mean, 2)``, ``d * d``), or
    ``tf.math.reduce_variance``, which takes a mean of its own (a second ``Mean`` of x);
  - ``tf.nn.weighted_moments`` with weights of ones (tf_keras ``GroupNormalization``
    without a mask): ``DivNoNan(Sum(w * x), Sum(w + zeros))`` and the same of the
    squared differences;
  - the mean square of an RMS norm: ``Mean(Square(x))`` (also ``Pow(x, 2)``, ``x * x``);

* the **normaliser** of a statistic ``v``: ``Rsqrt(v + epsilon)`` or
  ``Reciprocal(Sqrt(v + epsilon))`` as a factor, ``Sqrt(v + epsilon)`` as a divisor,
  epsilon a scalar constant (or none: epsilon 0); ``Sqrt(v) + epsilon`` adds epsilon to
  the standard deviation instead, which the passes refuse;

* the **affine step** with scale ``gamma`` and offset ``beta``:

  - ``tf.nn.batch_normalization``: ``x * inv + (beta - mean * inv)``, ``inv = rstd * gamma``;
  - Keras 3 (``GroupNormalization``, ``ops.layer_normalization``):
    ``x * inv + (-mean * inv + beta)``;
  - tf_slim ``group_norm``: ``x * (rstd * gamma) + (-mean * rstd * gamma + beta)``;
  - by hand: ``(x - mean) * rstd * gamma + beta`` in any grouping, ``(x - mean) / std *
    gamma + beta`` and ``gamma * (x - mean) / std + beta``.

Each builder takes the sub-expressions it combines, so one pass can put a reshaped
input or reshaped parameters where another puts plain tensors.  Labels name the nodes a
pass reads attributes from (:data:`MEAN`, :data:`VARIANCE`, :data:`EPSILON`, ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...core.graph.pattern import ANY, const, one_of, op
from ...core.graph.vocabulary import ADD_OPS as ADD, DIV_OPS as DIV, MUL_OPS as MUL


#: Labels the patterns give the nodes passes read.
MEAN = "mean"
CENTRE = "centre"  # the second mean tf.math.reduce_variance takes
VARIANCE = "variance"
MEAN_AXES = "mean_axes"
CENTRE_AXES = "centre_axes"
VARIANCE_AXES = "variance_axes"
WEIGHT_AXES = "weight_axes"
EPSILON = "epsilon"
STD_EPSILON = "std_epsilon"  # Sqrt(v) + epsilon: epsilon on the standard deviation
INV = "inv"  # rstd * gamma, read twice by the batch-normalization forms
OUTPUT = "output"  # the node whose output is the normalised result


def product(a: Any, b: Any, c: Any) -> Any:
    """``a * b * c``: one product of three factors, which the matcher takes in any grouping and
    order (and through spellings such as ``a / sqrt(v)`` for ``a * rsqrt(v)``)."""
    return op(MUL, a, b, c)


def _scalar_float(value: np.ndarray) -> bool:
    return value.size == 1 and (value.dtype.kind == "f" or value.dtype.name == "bfloat16")


def _all_ones(value: np.ndarray) -> bool:
    return value.size > 0 and bool(np.all(np.asarray(value, dtype=np.float64) == 1.0))


def _all_zeros(value: np.ndarray) -> bool:
    return value.size > 0 and bool(np.all(np.asarray(value, dtype=np.float64) == 0.0))


def epsilon() -> Any:
    """A scalar floating-point constant, labelled :data:`EPSILON`."""
    return const(where=_scalar_float, label=EPSILON, description="a scalar epsilon")


def reduction(x: Any, axes_label: str, label: str | None = None, axes: Callable[[np.ndarray], bool] | None = None,
              ) -> Any:
    """``Mean(x, axes, keep_dims=True)`` with constant axes labelled ``axes_label`` (that
    ``axes`` accepts, if given)."""
    return op("Mean", x, const(label=axes_label, where=axes), label=label, keep_dims=True)


@dataclass(frozen=True)
class Moments:
    """The mean and variance expressions of one way of computing them."""

    mean: Any
    variance: Any


def moments(x: Any, axes: Callable[[np.ndarray], bool] | None = None) -> Moments:
    """Mean and variance of ``x`` as ``tf.nn.moments`` or hand-written code computes them
    (over constant axes that ``axes`` accepts, if given)."""
    mean = reduction(x, MEAN_AXES, MEAN, axes)
    # the variance subtracts that mean (tf.nn.moments reads it through StopGradient, named
    # here so that it joins the match when the mean was met first), or a second mean of its
    # own (tf.math.reduce_variance)
    centre = one_of(op("StopGradient", mean), mean, reduction(x, CENTRE_AXES, CENTRE, axes))
    # also SquaredDifference(x, centre) either way round, Pow(x - centre, 2), d * d (equivalent spellings)
    squared = op("Square", op("Sub", x, centre))
    return Moments(mean, reduction(squared, VARIANCE_AXES, VARIANCE, axes))


def ones_reshaped(shape: Any) -> Any:
    """Weights of ones (a constant, or ``tf.ones_like``) reshaped by ``shape``: what tf_keras
    ``GroupNormalization`` weighs its moments with when it has no mask.  Weights that are not
    all ones (a real mask) do not match."""
    ones = one_of(const(where=_all_ones, description="weights of ones"), op("OnesLike", ANY))
    return op("Reshape", ones, shape, label="weights")


def weighted_moments(x: Any, weights: Any) -> Moments:
    """Mean and variance of ``x`` as ``tf.nn.weighted_moments`` computes them with ``weights``
    (:func:`ones_reshaped`, usually as a variable defined once)."""
    zeros = one_of(const(where=_all_zeros, description="zeros"), op("ZerosLike", ANY))
    total = op("Sum", op(ADD, weights, zeros), const(label=WEIGHT_AXES), label="sum_of_weights", keep_dims=True)
    mean = op("DivNoNan", op("Sum", op(MUL, weights, x), const(label=MEAN_AXES), keep_dims=True), total,
              label=MEAN)
    squares = op("Sum", op(MUL, weights, op("SquaredDifference", x, mean, commutative=True)),
                 const(label=VARIANCE_AXES), keep_dims=True)
    return Moments(mean, op("DivNoNan", squares, total, label=VARIANCE))


def mean_square(x: Any, axes_label: str, label: str) -> Any:
    """``Mean(x ** 2)`` with kept dimensions: an RMS norm's statistic."""
    return reduction(op("Square", x), axes_label, label)  # also Pow(x, 2) and x * x


@dataclass(frozen=True)
class Normaliser:
    """How a statistic ``v`` divides: ``factor`` multiplies by ``1 / sqrt(v + epsilon)``,
    ``divisor`` is ``sqrt(v + epsilon)``; ``divisor`` also matches ``sqrt(v) + epsilon``
    (labelled :data:`STD_EPSILON`), which the passes refuse with the reason."""

    factor: Any
    divisor: Any


def normaliser(statistic: Any, root_label: str, sqrt_label: str) -> Normaliser:
    """The normaliser of ``statistic``; the factor's node is labelled ``root_label``, a
    ``Sqrt`` ``sqrt_label``."""
    plus_epsilon = op(ADD, statistic, epsilon(), label="plus_epsilon")
    stabilised = one_of(plus_epsilon, statistic)
    sqrt = op("Sqrt", stabilised, label=sqrt_label)
    factor = op("Rsqrt", stabilised, label=root_label)  # also Reciprocal(Sqrt(...)), Pow(..., -0.5)
    on_std = op(ADD, op("Sqrt", statistic, label=sqrt_label), epsilon(), label=STD_EPSILON)
    return Normaliser(factor, one_of(sqrt, on_std))


def affine_forms(x: Any, mean: Any, rstd: Any, gamma: Any | None, beta: Any | None,
                 label: str = OUTPUT) -> list[Any]:
    """The ways libraries scale by ``rstd`` (and ``gamma``) and shift (by ``beta``) after
    moments, each rooted at the final Add (labelled ``label``): ``tf.nn.batch_normalization``,
    Keras 3 and tf_slim ``group_norm``.  Without ``gamma`` or ``beta`` (``scale=False`` /
    ``center=False``) the forms those libraries then produce."""
    inv = op(MUL, rstd, gamma, label=INV) if gamma is not None else rstd
    scaled = op(MUL, x, inv)
    negated = op(MUL, op("Neg", mean), inv)  # -mean * inv
    if beta is None:
        forms = [op(ADD, scaled, negated, label=label)]
        if gamma is not None:  # tf_slim: -mean * rstd, then times gamma
            forms.append(op(ADD, scaled, op(MUL, op(MUL, op("Neg", mean), rstd), gamma), label=label))
        return forms
    forms = [op(ADD, scaled, op("Sub", beta, op(MUL, mean, inv)), label=label),
             op(ADD, scaled, op(ADD, negated, beta), label=label)]
    if gamma is not None:
        forms.append(op(ADD, scaled, op(ADD, op(MUL, op(MUL, op("Neg", mean), rstd), gamma), beta), label=label))
    return forms


def scaled_forms(value: Any, norm: Normaliser, gamma: Any) -> list[Any]:
    """``value`` (``x - mean`` for a layer norm, ``x`` for an RMS norm) normalised and scaled
    by ``gamma`` the ways hand-written code does it: ``value * factor * gamma`` in any
    grouping, ``value / divisor * gamma`` and ``gamma * value / divisor``."""
    return [
        product(value, norm.factor, gamma),
        op(MUL, op(DIV, value, norm.divisor), gamma),
        op(DIV, op(MUL, value, gamma), norm.divisor),
    ]


#: The shape operand of a Reshape: a constant, a tensor's ``tf.shape``, or (Keras with an
#: unknown batch size, tf_keras, transformers) a Pack of constants and dimensions sliced from
#: a shape, some divided by a group count.
_SHAPE_SOURCE = one_of(const(), op("Shape", ANY))
_SLICE = op("StridedSlice", _SHAPE_SOURCE, const(), const(), const())
_DIMENSION = one_of(const(), _SLICE, op("FloorDiv", _SLICE, const()))
SHAPE = one_of(const(), op("Shape", ANY), *(op("Pack", *([_DIMENSION] * n)) for n in range(2, 8)))
