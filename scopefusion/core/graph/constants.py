"""Decoding the values of constant tensors (``TensorProto``) into numpy arrays."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .vocabulary import DT_BOOL, DT_DOUBLE, DT_FLOAT, DT_INT32, DT_INT64

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

_NUMPY_BY_DTYPE = {DT_FLOAT: "float32", DT_DOUBLE: "float64", DT_INT32: "int32", DT_INT64: "int64", DT_BOOL: "bool"}
_FIELD_BY_DTYPE = {DT_FLOAT: "float_val", DT_DOUBLE: "double_val", DT_INT32: "int_val", DT_INT64: "int64_val",
                   DT_BOOL: "bool_val"}


def tensor_value(tensor: Any) -> "np.ndarray":
    """A TensorProto's value; common dtypes are decoded directly, others by TensorFlow."""
    import numpy as np

    name = _NUMPY_BY_DTYPE.get(tensor.dtype)
    if name is not None:
        shape = [d.size for d in tensor.tensor_shape.dim]
        count = int(np.prod(shape)) if shape else 1
        if tensor.tensor_content:
            return np.frombuffer(tensor.tensor_content, dtype=name).reshape(shape).copy()
        values = getattr(tensor, _FIELD_BY_DTYPE[tensor.dtype])
        if len(values) == count:
            return np.array(values, dtype=name).reshape(shape)
        if len(values) == 1:
            return np.full(shape, values[0], dtype=name)
        if count == 0:
            return np.zeros(shape, dtype=name)
    from tensorflow.python.framework import tensor_util

    return tensor_util.MakeNdarray(tensor)
