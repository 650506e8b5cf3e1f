"""The columns a graph index is made of, read once from a serialized GraphDef.

:func:`graph_columns` gives, per node, its name, op type (one string object per type), device,
input count and inputs as ``(producer, port)`` pairs (read as :func:`.edge_lists.parse_inputs`
reads them, the dangling ones told in the same words), the name table, every input string end to
end, where each node's bytes sit in the buffer, and which nodes hold colocation constraints (a
``_class`` attribute: the keys of the attribute map's entries, no attribute parsed).  Where the
native extension ``_scan`` is built, one pass of C over the bytes reads them (:func:`scan_columns`);
otherwise, or where that pass cannot tell what protobuf would read (a malformed buffer, a string
that is no UTF-8, a field of an unexpected wire type, an attribute entry holding more than its key
and value), protobuf's Python API reads them from the parsed message (:func:`python_columns`).
Both give the same columns.

The bytes must be the message's encoding as it stands: the columns describe the bytes, not
the message (a graph changed after it was parsed is read through protobuf, from the message).
"""
from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING

from .edge_lists import Inputs, parse_inputs
from .index import COLOCATE, no_gc
from .native import native_module
from .vocabulary import MAX_PORT_DIGITS

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

_NAME, _OP, _DEVICE, _INPUT = (attrgetter(a) for a in ("name", "op", "device", "input"))
_NODE_FIELD = 1  # GraphDef.node


@dataclass(eq=False)
class GraphColumns:
    """A GraphDef's nodes, column by column, in graph order."""

    names: list[str]
    ops: list[str]  # interned: one object per op type
    devices: list[str] | None  # None: let go (as the three below, see keep_index_columns)
    counts: list[int] | None  # each node's number of inputs
    inputs: Inputs  # each node's (producer, port) pairs; producer -1: the input names no node
    index: dict[str, int]  # name -> position (a repeated name: its last node); the inputs hold its values
    dangling: list[str]  # "'reader' reads 'text'" for every input naming no node, in graph order
    texts: list[str] | None  # every node's input strings, end to end
    offsets: array | None  # where each node's NodeDef bytes start in the buffer ('q'); None: no buffer
    lengths: array | None  # and how many bytes each takes
    # the nodes holding a _class attribute, in graph order; None: not read (python_columns reads no
    # attribute: an index finds them on first use, the same nodes)
    colocated: list[int] | None = None
    # whether any node names a device (told while the devices are held; None: not known)
    devices_used: bool | None = None

    def __len__(self) -> int:
        return len(self.names)

    def keep_index_columns(self) -> None:
        """Let go of the columns only load-time validation reads (devices, input counts and strings)
        and of the byte ranges (the bytes are let go after loading): what is left (names, op types,
        inputs, name table, colocated nodes, whether any node names a device), an index takes over."""
        if self.devices is not None:
            self.devices_used = any(self.devices)
        self.devices = self.counts = self.texts = self.offsets = self.lengths = None


def scan_columns(data: bytes | bytearray | memoryview) -> GraphColumns | None:
    """The columns of the GraphDef serialized in ``data``, read by the native scan; None when it
    is not built (or the pure-Python path is forced), or cannot tell what protobuf would read."""
    module = native_module("_scan")
    if module is None:
        return None
    with no_gc():  # some hundred thousand small objects, none of them cyclic
        found = module.scan(data, MAX_PORT_DIGITS, _COLOCATE_KEY)
    if found is None:
        return None
    offsets, lengths, names, ops, devices, counts, texts, inputs, index, dangling, colocated = found
    return GraphColumns(names, ops, devices, counts, inputs, index, dangling, texts,
                        _int64s(offsets), _int64s(lengths), colocated)


_COLOCATE_KEY = COLOCATE.encode("utf-8")


def _int64s(raw: bytes) -> array:
    column = array("q")
    column.frombytes(raw)
    return column


def python_columns(graph_def: "GraphDef", data: bytes | bytearray | memoryview | None = None) -> GraphColumns:
    """The columns read through protobuf's Python API from ``graph_def`` (parsed from ``data``, if
    given, which tells the nodes' byte ranges); the colocated nodes are left unread (None)."""
    nodes = list(graph_def.node)
    names = list(map(_NAME, nodes))
    index = dict(zip(names, range(len(names)), strict=True))
    dangling: list[str] = []
    inputs = parse_inputs(nodes, names, index, dangling)
    ranges = None if data is None else node_ranges(data)
    return GraphColumns(names, list(map(sys.intern, map(_OP, nodes))), list(map(_DEVICE, nodes)),
                        [len(node.input) for node in nodes], inputs, index, dangling,
                        list(chain.from_iterable(map(_INPUT, nodes))),
                        None if ranges is None else ranges[0], None if ranges is None else ranges[1])


def graph_columns(graph_def: "GraphDef", data: bytes | bytearray | memoryview | None = None) -> GraphColumns:
    """The columns of ``graph_def``, whose current encoding is ``data`` (if given): by the native
    scan of ``data`` where it can, else through protobuf (:func:`python_columns`); the same either way."""
    if data is not None:
        scanned = scan_columns(data)
        if scanned is not None and len(scanned) == len(graph_def.node):
            return scanned
    return python_columns(graph_def, data)


_MAX_GROUP_DEPTH = 16  # as the native scan: deeper groups are not read


class _Malformed(Exception):
    """The bytes do not parse as the fields a scan steps over."""


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while shift < 70:
        if pos >= len(data):
            raise _Malformed
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7
    raise _Malformed  # more than ten bytes


def _field(data: memoryview, pos: int, depth: int = 0) -> tuple[int, int, int, int]:
    """The field at ``pos``: its number, wire type, where its value starts and where it ends
    (a length-delimited value: its payload starts after the length)."""
    tag, pos = _varint(data, pos)
    number, wire = tag >> 3, tag & 7
    if number == 0 or tag > 0xFFFFFFFF:
        raise _Malformed
    start = pos
    if wire == 0:
        _, pos = _varint(data, pos)
    elif wire in (1, 5):
        pos += 8 if wire == 1 else 4
    elif wire == 2:
        size, start = _varint(data, pos)
        pos = start + size
    elif wire == 3 and depth < _MAX_GROUP_DEPTH:
        while True:
            inner, inner_wire, _, pos = _field(data, pos, depth + 1)
            if inner_wire == 4:
                if inner != number:
                    raise _Malformed
                break
    elif wire != 4:  # an end tag: its group's (the caller's to judge)
        raise _Malformed  # an undefined wire type, groups too deep
    if pos > len(data):
        raise _Malformed
    return number, wire, start, pos


def node_ranges(data: bytes | bytearray | memoryview) -> tuple[array, array] | None:
    """Where each node field of the GraphDef serialized in ``data`` starts and how long it is
    (its NodeDef payload), read in Python; None when its top level does not parse."""
    view = memoryview(data).cast("B")
    offsets, lengths = array("q"), array("q")
    pos = 0
    try:
        while pos < len(view):
            number, wire, start, pos = _field(view, pos)
            if wire == 4:
                return None
            if number == _NODE_FIELD and wire == 2:
                offsets.append(start)
                lengths.append(pos - start)
    except _Malformed:
        return None
    return offsets, lengths


__all__ = ["GraphColumns", "graph_columns", "node_ranges", "python_columns", "scan_columns"]
