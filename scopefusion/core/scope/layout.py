"""The scope tree laid out in arrays, worked out from the node names in bulk.

Node ``a/b/c`` lies directly in scope ``a/b``, a child of ``a``, a child of the root
(name ``""``).  Scopes are *created* in order of first appearance, each after its missing
ancestors (outermost first); a scope's sub-scopes are ordered by creation.  The layout numbers
scopes in the pre-order of that tree (the root 0), so a scope's subtree is the range
``[k, end[k])`` of numbers and the nodes of a subtree are one slice of :attr:`ScopeLayout.members`.

One Python step per distinct scope name finds the scopes and their parents; everything else
(depths, subtree sizes, pre-order numbers, the node -> scope map, nodes grouped by scope) is
array arithmetic, one step per tree level at most.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..graph.native import native_module

__all__ = ["ScopeLayout", "last_name_of", "strip_index_suffix"]


def last_name_of(name: str) -> str:
    """The last component of a scope name without its ``_N`` call suffix."""
    component = name.rpartition("/")[2]
    return strip_index_suffix(component) if "_" in component else component


def strip_index_suffix(component: str) -> str:
    """``LayerNorm_1`` -> ``LayerNorm``; ``x_0`` and ``x`` are unchanged."""
    base, sep, digits = component.rpartition("_")
    if sep and base and digits.isascii() and digits.isdigit() and digits.strip("0"):
        return base
    return component


class ScopeLayout:
    """Parents, depths, subtree ends and nodes of every scope, numbered in pre-order."""

    def __init__(self, node_names: Sequence[str], node_ids: Sequence[int] | None = None) -> None:
        #: the node indices as the int objects the graph's index holds (lists of nodes handed out are
        #: made of them, not of new ones); None: of new ones
        self.node_ids = node_ids
        created, parent_list, depth_list, node_created = _scopes_of(node_names)
        n = len(parent_list)
        parent = np.asarray(parent_list, dtype=np.int64)
        depth = np.asarray(depth_list, dtype=np.int64)
        levels = _levels(depth)
        size = _subtree_sizes(parent, levels)
        #: creation number -> pre-order number, and back
        position = _pre_order(parent, size, levels)
        created_at = np.empty(n, dtype=np.int64)
        created_at[position] = np.arange(n, dtype=np.int64)
        self.position, self.created = _narrow(position), _narrow(created_at)
        #: full names, by creation number (the keys of :attr:`by_name`, in order)
        self.names_created: list[str] = list(created)
        #: full name -> creation number
        self.by_name: dict[str, int] = created
        #: by pre-order number: parent (-1 for the root), depth, one past the subtree's last scope
        parent_at = np.full(n, -1, dtype=np.int64)
        parent_at[position[1:]] = position[parent[1:]]
        self.parent, self.depth = _narrow(parent_at), _narrow(depth[created_at])
        self.end = _narrow(np.arange(n, dtype=np.int64) + size[created_at])
        #: the pre-order number of the scope each node lies directly in
        self.node_scope = _narrow(position[node_created])
        #: node indices grouped by scope in pre-order, in graph order within a scope: scope ``k``'s
        #: direct nodes are ``members[starts[k]:starts[k + 1]]``, its subtree's
        #: ``members[starts[k]:starts[end[k]]]``
        self.members = _narrow(np.argsort(self.node_scope, kind="stable"))
        starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.node_scope, minlength=n), out=starts[1:])
        self.starts = _narrow(starts)

    def __len__(self) -> int:
        return len(self.parent)

    def name(self, k: int) -> str:
        """The full name of scope ``k``."""
        return self.names_created[int(self.created[k])]

    def names(self) -> list[str]:
        """Every scope's full name, in pre-order."""
        return list(map(self.names_created.__getitem__, self.created.tolist()))

    def last_names(self) -> tuple[np.ndarray, list[str]]:
        """Every scope's last name (:func:`last_name_of`, ``"root"`` for the root) as a code, in
        pre-order, and the distinct last names the codes number.  Each distinct last component
        is stripped once."""
        components = [name.rpartition("/")[2] for name in self.names_created]
        distinct = dict.fromkeys(components)
        stripped = list(map(last_name_of, distinct))
        table = list(dict.fromkeys(["root", *stripped]))
        code = dict(zip(table, range(len(table)), strict=True))
        of_component = dict(zip(distinct, map(code.__getitem__, stripped), strict=True))
        codes = np.fromiter(map(of_component.__getitem__, components), dtype=np.int64, count=len(components))
        codes = codes[self.created]
        codes[0] = 0  # the root: "root"
        return codes, table

    def find(self, name: str) -> int | None:
        """The pre-order number of the scope named ``name``, if any."""
        c = self.by_name.get(name)
        return None if c is None else int(self.position[c])

    def range_counts(self, positions: np.ndarray) -> np.ndarray:
        """Per scope, how many of ``positions`` (scope numbers, repeats counted) lie in its subtree."""
        n = len(self.parent)
        running = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(positions, minlength=n), out=running[1:])
        return running[self.end] - running[:n]

    def covered(self, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        """Where a scope is one of ``positions`` or lies inside one of them."""
        n = len(self.parent)
        first = np.asarray(positions, dtype=np.int64)
        marks = np.bincount(first, minlength=n + 1) - np.bincount(self.end[first], minlength=n + 1)
        return np.cumsum(marks[:n]) > 0

    def direct_nodes(self, k: int) -> list[int]:
        """The nodes lying directly in scope ``k``, in graph order."""
        return self._listed(self.members[self.starts[k]:self.starts[k + 1]])

    def subtree_nodes(self, k: int) -> list[int]:
        """Every node of scope ``k``'s subtree, in graph order."""
        return self._listed(np.sort(self.members[self.starts[k]:self.starts[self.end[k]]]))

    def _listed(self, nodes: np.ndarray) -> list[int]:
        listed: list[int] = nodes.tolist()
        return listed if self.node_ids is None else list(map(self.node_ids.__getitem__, listed))

    def children(self, k: int) -> list[int]:
        """The sub-scopes of scope ``k``, in creation order (= pre-order)."""
        out = []
        c, stop, end = k + 1, int(self.end[k]), self.end
        while c < stop:
            out.append(c)
            c = int(end[c])
        return out


def _narrow(values: np.ndarray) -> np.ndarray:
    """``values`` as 32-bit integers (scope and node numbers fit: a graph is at most 2 GB)."""
    return values.astype(np.int32)


def _scopes_of(node_names: Sequence[str]) -> tuple[dict[str, int], list[int], list[int], np.ndarray]:
    """Scope names -> creation numbers, each scope's parent and depth (:func:`_create`), and the
    creation number of the scope each node lies directly in (in C where ``native/_scopes.c`` is
    built, with the same results)."""
    native = native_module("_scopes")
    if native is not None:
        created, parent, depth, node_created = native.scope_tree(node_names)
        return created, parent, depth, np.frombuffer(node_created, dtype=np.int64)
    paths = [name.rpartition("/")[0] for name in node_names]
    created, parent, depth = _create(paths)
    return created, parent, depth, np.fromiter(map(created.__getitem__, paths), dtype=np.int64, count=len(paths))


def _create(paths: Sequence[str]) -> tuple[dict[str, int], list[int], list[int]]:
    """Scope names -> creation numbers (the root ``""`` first), and each scope's parent and depth."""
    created: dict[str, int] = {"": 0}
    parent, depth = [-1], [0]
    for path in dict.fromkeys(paths):
        if path in created:
            continue
        p = created.get(path.rpartition("/")[0])
        if p is None:  # some ancestors are missing too: create them first
            p = _create_ancestors(path, created, parent, depth)
        created[path] = len(parent)
        parent.append(p)
        depth.append(depth[p] + 1)
    return created, parent, depth


def _create_ancestors(path: str, created: dict[str, int], parent: list[int], depth: list[int]) -> int:
    """Create the missing ancestors of ``path``, outermost first (without recursion: names may be
    thousands of scopes deep); returns the creation number of its parent."""
    missing = []
    path = path.rpartition("/")[0]
    while path not in created:  # the root ("") is always there
        missing.append(path)
        path = path.rpartition("/")[0]
    p = created[path]
    for name in reversed(missing):
        created[name] = len(parent)
        parent.append(p)
        depth.append(depth[p] + 1)
        p = len(parent) - 1
    return p


def _levels(depth: np.ndarray) -> list[np.ndarray]:
    """The scopes of each depth (by creation number, ascending)."""
    by_depth = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
    return [by_depth[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1)]


def _subtree_sizes(parent: np.ndarray, levels: list[np.ndarray]) -> np.ndarray:
    """Scopes per subtree, folded up one level at a time from the deepest."""
    size = np.ones(len(parent), dtype=np.int64)
    for level in reversed(levels[1:]):
        np.add.at(size, parent[level], size[level])
    return size


def _pre_order(parent: np.ndarray, size: np.ndarray, levels: list[np.ndarray]) -> np.ndarray:
    """Each scope's pre-order number: its parent's, plus one, plus the sizes of its earlier
    siblings (those created before it)."""
    n = len(parent)
    siblings = np.argsort(parent, kind="stable")  # grouped by parent, in creation order
    sizes = size[siblings]
    before = np.cumsum(sizes) - sizes
    group = parent[siblings]
    first = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    offset = np.empty(n, dtype=np.int64)
    offset[siblings] = before - np.repeat(before[first], np.diff(np.append(first, n)))
    position = np.zeros(n, dtype=np.int64)
    for level in levels[1:]:
        position[level] = position[parent[level]] + 1 + offset[level]
    return position
