"""Checks of the parts of a GraphDef TensorFlow reads besides op types and attributes, made when
a graph is read (for :mod:`.validate`):

* its ``versions``: a producer below TensorFlow's minimum, a minimum consumer above the
  installed TensorFlow's graph version, or that version listed as a bad consumer;
* each distinct device string, read the way TensorFlow's import reads it (``/job:x``,
  ``/replica:N``, ``/task:N``, ``/device:TYPE:N``, ``/CPU:N``, ``*`` for any index);
* a ``Const``'s tensor against its ``dtype`` attribute and shape: the same dtype (TensorFlow
  aborts the process otherwise) and no more values than elements;
* a shape with a dimension below -1 (-1 means unknown).

The installed TensorFlow's graph version is read from its C header (no import), else from
TensorFlow when it is loaded already; without either, only the producer is checked.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from .attr_rules import shorten
from .tensor_codec import VALUE_FIELD
from .vocabulary import dtype_name, numpy_dtype

_MIN_PRODUCER = 0  # TF_GRAPH_DEF_VERSION_MIN_PRODUCER, 0 in every TensorFlow 2
_DEVICE_TYPES = frozenset({"CPU", "GPU", "TPU"})
_VERSION_LINE = re.compile(rb"#define TF_GRAPH_DEF_VERSION (\d+)")


@lru_cache(maxsize=1)
def graph_def_version() -> int | None:
    """The GraphDef version of the installed TensorFlow, or None when it cannot be told cheaply."""
    if "tensorflow" in sys.modules:
        version = getattr(getattr(sys.modules["tensorflow"], "version", None), "GRAPH_DEF_VERSION", None)
        if isinstance(version, int):
            return version
    spec = importlib.util.find_spec("tensorflow")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        try:
            found = _VERSION_LINE.search(Path(root, "include/tensorflow/core/public/version.h").read_bytes())
        except OSError:
            continue
        if found:
            return int(found.group(1))
    return None


def version_problems(versions: Any) -> list[str]:
    """What TensorFlow refuses in a graph's ``versions`` field."""
    found = []
    if versions.producer < _MIN_PRODUCER:
        found.append(f"its producer version {versions.producer} is below TensorFlow's minimum of {_MIN_PRODUCER}")
    current = graph_def_version()
    if current is not None:
        if versions.min_consumer > current:
            found.append(f"its minimum consumer version {versions.min_consumer} is above the installed "
                         f"TensorFlow's graph version {current}")
        if current in versions.bad_consumers:
            found.append(f"it lists the installed TensorFlow's graph version {current} as a bad consumer")
    return found


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def device_problem(device: str) -> str | None:
    """Why TensorFlow's import does not read ``device`` as a device, or None."""
    kind = None
    for part in device.split("/"):
        fields = part.split(":")
        n, head = len(fields), fields[0]
        if n == 2 and head in ("job", "replica", "task"):
            if head != "job" and not _is_int(fields[1]):
                return f"its device {shorten(device)} gives {head} {shorten(fields[1])}, which is no number"
        elif n in (1, 2) and head.upper() in _DEVICE_TYPES or n == 3 and head == "device":
            if kind is not None:
                return f"its device {shorten(device)} names more than one device type"
            kind = fields[1] if n == 3 else head.upper()
            index = fields[-1] if n > 1 else "*"
            if index != "*" and not _is_int(index):
                return f"its device {shorten(device)} has the index {shorten(index)}, which is no number"
        elif head:
            return (f"its device {shorten(device)} does not read as a device (/job:NAME, /replica:N, /task:N, "
                    "/device:TYPE:N)")
    return None


def const_problems(node: Any) -> list[str]:
    """What is wrong with a ``Const``'s tensor against its dtype and shape."""
    if "value" not in node.attr or "dtype" not in node.attr:
        return []  # the attribute checks report a missing one
    if node.attr["dtype"].WhichOneof("value") != "type" or node.attr["value"].WhichOneof("value") != "tensor":
        return []  # the attribute checks report a value of the wrong kind
    tensor, dtype = node.attr["value"].tensor, node.attr["dtype"].type
    if tensor.dtype != dtype:
        return [f"its tensor holds {dtype_name(tensor.dtype)} values, its dtype attribute says {dtype_name(dtype)}"]
    if tensor.tensor_shape.unknown_rank or any(d.size < 0 for d in tensor.tensor_shape.dim):
        return []  # the attribute checks report an undefined shape
    elements = 1
    for d in tensor.tensor_shape.dim:
        elements *= d.size
    content = tensor.tensor_content
    if content:
        itemsize = getattr(numpy_dtype(dtype), "itemsize", None)
        if itemsize is not None and len(content) != elements * itemsize:
            return [f"its tensor holds {len(content)} bytes, its shape {[d.size for d in tensor.tensor_shape.dim]} "
                    f"of {dtype_name(dtype)} takes {elements * itemsize}"]
        return []
    field = VALUE_FIELD.get(dtype)
    if field is not None:
        count = len(getattr(tensor, field))
        if field in ("scomplex_val", "dcomplex_val"):
            count //= 2
        if count > elements:
            return [f"its tensor holds {count} values, its shape {[d.size for d in tensor.tensor_shape.dim]} "
                    f"has {elements} element(s)"]
    return []


def content_sizes(node: Any) -> tuple[int, ...]:
    """The lengths of raw contents a constant of its dtype and shape may hold without being
    looked at more closely: its elements' bytes, and none for a scalar (its value is in the
    typed field).  Empty when the dtype has no fixed size, or the node is not a plain constant."""
    if "value" not in node.attr or "dtype" not in node.attr:
        return ()
    tensor = node.attr["value"].tensor
    itemsize = getattr(numpy_dtype(tensor.dtype), "itemsize", None)
    if tensor.dtype != node.attr["dtype"].type or itemsize is None:
        return ()
    elements = 1
    for d in tensor.tensor_shape.dim:
        elements *= max(d.size, 0)
    return (elements * itemsize, 0) if elements <= 1 else (elements * itemsize,)


def shape_problem(key: str, shapes: Any) -> str | None:
    """A shape (or shapes) with a dimension below -1, as attribute ``key`` holds it."""
    for shape in shapes:
        if any(d.size < -1 for d in shape.dim):
            return (f"attribute {key!r} holds the shape {[d.size for d in shape.dim]}: no dimension may be "
                    "below -1 (unknown)")
    return None


__all__ = ["const_problems", "content_sizes", "device_problem", "graph_def_version", "shape_problem",
           "version_problems"]
