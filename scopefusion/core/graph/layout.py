"""Where every node of a rewritten graph stands.

A rewrite drops some nodes and puts new ones right after given old ones (or where those
stood, when they were dropped); every other node keeps its relative place.  The layout is
worked out for all nodes at once with array arithmetic, so neither placing the messages nor
indexing the result runs Python code per untouched node.

Positions are told in two numberings: the old nodes ``0..count-1`` and the new nodes after
them, ``count + j`` for the ``j``-th new node (in the order the rewrite lists them).
"""
from __future__ import annotations

from functools import cached_property, partial
from typing import AbstractSet, Any, Mapping, Sequence, TypeVar

import numpy as np

from .native import native_module
from .node_set import NodeSet

_T = TypeVar("_T")


class NodeLayout:
    """The node list after a rewrite, in terms of the old one.  Worked out as arrays; the lists the
    next index is built from are made on first use, after the stage that rewrote has let go of
    its candidates and plans."""

    def __init__(self, position: np.ndarray, fresh: np.ndarray, order: np.ndarray, sort_keys: np.ndarray) -> None:
        self._position, self._fresh, self._order = position, fresh, order
        #: per old node, then per new node: its place when the node list (old nodes, then the new
        #: ones appended) is sorted into the new order; dropped nodes go last, in their old order
        self.sort_keys = sort_keys

    @cached_property
    def position(self) -> list[int]:
        """Every old node's new position, -1 when dropped."""
        return self._position.tolist()

    @cached_property
    def fresh(self) -> list[int]:
        """Every new node's position, in the order the rewrite lists them."""
        return self._fresh.tolist()

    @cached_property
    def order(self) -> list[int]:
        """Per new position, what stands there: an old node ``i`` or the new node ``count + j``."""
        return self._order.tolist()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeLayout):
            return NotImplemented
        mine = (self._position, self._fresh, self._order, self.sort_keys)
        theirs = (other._position, other._fresh, other._order, other.sort_keys)
        return all(map(np.array_equal, mine, theirs))

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def of(cls, count: int, dropped: AbstractSet[int], inserted: Mapping[int, int]) -> "NodeLayout":
        """The layout after dropping ``dropped`` from ``count`` nodes and putting ``inserted[i]`` new
        nodes right after old node ``i`` (the new nodes listed in ``inserted``'s order)."""
        gone = dropped.indices() if isinstance(dropped, NodeSet) else np.fromiter(dropped, np.int64, len(dropped))
        anchors = np.fromiter(inserted.keys(), np.int64, len(inserted))
        sizes = np.fromiter(inserted.values(), np.int64, len(inserted))
        shift = np.zeros(count + 1, np.int64)
        shift[gone + 1] -= 1
        shift[anchors + 1] += sizes  # anchors are distinct
        before = np.cumsum(shift)  # nodes gained before each old node
        position = np.arange(count, dtype=np.int64) + before[:count]
        is_gone = np.zeros(count, bool)
        is_gone[gone] = True
        starts = anchors + before[anchors] + ~is_gone[anchors]  # after the anchor, or in its place
        firsts = np.cumsum(sizes) - sizes  # each anchor's first new node, in the new nodes' numbering
        fresh = np.repeat(starts - firsts, sizes) + np.arange(int(sizes.sum()), dtype=np.int64)
        position[is_gone] = -1
        keys = np.concatenate([position, fresh])
        total = len(keys) - len(gone)
        order = np.empty(total, np.int64)
        kept = keys >= 0
        order[keys[kept]] = np.flatnonzero(kept)
        keys[~kept] = np.arange(total, len(keys), dtype=np.int64)
        return cls(*(a.astype(np.int32) for a in (position, fresh, order, keys)))  # node counts fit in 32 bits

    def __len__(self) -> int:
        return len(self._order)

    def arrange(self, nodes: Any, ids: Sequence[int] | None = None) -> None:
        """Put ``nodes`` (the old nodes, then the new ones appended) in the new order and cut the
        dropped ones off.  A repeated message field's sort moves the messages themselves, so
        wrappers held elsewhere still hold the same nodes.  ``ids``: the int objects ``0, 1, ...``
        an index holds; when they reach the new node count, the sort keys are those objects
        rather than one new int per node (the dropped nodes, which go last in their order, all
        take the key one past the kept ones)."""
        if len(nodes) != len(self.sort_keys):
            raise ValueError(f"the node list holds {len(nodes)} nodes, not the {len(self.sort_keys)} laid out")
        total = len(self._order)
        keys: Any
        if ids is not None and total < len(ids):
            table = np.array(ids, dtype=object)  # not fromiter: numpy before 1.23 makes no object arrays there
            keys = table[np.minimum(self.sort_keys, total)]  # the same objects, gathered
            del table
        else:
            keys = self.sort_keys.tolist()
        nodes.sort(key=partial(next, iter(keys)))  # list.sort asks for every key once, in list order
        del nodes[total:]

    def gather(self, old: Sequence[_T], new: Sequence[_T]) -> list[_T]:
        """A per-node list in the new order, from the old nodes' values and the new nodes' (in C
        where ``native/_edges.c`` is built, straight off the order array)."""
        native = native_module("_edges")
        if native is not None:
            return native.gather(old, new, self._order)
        return list(map([*old, *new].__getitem__, self.order))
