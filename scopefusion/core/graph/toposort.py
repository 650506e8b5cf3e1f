"""Kahn's topological sort over integer nodes, and the nodes a cycle leaves behind.

Where the C extension ``native/_order.c`` is built, the sort over a graph index's readers and the
loop's back edges are worked out there; the Python code below each dispatch is the pure-Python
path, with exactly the same results.
"""
from __future__ import annotations

import operator
from itertools import compress, count
from typing import Iterable, Sequence

from .native import native_module
from .vocabulary import CONTROL, LOOP_BACK_OPS, LOOP_MERGE_OPS


def kahn_order(indegree: list[int], succ: Sequence[Sequence[int]], starts: Iterable[int] | None = None) -> list[int]:
    """The nodes in topological order, first in first out from ``starts`` (by default every node of
    indegree 0, in index order).  ``indegree`` is consumed: afterwards, nodes on or behind a cycle keep
    a positive count (see :func:`on_cycles`)."""
    order = _sources(indegree) if starts is None else list(starts)
    append = order.append
    for i in order:  # the list is its own queue: iterating it reaches what is appended meanwhile
        for c in succ[i]:
            indegree[c] -= 1
            if indegree[c] == 0:
                append(c)
    return order


def kahn_order_by_readers(indegree: list[int], readers: Sequence[Sequence[tuple[int, int, int]]],
                          ids: Sequence[int] | None = None) -> list[int]:
    """:func:`kahn_order` from every node of indegree 0, over per-node lists of ``(reader, port,
    slot)`` (a graph index's consumers, read as they are rather than copied into lists of readers).
    ``ids``: the node indices as int objects to list the sources by (by default, new ones)."""
    native = native_module("_order")
    if native is not None:
        return native.kahn_order_by_readers(indegree, readers, ids)
    order = _sources(indegree, ids)
    append = order.append
    for i in order:
        for c, _, _ in readers[i]:
            indegree[c] -= 1
            if indegree[c] == 0:
                append(c)
    return order


def drop_loop_back_edges(ops: Sequence[str], readers: Sequence[Sequence[tuple[int, int, int]]],
                         inputs: Sequence[Sequence[tuple[int, int]]], indegree: list[int]) -> None:
    """Count a loop's ``Merge`` (one a back edge, NextIteration -> Merge, enters: the only cycle
    allowed) as TensorFlow's import does: ready once its control inputs and any one data input are,
    the back edge included.  A cycle closed through a Merge that no input outside the cycle reaches
    then stays a cycle, as TensorFlow refuses it.  ``indegree`` (per node, its inputs) is changed;
    ``readers`` (per node, ``(reader, port, slot)``) is left as it is."""
    native = native_module("_order")
    if native is not None:
        native.drop_loop_back_edges(ops, readers, inputs, indegree, LOOP_BACK_OPS, LOOP_MERGE_OPS)
        return
    for i in compress(count(), map(LOOP_BACK_OPS.__contains__, ops)):
        for c, port, _ in readers[i]:
            if port != CONTROL and ops[c] in LOOP_MERGE_OPS:
                indegree[c] = 1 + sum(1 for _, p in inputs[c] if p == CONTROL)


def _sources(indegree: list[int], ids: Sequence[int] | None = None) -> list[int]:
    """The nodes of indegree 0, in index order (as the int objects of ``ids``, when given)."""
    return list(compress(count() if ids is None else ids, map(operator.not_, indegree)))


def on_cycles(indegree: Sequence[int], succ: Sequence[Sequence[int]]) -> list[int]:
    """The nodes :func:`kahn_order` left (positive ``indegree``), minus those merely downstream of a
    cycle: what remains lies on one."""
    left = {i for i, d in enumerate(indegree) if d > 0}
    outdegree = {i: sum(1 for c in succ[i] if c in left) for i in left}
    preds: dict[int, list[int]] = {i: [] for i in left}
    for i in left:
        for c in succ[i]:
            if c in left:
                preds[c].append(i)
    queue = [i for i, d in outdegree.items() if d == 0]
    while queue:
        i = queue.pop()
        left.discard(i)
        for p in preds[i]:
            outdegree[p] -= 1
            if outdegree[p] == 0:
                queue.append(p)
    return sorted(left)
