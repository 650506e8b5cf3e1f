"""Folding an inference batch norm into the convolution before it, in numpy.

With ``scale = gamma / sqrt(variance + epsilon)`` per output channel, the batch norm
of ``conv(x, filter) + bias`` is ``conv(x, filter * scale) + (bias - mean) * scale + beta``.
A ``Conv2D`` filter is ``[h, w, in, out]``: output channel ``o`` is ``filter[..., o]``.
A depthwise filter is ``[h, w, in, multiplier]``: output channel ``i * multiplier + m``
is ``filter[:, :, i, m]``.  The filter layout is the same for NHWC and NCHW data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ....core.graph.protos import message_class

#: The rank of a 2-D convolution's output, and its channel axis per data format.
OUTPUT_RANK = 4
CHANNEL_AXIS = {"NHWC": 3, "NCHW": 1}


@dataclass(frozen=True)
class FoldedConvolution:
    """The new filter (the convolution's layout) and the per-channel bias, in float64."""

    filter: np.ndarray
    bias: np.ndarray


def output_channels(filter_shape: tuple[int, ...], depthwise: bool) -> int:
    """How many channels the convolution outputs, from its filter's shape (rank 4)."""
    return filter_shape[2] * filter_shape[3] if depthwise else filter_shape[3]


def exact_vector(value: np.ndarray, channels: int) -> np.ndarray | None:
    """``value`` when it is 1-D and has one entry per channel (as ``BiasAdd`` and
    ``FusedBatchNorm`` take their parameters), else None."""
    return value if value.shape == (channels,) else None


def broadcast_vector(value: np.ndarray, channel_axis: int, channels: int) -> np.ndarray | None:
    """The per-channel vector ``value`` amounts to when broadcast against a rank-4 tensor
    whose channels lie on ``channel_axis``; None when it would vary along another axis
    or widen the tensor (``[C]`` on NCHW data varies along W, not along channels)."""
    if value.ndim > OUTPUT_RANK:
        return None
    shape = (1,) * (OUTPUT_RANK - value.ndim) + tuple(value.shape)
    if any(size != 1 for axis, size in enumerate(shape) if axis != channel_axis):
        return None
    if shape[channel_axis] not in (1, channels):
        return None
    return np.broadcast_to(value.reshape(-1), (channels,))


def fold(filter_value: np.ndarray, *, depthwise: bool, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray,
         variance: np.ndarray, epsilon: float, bias: np.ndarray) -> FoldedConvolution:
    """The folded filter and bias; every vector has one entry per output channel."""
    scale = np.asarray(gamma, np.float64) / np.sqrt(np.asarray(variance, np.float64) + float(epsilon))
    shift = (np.asarray(bias, np.float64) - np.asarray(mean, np.float64)) * scale + np.asarray(beta, np.float64)
    weights = np.asarray(filter_value, np.float64)
    if depthwise:
        in_channels, multiplier = weights.shape[2], weights.shape[3]
        folded = weights * scale.reshape(in_channels, multiplier)
    else:
        folded = weights * scale
    return FoldedConvolution(folded, shift)


def nonpositive_channel(variance: np.ndarray, epsilon: float) -> int | None:
    """The first channel whose ``variance + epsilon`` is not positive (or not a number), if any."""
    bad = np.flatnonzero(~(np.asarray(variance, np.float64) + float(epsilon) > 0.0))
    return int(bad[0]) if bad.size else None


def const_attrs(value: np.ndarray, dtype: int, numpy_type: Any) -> dict[str, Any]:
    """The attributes of a ``Const`` node holding ``value`` as ``dtype`` (its numpy type given)."""
    AttrValue, TensorProto = message_class("AttrValue"), message_class("TensorProto")
    data = np.ascontiguousarray(np.asarray(value).astype(numpy_type))
    proto = TensorProto(dtype=dtype, tensor_content=data.tobytes())
    for size in data.shape:
        proto.tensor_shape.dim.add(size=int(size))
    return {"value": AttrValue(tensor=proto), "dtype": AttrValue(type=dtype)}
