"""Kahn's topological sort over integer nodes, and the nodes a cycle leaves behind."""
from __future__ import annotations

from collections import deque
from typing import Iterable, Sequence


def kahn_order(indegree: list[int], succ: Sequence[Sequence[int]], starts: Iterable[int] | None = None) -> list[int]:
    """The nodes in topological order, first in first out from ``starts`` (by default every node of
    indegree 0, in index order).  ``indegree`` is consumed: afterwards, nodes on or behind a cycle keep
    a positive count (see :func:`on_cycles`)."""
    queue = deque(i for i, d in enumerate(indegree) if d == 0) if starts is None else deque(starts)
    order: list[int] = []
    append, pop, push = order.append, queue.popleft, queue.append
    while queue:
        i = pop()
        append(i)
        for c in succ[i]:
            indegree[c] -= 1
            if indegree[c] == 0:
                push(c)
    return order


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
