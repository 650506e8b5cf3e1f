"""Decoding the values of constant tensors (``TensorProto``) into numpy arrays."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .tensor_codec import UnsupportedDtype, make_ndarray

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


#: A constant that stores fewer values than it declares (a "splat": one value repeated) is
#: expanded only up to this many elements; past it, it is not read (a 19 KB file can declare
#: a tensor of billions of elements).
MAX_EXPANDED_ELEMENTS = 1 << 20


def declared_shape(tensor: Any) -> list[int]:
    """The shape a TensorProto declares, without decoding its values."""
    return [d.size for d in tensor.tensor_shape.dim]


def tensor_value(tensor: Any) -> "np.ndarray | None":
    """A TensorProto's value, decoded in numpy (rare dtypes such as quantized ones by TensorFlow).
    None for a value that would have to be expanded past :data:`MAX_EXPANDED_ELEMENTS`, or
    whose declared shape is invalid."""
    shape = declared_shape(tensor)
    if any(d < 0 for d in shape):
        return None
    count = 1
    for d in shape:
        count *= d
    stored = len(tensor.tensor_content) > 0 or _stored_values(tensor) >= count
    if not stored and count > MAX_EXPANDED_ELEMENTS:
        return None
    try:
        return make_ndarray(tensor)
    except UnsupportedDtype:  # quantized and other rare dtypes: TensorFlow decodes them
        from tensorflow.python.framework import tensor_util  # deferred: TensorFlow costs seconds to import

        try:
            return tensor_util.MakeNdarray(tensor)
        except (TypeError, ValueError):
            return None
    except (TypeError, ValueError):  # values that do not fit the declared shape or dtype
        return None


def _stored_values(tensor: Any) -> int:
    """How many values a TensorProto stores in its typed value fields."""
    return max((len(getattr(tensor, f)) for f in _VALUE_FIELDS), default=0)


_VALUE_FIELDS = ("float_val", "double_val", "int_val", "int64_val", "bool_val", "half_val", "string_val",
                 "scomplex_val", "dcomplex_val", "uint32_val", "uint64_val")
