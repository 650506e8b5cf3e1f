"""A binary GraphDef written piece by piece, never held whole in memory.

``graph_def.SerializeToString()`` holds the whole encoding twice at its peak (protobuf's
buffer and the bytes object copied from it); for a graph of a million nodes that is
several hundred bytes per node on top of everything else.  :class:`EncodedGraph` yields
the same bytes in chunks of about :data:`CHUNK_BYTES`: a GraphDef's encoding is its nodes,
each a length-delimited field 1, followed by its other fields, so each node is serialized
on its own and framed here, and the other fields are serialized on a GraphDef holding
only them.  Serialization is deterministic (attribute maps in key order), as
:func:`.io.graph_bytes` writes it.

A graph with fields this protobuf build does not know, kept from the file it was read
from, or with another repeated field than its nodes, is serialized whole (the place of
such fields in the encoding is protobuf's to decide).
"""
from __future__ import annotations

from functools import cache
from operator import methodcaller
from typing import TYPE_CHECKING, Any, Iterator

try:
    from google.protobuf.unknown_fields import UnknownFieldSet
except ImportError:  # pragma: no cover - protobuf before 4.21 keeps them on the message
    UnknownFieldSet = None

from .protos import is_repeated

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

#: about how many bytes each chunk holds (a node larger than this is one chunk of its own)
CHUNK_BYTES = 1 << 22
_NODE_TAG = b"\x0a"  # field 1 (node), wire type 2 (length-delimited)
_SHORT = 1 << 14  # lengths below this take at most two varint bytes: their heads are precomputed
_serialize = methodcaller("SerializeToString", deterministic=True)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@cache
def _heads() -> list[bytes]:
    """Field 1's tag and the length, for every length below :data:`_SHORT` (made on first use)."""
    return [_NODE_TAG + _varint(n) for n in range(_SHORT)]


def _has_unknown_fields(message: Any) -> bool:
    if UnknownFieldSet is None:  # pragma: no cover
        return len(message.UnknownFields()) > 0
    return len(UnknownFieldSet(message)) > 0


class EncodedGraph:
    """The binary encoding of a GraphDef, iterated as chunks of bytes.

    The graph is read while the chunks are taken, so it must not change meanwhile.
    ``bytes(encoded)`` joins them (what ``SerializeToString(deterministic=True)`` returns).
    """

    __slots__ = ("graph_def",)

    def __init__(self, graph_def: "GraphDef") -> None:
        self.graph_def = graph_def

    def __iter__(self) -> Iterator[bytes]:
        graph = self.graph_def
        rest = None if _has_unknown_fields(graph) else self._other_fields()
        if rest is None:
            yield _serialize(graph)
            return
        parts: list[bytes] = []
        heads, size = _heads(), 0
        append = parts.append
        for encoded in map(_serialize, graph.node):
            length = len(encoded)
            append(heads[length] if length < _SHORT else _NODE_TAG + _varint(length))
            append(encoded)
            size += length
            if size >= CHUNK_BYTES:
                yield b"".join(parts)
                parts.clear()
                size = 0
        if rest:
            append(rest)
        if parts:
            yield b"".join(parts)

    def _other_fields(self) -> bytes | None:
        """The graph's fields but its nodes (versions, library, ...), encoded; None when one of
        them is repeated (no GraphDef field but the nodes is, today): the graph is then encoded whole."""
        graph = self.graph_def
        holder = type(graph)()
        for field, value in graph.ListFields():
            if field.name == "node":
                continue
            if is_repeated(field):
                return None
            if field.message_type is None:
                setattr(holder, field.name, value)
            else:
                getattr(holder, field.name).CopyFrom(value)
        return _serialize(holder)

    def __bytes__(self) -> bytes:
        return b"".join(self)


__all__ = ["CHUNK_BYTES", "EncodedGraph"]
