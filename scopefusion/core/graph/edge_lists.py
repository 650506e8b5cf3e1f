"""The per-node edge lists of a graph index, built in bulk.

Every node's inputs are ``(producer, port)`` pairs and every producer's consumers are
``(consumer, port, slot)`` triples, each node's held in a tuple: no spare room, and one shared
empty tuple for every node without any.  Inputs are parsed and renumbered with the edges of
all nodes worked on as one flat sequence, running no Python code per edge (only a node whose
inputs name a port or a control edge, or name no node, is read on its own).

Node indices are the int objects the caller hands in (``ids``, e.g. the values of the name
table), so an index held in many edges is one object, not one per edge.
"""
from __future__ import annotations

import operator
from bisect import bisect_right
from itertools import accumulate, chain, compress, count, islice, repeat
from typing import Iterable, Mapping, Sequence, TypeVar

from .vocabulary import CONTROL, is_port

_T = TypeVar("_T")
_INPUT = operator.attrgetter("input")
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)

#: per node, its inputs as ``(producer, port)`` pairs
Inputs = list[tuple[tuple[int, int], ...]]
#: per producer, its consumers as ``(consumer, producer_port, consumer_input_slot)`` triples
Consumers = list[tuple[tuple[int, int, int], ...]]


def grouped(items: Iterable[_T], counts: Iterable[int]) -> list[tuple[_T, ...]]:
    """``items`` cut into consecutive tuples of ``counts[k]`` items each."""
    stream = iter(items)
    return list(map(tuple, map(islice, repeat(stream), counts)))


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
    reads them.  Inputs that are plain node names (output 0, the common case) are looked up all at
    once; a node with any other input is parsed on its own, in graph order."""
    texts = list(map(_INPUT, nodes))
    counts = list(map(len, texts))
    producers = list(map(index.get, chain.from_iterable(texts)))
    inputs = grouped(zip(producers, repeat(0)), counts)
    ends = list(accumulate(counts))
    others = sorted({bisect_right(ends, k) for k in compress(count(), map(operator.is_, producers, repeat(None)))})
    for i in others:
        inputs[i] = parse_node_inputs(texts[i], index, names[i], dangling)
    return inputs


def renumbered(inputs: Sequence[tuple[tuple[int, int], ...]], new_index: Sequence[int]) -> Inputs:
    """``inputs`` with every producer ``p`` replaced by ``new_index[p]``."""
    flat = list(chain.from_iterable(inputs))
    return grouped(zip(map(new_index.__getitem__, map(_FIRST, flat)), map(_SECOND, flat)), map(len, inputs))


def consumers_of(inputs: Sequence[tuple[tuple[int, int], ...]], ids: Sequence[int]) -> Consumers:
    """Per producer, the ``(consumer, producer_port, consumer_input_slot)`` triples of the nodes
    reading it, by consumer then slot.  Every producer of ``inputs`` names a node."""
    consumers: list = [[] for _ in ids]
    for c, ins in zip(ids, inputs):  # a plain loop: faster than sorting the edges by producer
        for slot, (p, port) in enumerate(ins):
            consumers[p].append((c, port, slot))
    consumers[:] = map(tuple, consumers)  # one list at a time given up for its tuple
    return consumers


def node_ids(index: Mapping[str, int], size: int) -> Sequence[int]:
    """The node indices ``0..size-1`` as the int objects the name table ``index`` holds (with unique
    names its values are exactly these, in order); without unique names, a range."""
    values = index.values()
    return list(values) if len(values) == size else range(size)
