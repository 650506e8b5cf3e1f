"""Decoding the values of constant tensors (``TensorProto``) into numpy arrays."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .vocabulary import DT_BOOL, DT_DOUBLE, DT_FLOAT, DT_INT32, DT_INT64

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

_NUMPY_BY_DTYPE = {DT_FLOAT: "float32", DT_DOUBLE: "float64", DT_INT32: "int32", DT_INT64: "int64", DT_BOOL: "bool"}
_FIELD_BY_DTYPE = {DT_FLOAT: "float_val", DT_DOUBLE: "double_val", DT_INT32: "int_val", DT_INT64: "int64_val",
                   DT_BOOL: "bool_val"}


#: A constant that stores fewer values than it declares (a "splat": one value repeated) is
#: expanded only up to this many elements; past it, it is not read (a 19 KB file can declare
#: a tensor of billions of elements).
MAX_EXPANDED_ELEMENTS = 1 << 20


def declared_shape(tensor: Any) -> list[int]:
    """The shape a TensorProto declares, without decoding its values."""
    return [d.size for d in tensor.tensor_shape.dim]


def tensor_value(tensor: Any) -> "np.ndarray | None":
    """A TensorProto's value; common dtypes are decoded directly, others by TensorFlow.
    None for a value that would have to be expanded past :data:`MAX_EXPANDED_ELEMENTS`, or
    whose declared shape is invalid."""
    import numpy as np

    shape = declared_shape(tensor)
    if any(d < 0 for d in shape):
        return None
    count = 1
    for d in shape:
        count *= d
    stored = len(tensor.tensor_content) > 0 or _stored_values(tensor) >= count
    if not stored and count > MAX_EXPANDED_ELEMENTS:
        return None
    name = _NUMPY_BY_DTYPE.get(tensor.dtype)
    if name is not None:
        if tensor.tensor_content:
            try:
                return np.frombuffer(tensor.tensor_content, dtype=name).reshape(shape).copy()
            except ValueError:  # content that does not fill the declared shape
                return None
        values = getattr(tensor, _FIELD_BY_DTYPE[tensor.dtype])
        if len(values) == count:
            return np.array(values, dtype=name).reshape(shape)
        if len(values) == 1:
            return np.full(shape, values[0], dtype=name)
        if count == 0:
            return np.zeros(shape, dtype=name)
    from tensorflow.python.framework import tensor_util

    try:
        return tensor_util.MakeNdarray(tensor)
    except (TypeError, ValueError):  # values that do not fit the declared shape or dtype
        return None


def _stored_values(tensor: Any) -> int:
    """How many values a TensorProto stores in its typed value fields."""
    return max((len(getattr(tensor, f)) for f in _VALUE_FIELDS), default=0)


_VALUE_FIELDS = ("float_val", "double_val", "int_val", "int64_val", "bool_val", "half_val", "string_val",
                 "scomplex_val", "dcomplex_val", "uint32_val", "uint64_val")
