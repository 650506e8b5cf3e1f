"""``TensorProto`` <-> numpy array, in numpy alone, laid out as TensorFlow's ``tensor_util`` does.

TensorFlow keeps a tensor's values either as raw bytes (``tensor_content``) or in the typed
field of its dtype (``float_val``, ``int_val``, ``half_val`` holding float16 and bfloat16 bit
patterns, ``scomplex_val`` holding real/imaginary pairs, ...). A typed field may store fewer
values than the shape declares: none reads as zeros, and the last stored value is repeated
(a "splat"). :func:`make_tensor_proto` writes what ``tensor_util.make_tensor_proto`` writes
for a numpy array: raw bytes for a tensor of more than one element of a dtype TensorFlow
stores that way, the typed field otherwise.

Dtypes without a numpy counterpart here (quantized, resource, variant, 4-bit and 8-bit
floats) raise :class:`UnsupportedDtype`; callers hand those to TensorFlow.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .protos import message_class
from .vocabulary import (
    DT_BFLOAT16,
    DT_BOOL,
    DT_DOUBLE,
    DT_FLOAT,
    DT_HALF,
    DT_INT8,
    DT_INT16,
    DT_INT32,
    DT_INT64,
    DT_STRING,
    DT_UINT8,
    DTYPE_BY_NAME,
    dtype_name,
    numpy_dtype,
)

DT_COMPLEX64, DT_UINT16, DT_COMPLEX128, DT_UINT32, DT_UINT64 = 8, 17, 18, 22, 23

#: The typed value field of each dtype.
VALUE_FIELD: dict[int, str] = {
    DT_FLOAT: "float_val", DT_DOUBLE: "double_val", DT_INT64: "int64_val", DT_BOOL: "bool_val",
    DT_INT32: "int_val", DT_UINT8: "int_val", DT_INT16: "int_val", DT_INT8: "int_val", DT_UINT16: "int_val",
    DT_UINT32: "uint32_val", DT_UINT64: "uint64_val", DT_HALF: "half_val", DT_BFLOAT16: "half_val",
    DT_COMPLEX64: "scomplex_val", DT_COMPLEX128: "dcomplex_val", DT_STRING: "string_val",
}
#: Dtypes whose tensors of more than one element TensorFlow writes as raw bytes.
CONTENT_DTYPES = frozenset({DT_HALF, DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_INT64,
                            DT_UINT32, DT_UINT64, DT_BFLOAT16})
_BIT_PATTERNS = frozenset({DT_HALF, DT_BFLOAT16})
_COMPLEX = frozenset({DT_COMPLEX64, DT_COMPLEX128})


class UnsupportedDtype(TypeError):
    """A dtype this module does not encode or decode."""


_NUMPY_TYPES: dict[int, np.dtype] = {}


def _numpy_type(dtype: int) -> np.dtype:
    known = _NUMPY_TYPES.get(dtype)
    if known is not None:
        return known
    found = numpy_dtype(dtype) if dtype in VALUE_FIELD and dtype != DT_STRING else None
    if found is None:
        raise UnsupportedDtype(f"tensors of dtype {dtype_name(dtype)} are not decoded here")
    known = _NUMPY_TYPES[dtype] = np.dtype(found)
    return known


def make_ndarray(tensor: Any) -> np.ndarray:
    """The value of TensorProto ``tensor`` as a numpy array (a copy; strings as ``object``
    arrays of bytes). ``ValueError`` when the stored values do not fit the declared shape."""
    shape = [d.size for d in tensor.tensor_shape.dim]
    count = math.prod(shape)
    if tensor.dtype == DT_STRING:
        strings = list(tensor.string_val)
        strings += [strings[-1] if strings else b""] * (count - len(strings))
        return np.array(strings, dtype=object).reshape(shape)
    numpy_type = _numpy_type(tensor.dtype)
    if tensor.tensor_content:
        return np.frombuffer(tensor.tensor_content, dtype=numpy_type).copy().reshape(shape)
    stored = getattr(tensor, VALUE_FIELD[tensor.dtype])
    if tensor.dtype in _BIT_PATTERNS:
        values = np.array(stored, dtype=np.uint16).view(numpy_type)
    elif tensor.dtype in _COMPLEX:
        pairs = np.array(stored, dtype=np.float32 if tensor.dtype == DT_COMPLEX64 else np.float64)
        pair_count = len(pairs) // 2  # an unpaired last number is ignored
        values = (pairs[0:2 * pair_count:2] + 1j * pairs[1:2 * pair_count:2]).astype(numpy_type)
    else:
        values = np.array(stored, dtype=numpy_type)
    if values.size == 0:
        return np.zeros(shape, numpy_type)
    if values.size < count:
        values = np.pad(values, (0, count - values.size), "edge")
    return values.reshape(shape)


def dtype_of_array(array: np.ndarray) -> int:
    """The DataType enum of a numpy array's dtype."""
    if array.dtype.kind in "SUO":
        return DT_STRING
    enum = DTYPE_BY_NAME.get(array.dtype.name)
    if enum is None or enum not in VALUE_FIELD:
        raise UnsupportedDtype(f"numpy arrays of dtype {array.dtype} are not encoded here")
    return enum


def make_tensor_proto(value: Any) -> Any:
    """A TensorProto holding numpy array ``value`` (its own dtype and shape)."""
    array = np.asarray(value)
    dtype = dtype_of_array(array)
    proto = message_class("TensorProto")(dtype=dtype)
    proto.tensor_shape.SetInParent()  # present even for a scalar, as TensorFlow writes it
    for size in array.shape:
        proto.tensor_shape.dim.add(size=int(size))
    if dtype in CONTENT_DTYPES and array.size > 1:
        if array.size * array.itemsize >= 1 << 31:
            raise ValueError("a constant of 2 GB or more cannot be held in a TensorProto")
        proto.tensor_content = np.ascontiguousarray(array).tobytes()
        return proto
    flat = array.ravel()
    field = getattr(proto, VALUE_FIELD[dtype])
    if dtype == DT_STRING:
        field.extend(v if isinstance(v, bytes) else str(v).encode("utf-8") for v in flat.tolist())
    elif dtype in _BIT_PATTERNS:
        field.extend(flat.view(np.uint16).tolist())
    elif dtype in _COMPLEX:
        field.extend(np.stack([flat.real, flat.imag], axis=-1).ravel().tolist())
    else:
        field.extend(flat.tolist())
    return proto
