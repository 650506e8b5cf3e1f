"""The graph's vocabulary, in one place: tensor names, dtypes and the op sets
that several parts of the project agree on."""
from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

#: The "port" of a control edge (``^name``).
CONTROL = -1

#: Ops whose inputs close a loop in TF1 control flow; their out-edges are
#: back edges and are ignored when ordering the graph.
LOOP_BACK_OPS = frozenset({"NextIteration", "RefNextIteration"})
#: The ops a loop's back edge may lead into (TensorFlow allows no other cycle).
LOOP_MERGE_OPS = frozenset({"Merge", "RefMerge"})

#: Op types that mark a graph's return values; a scope holding one never matches.
RETURN_OPS = frozenset({"_Retval", "_DeviceRetval"})

#: Ops that forward their first input unchanged (used to see through reads).
FORWARDING_OPS = frozenset({"Identity", "ReadVariableOp", "Snapshot", "StopGradient"})

#: Ops that hold a constant value in an attribute.
CONST_OPS = frozenset({"Const", "HostConst"})
#: the op types of one arithmetic operation as TensorFlow spells it (for op patterns and membership tests)
ADD_OPS = ("Add", "AddV2")
MUL_OPS = ("Mul",)
DIV_OPS = ("RealDiv", "Div")
#: op types that are one operation whatever the graph calls it (an op pattern naming one matches all)
SAME_OP = {"Add": ADD_OPS, "AddV2": ADD_OPS}

#: Sinks of these op types are not treated as graph outputs by default.
NON_OUTPUT_SINKS = frozenset({"Const", "NoOp", "Placeholder", "Assert", "VarHandleOp", "VariableV2"})

# DataType enum values (tensorflow/core/framework/types.proto), named so that
# code and messages need no TensorFlow import to speak of them.
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = 1, 2, 3, 4, 5, 6, 7
DT_INT64, DT_BOOL, DT_BFLOAT16, DT_HALF, DT_RESOURCE, DT_VARIANT = 9, 10, 14, 19, 20, 21

DTYPE_NAMES: dict[int, str] = {
    DT_FLOAT: "float32", DT_DOUBLE: "float64", DT_INT32: "int32", DT_UINT8: "uint8", DT_INT16: "int16",
    DT_INT8: "int8", DT_STRING: "string", 8: "complex64", DT_INT64: "int64", DT_BOOL: "bool",
    11: "qint8", 12: "quint8", 13: "qint32", DT_BFLOAT16: "bfloat16", 15: "qint16", 16: "quint16",
    17: "uint16", 18: "complex128", DT_HALF: "float16", DT_RESOURCE: "resource", DT_VARIANT: "variant",
    22: "uint32", 23: "uint64",
}
DTYPE_BY_NAME: dict[str, int] = {name: enum for enum, name in DTYPE_NAMES.items()}
DTYPE_BY_NAME.update({"float": DT_FLOAT, "double": DT_DOUBLE, "half": DT_HALF})

#: Floating-point dtypes, and the low-precision ones among them.
FLOAT_DTYPES = frozenset({DT_FLOAT, DT_DOUBLE, DT_BFLOAT16, DT_HALF})
LOW_PRECISION_DTYPES = frozenset({DT_HALF, DT_BFLOAT16})


def dtype_name(enum: int) -> str:
    """``1`` -> ``"float32"``; an enum this table does not know reads ``"dtype 99"``."""
    return DTYPE_NAMES.get(enum, f"dtype {enum}")


def dtype_enum(value: object) -> int:
    """A DataType enum from an enum, a name (``"float32"``, ``"half"``) or a ``tf.DType``;
    ``ValueError`` if unknown."""
    if isinstance(value, int):
        return value
    enum = getattr(value, "as_datatype_enum", None)  # a tf.DType
    if isinstance(enum, int):
        return enum
    if isinstance(value, str) and value in DTYPE_BY_NAME:
        return DTYPE_BY_NAME[value]
    raise ValueError(f"unknown dtype {value!r}; known: {', '.join(sorted(DTYPE_BY_NAME))}")


#: Node names TensorFlow accepts (its importer rejects any other).
_NAME = r"[A-Za-z0-9.][A-Za-z0-9_./>-]*"
_NODE_NAME = re.compile(_NAME)
#: Names joined by newlines, each one TensorFlow accepts as far as characters go.
_NODE_NAME_LINES = re.compile(rf"(?:{_NAME}\n)*{_NAME}")
#: An empty scope in such lines: a "/" followed by another or ending a name.
_EMPTY_SCOPE = re.compile("/[/\n]")


def is_valid_node_name(name: str) -> bool:
    """A node name TensorFlow accepts, with no empty scope component."""
    return bool(_NODE_NAME.fullmatch(name)) and "//" not in name and not name.endswith("/")


def invalid_node_names(names: Sequence[str]) -> list[int]:
    """The positions of the names in ``names`` that :func:`is_valid_node_name` refuses.  All names
    are judged at once, joined by newlines (which no valid name holds); only when that finds
    something wrong are they judged one by one, to tell which."""
    if names:
        text = "\n".join(names)
        if (text.count("\n") == len(names) - 1 and _NODE_NAME_LINES.fullmatch(text)
                and not _EMPTY_SCOPE.search(text) and not text.endswith("/")):
            return []
    return [i for i, name in enumerate(names) if not is_valid_node_name(name)]


#: The most digits a port number may have (TensorFlow ports are int32).
MAX_PORT_DIGITS = 9


def parse_input(text: str) -> tuple[str, int]:
    """Split a NodeDef input string into ``(node_name, port)``; port -1 is control.  A
    suffix that is not a plain ASCII port number (``x:²``, thousands of digits) stays part
    of the name, so it names no node."""
    if text.startswith("^"):
        return text[1:], CONTROL
    name, sep, port = text.rpartition(":")
    if sep and is_port(port):
        return name, int(port)
    return text, 0


def is_port(digits: str) -> bool:
    """``digits`` is a port number as NodeDef inputs write it."""
    return digits.isascii() and digits.isdigit() and len(digits) <= MAX_PORT_DIGITS


def tensor_name(node_name: str, port: int) -> str:
    """Format a tensor reference the way NodeDef inputs spell it (port 0 bare)."""
    if port == CONTROL:
        return "^" + node_name
    return node_name if port == 0 else f"{node_name}:{port}"


def numpy_dtype(enum: int) -> "np.dtype | None":
    """The numpy dtype of a DataType enum (bfloat16 through ml_dtypes), or None."""
    if enum == DT_BFLOAT16:
        try:
            import ml_dtypes  # deferred: start-up time (a native extension slower to load than a run; bfloat16 is rare)
        except ImportError:  # pragma: no cover - ml_dtypes comes with TensorFlow
            return None
        return np.dtype(ml_dtypes.bfloat16)
    name = DTYPE_NAMES.get(enum)
    if name is None or name in ("string", "resource", "variant") or name.startswith("q"):
        return None
    return np.dtype(name)
