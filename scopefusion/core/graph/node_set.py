"""A set of node indices of one graph held as one byte per node.

A rewrite drops nodes by the hundred thousand; a Python set of them takes 16 to 32 bytes per
element (its table is kept under two thirds full), a byte per node of the graph takes one.
Membership is one index into the bytes; the elements come out in increasing order.
"""
from __future__ import annotations

from collections.abc import Set
from typing import AbstractSet, Any, Callable, Iterable, Iterator

import numpy as np


class NodeSet(Set[int]):
    """Node indices ``0 <= i < size``; anything else is never a member."""

    __slots__ = ("_marks", "_count")

    def __init__(self, size: int, members: Iterable[int] = ()) -> None:
        self._marks = bytearray(size)
        self._count: int | None = 0
        self.update(members)

    def add(self, i: int) -> None:
        self.update((i,))

    def update(self, members: Iterable[int]) -> None:
        marks, size = self._marks, len(self._marks)
        self._count = None  # counted again when asked (also after an index refused halfway)
        for i in members:
            if not 0 <= i < size:
                raise IndexError(f"node {i} is not in a graph of {size} nodes")
            marks[i] = 1

    def __contains__(self, i: Any) -> bool:  # anything: what is no index in range is no member
        try:
            return i >= 0 and self._marks[i] == 1
        except (IndexError, TypeError):
            return False

    def __len__(self) -> int:
        if self._count is None:
            self._count = self._marks.count(1)
        return self._count

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def indices(self) -> np.ndarray:
        """The members in increasing order, as an array."""
        return np.flatnonzero(np.frombuffer(self._marks, dtype=np.uint8))

    def __repr__(self) -> str:
        return f"NodeSet({len(self._marks)}, {sorted(self)!r})"


def member_test(nodes: AbstractSet[int]) -> Callable[[int], Any]:
    """``nodes.__contains__`` for node indices of the graph (``0 <= i < size``), as a function whose
    answer is true for a member: for a :class:`NodeSet` a read of the node's byte (no call of a
    method in Python, which a hot loop makes by the hundred thousand)."""
    return nodes._marks.__getitem__ if type(nodes) is NodeSet else nodes.__contains__


__all__ = ["NodeSet", "member_test"]
