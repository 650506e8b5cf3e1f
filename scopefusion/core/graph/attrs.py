"""Attribute values: reading ``AttrValue`` messages as Python values, comparing
them with expected values, and writing Python values as ``AttrValue``s."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .protos import message_class
from .vocabulary import DTYPE_BY_NAME

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

#: Float attributes are stored as float32: compare relatively, at its precision.
FLOAT_RTOL = 1e-5
FLOAT_ATOL = 1e-30


def _scalar_equals(actual: Any, expected: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if isinstance(actual, float):  # a float attr: compared with a tolerance
        try:
            return math.isclose(actual, float(expected), rel_tol=FLOAT_RTOL, abs_tol=FLOAT_ATOL)
        except (TypeError, ValueError):
            return False
    if isinstance(expected, float):  # an int attr against a float: exactly
        return isinstance(actual, int) and float(actual) == expected
    if isinstance(expected, str) and isinstance(actual, bytes):
        return actual == expected.encode()
    return bool(actual == expected)


def attr_equals(attr: Any, expected: Any) -> bool:
    """Compare an ``AttrValue`` with a Python value."""
    kind = attr.WhichOneof("value")
    if kind == "list":
        lst = attr.list
        for sub in ("i", "f", "s", "b", "type"):
            values = list(getattr(lst, sub))
            if values:
                break
        else:
            values = []
        if not isinstance(expected, (list, tuple)):
            return False
        return len(values) == len(expected) and all(
            _scalar_equals(a, e) for a, e in zip(values, expected, strict=True)
        )
    if kind is None:
        return False
    actual = getattr(attr, kind)
    if kind == "shape":
        actual = [d.size for d in actual.dim]
        return isinstance(expected, (list, tuple)) and list(expected) == actual
    return _scalar_equals(actual, expected)


def _dtype_enum(value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value in DTYPE_BY_NAME:
        return DTYPE_BY_NAME[value]
    if hasattr(value, "as_datatype_enum"):  # a tf.DType
        return int(value.as_datatype_enum)
    # deferred: TensorFlow costs seconds to import
    import tensorflow as tf  # a tf.DType or a name only TensorFlow knows

    return int(tf.dtypes.as_dtype(value).as_datatype_enum)


def make_attr_value(value: Any, attr_type: str) -> "AttrValue":
    """Turn a Python value into an ``AttrValue`` of the declared type."""
    AttrValue = message_class("AttrValue")
    if isinstance(value, AttrValue):
        return value
    attr = AttrValue()
    if attr_type == "float":
        attr.f = float(value)
    elif attr_type == "int":
        attr.i = int(value)
    elif attr_type == "bool":
        attr.b = bool(value)
    elif attr_type == "string":
        attr.s = value if isinstance(value, bytes) else str(value).encode()
    elif attr_type == "type":
        attr.type = _dtype_enum(value)
    elif attr_type == "shape":
        for d in value:
            attr.shape.dim.add(size=-1 if d is None else int(d))
    elif attr_type == "list(float)":
        attr.list.f.extend(float(v) for v in value)
    elif attr_type == "list(int)":
        attr.list.i.extend(int(v) for v in value)
    elif attr_type == "list(bool)":
        attr.list.b.extend(bool(v) for v in value)
    elif attr_type == "list(string)":
        attr.list.s.extend(v if isinstance(v, bytes) else str(v).encode() for v in value)
    elif attr_type == "list(type)":
        attr.list.type.extend(_dtype_enum(v) for v in value)
    else:
        raise ValueError(f"unknown attr type {attr_type!r}")
    return attr


def attr_value_to_python(attr: "AttrValue") -> Any:
    """Turn an ``AttrValue`` back into a plain Python value."""
    kind = attr.WhichOneof("value")
    if kind == "list":
        for sub in ("i", "f", "b", "type", "s"):
            values = list(getattr(attr.list, sub))
            if values:
                return [v.decode() if isinstance(v, bytes) else v for v in values]
        return []
    if kind == "s":
        return attr.s.decode("utf-8", "replace")
    if kind == "shape":
        return None if attr.shape.unknown_rank else [d.size for d in attr.shape.dim]
    if kind is None:
        return None
    return getattr(attr, kind)


def infer_attr_type(value: Any) -> str:
    """The attr type of a plain Python value, for ops without a declaration."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, bool) for v in value) and value:
            return "list(bool)"
        if all(isinstance(v, int) for v in value):
            return "list(int)"
        if all(isinstance(v, (int, float)) for v in value):
            return "list(float)"
        return "list(string)"
    raise ValueError(f"cannot tell the attr type of {value!r}; pass an AttrValue")
