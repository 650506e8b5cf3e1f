"""The per-node edge lists of a graph index.

Every node's inputs are ``(producer, port)`` pairs and every producer's consumers are
``(consumer, port, slot)`` triples, each node's held in a tuple: no spare room, and one shared
empty tuple for every node without any.  (Plain loops over the nodes build them: working on
the edges of all nodes as one flat sequence measured slower, and holding the flat sequences
costs memory.)

Node indices are the int objects the caller hands in (``ids``, e.g. the values of the name
table), so an index held in many edges is one object, not one per edge.

Where the C extensions are built, the functions here hand their work to them (``native/_edges.c``
reads the inputs and renumbers them, ``native/_tables.c`` lists the consumers, the op table and the
unread nodes); the Python code below each dispatch is the pure-Python path, with exactly the same
results.
"""
from __future__ import annotations

import operator
from itertools import compress, count
from types import ModuleType
from typing import Iterable, Mapping, Sequence

from .native import native_module
from .vocabulary import CONTROL, is_port

#: per node, its inputs as ``(producer, port)`` pairs
Inputs = list[tuple[tuple[int, int], ...]]
#: per producer, its consumers as ``(consumer, producer_port, consumer_input_slot)`` triples
Consumers = list[tuple[tuple[int, int, int], ...]]


def _native(name: str = "_edges") -> ModuleType | None:
    """The C extension ``name`` of this module's work (``_edges`` reads the inputs, ``_tables``
    makes the tables of them), or None for the pure-Python path."""
    return native_module(name)


def parse_node_inputs(texts: Iterable[str], index: Mapping[str, int], reader: str,
                      dangling: list[str]) -> tuple[tuple[int, int], ...]:
    """One node's inputs as ``(producer, port)`` pairs; an input naming no node is told in
    ``dangling`` (and read as producer -1)."""
    parsed: list[tuple[int, int]] = []
    for text in texts:
        producer = index.get(text)  # names hold no ':' and no '^'
        if producer is not None:
            parsed.append((producer, 0))
            continue
        if text[:1] == "^":
            name, port = text[1:], CONTROL
        else:
            colon = text.rfind(":")
            digits = text[colon + 1 :]
            if colon > 0 and is_port(digits):
                name, port = text[:colon], int(digits)
            else:
                name, port = text, 0
        producer = index.get(name)
        if producer is None:
            dangling.append(f"{reader!r} reads {text!r}")
            producer = -1
        parsed.append((producer, port))
    return tuple(parsed)


def parse_inputs(nodes: Sequence, names: Sequence[str], index: Mapping[str, int], dangling: list[str]) -> Inputs:
    """The inputs of every node of ``nodes`` (NodeDefs, named ``names``), as :func:`parse_node_inputs`
    reads them.  Node by node: each node's input strings are let go before the next node's are
    read (holding every node's at once costs more memory and time than it saves); inputs that are
    plain node names, the common case, are read right here."""
    native = _native()
    if native is not None and type(index) is dict:
        return native.parse_inputs(nodes, names, index, dangling)
    get = index.get
    inputs: Inputs = []
    append = inputs.append
    for node, name in zip(nodes, names, strict=True):
        texts = node.input
        if not texts:
            append(())
            continue
        parsed = []
        for text in texts:
            producer = get(text)
            if producer is None:  # a port, a control edge, or no node: read in full
                append(parse_node_inputs(texts, index, name, dangling))
                break
            parsed.append((producer, 0))
        else:
            append(tuple(parsed))
    return inputs


def renumbered(inputs: Sequence[tuple[tuple[int, int], ...]], new_index: Sequence[int]) -> Inputs:
    """``inputs`` with every producer ``p`` replaced by ``new_index[p]``."""
    native = _native()
    if native is not None:
        return native.renumbered(inputs, new_index)
    return [tuple([(new_index[p], port) for p, port in ins]) for ins in inputs]


def consumers_of(inputs: Sequence[tuple[tuple[int, int], ...]], ids: Sequence[int]) -> Consumers:
    """Per producer, the ``(consumer, producer_port, consumer_input_slot)`` triples of the nodes
    reading it, by consumer then slot.  Every producer of ``inputs`` names a node.  A producer
    read once (most are) gets its tuple at once; one read more often collects its readers in a
    list first."""
    native = _native("_tables")
    if native is not None:
        return native.consumers_of(inputs, ids)
    consumers: list = [()] * len(ids)
    collecting: list[int] = []
    for c, ins in zip(ids, inputs, strict=True):
        for slot, (p, port) in enumerate(ins):
            readers = consumers[p]
            if not readers:
                consumers[p] = ((c, port, slot),)
            elif type(readers) is tuple:
                consumers[p] = [*readers, (c, port, slot)]
                collecting.append(p)
            else:
                readers.append((c, port, slot))
    for p in collecting:
        consumers[p] = tuple(consumers[p])
    return consumers


def node_ids(index: Mapping[str, int], size: int) -> Sequence[int]:
    """The node indices ``0..size-1`` as the int objects the name table ``index`` holds (with unique
    names its values are exactly these, in order); without unique names, a range."""
    values = index.values()
    return list(values) if len(values) == size else range(size)


def nodes_by_op(ids: Sequence[int], ops: Sequence[str]) -> dict[str, list[int]]:
    """Per op type, its nodes (as the int objects of ``ids``) in graph order; the types in order of
    first appearance."""
    native = _native("_tables")
    if native is not None:
        return native.nodes_by_op(ids, ops)
    by_op: dict[str, list[int]] = {}
    for i, o in zip(ids, ops, strict=True):
        bucket = by_op.get(o)
        if bucket is None:
            by_op[o] = [i]
        else:
            bucket.append(i)
    return by_op


def unread(inputs: Sequence[tuple[tuple[int, int], ...]], size: int,
           consumers: Sequence[Sequence[tuple[int, int, int]]] | None = None) -> list[int]:
    """The nodes ``0..size-1`` no input reads, in order: read off ``consumers`` (empty ones) when
    given, else off ``inputs``."""
    native = _native("_tables")
    if consumers is not None:
        if native is not None:
            return native.falsy_positions(consumers)
        return list(compress(count(), map(operator.not_, consumers)))
    if native is not None:
        return native.unread_nodes(inputs, size)
    used = bytearray(size)
    for ins in inputs:
        for p, _ in ins:
            used[p] = 1
    return [i for i, u in enumerate(used) if not u]
