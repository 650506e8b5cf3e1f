"""The scope view of a graph: :class:`ScopeGraph` > :class:`ScopeTree` > :class:`Scope`.

Scopes come from ``/``-separated node names: node ``a/b/c`` lies directly in
scope ``a/b``, a child of ``a``, a child of the root (name ``""``).  Every scope
counts op types over all of its descendant nodes.

The tree itself is held as arrays (:class:`.layout.ScopeLayout`, numbered in pre-order) and its
labels as one code per scope (:class:`.labels.ScopeLabels`); a :class:`Scope` object is made for
a scope only when asked for, and answers from those arrays.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Sequence, overload

import numpy as np

from ..graph.index import GraphIndex
from ..graph.tf_shapes import ShapeRules
from ..graph.view import GraphView
from ..graph.vocabulary import FORWARDING_OPS, RETURN_OPS
from .arrays import ScopeArrays
from .labels import ScopeLabels
from .layout import ScopeLayout, last_name_of, strip_index_suffix

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

__all__ = ["FORWARDING_OPS", "RETURN_OPS", "Scope", "ScopeGraph", "ScopeTree", "last_name_of", "strip_index_suffix"]


class Scope:
    """One name scope: its nodes, sub-scopes and op-type counts.

    A scope is a view of its number in the tree's :class:`.layout.ScopeLayout`; the tree makes
    one object per scope, when first asked for it."""

    __slots__ = ("_tree", "_k", "name", "_op_counts", "_all_nodes")

    def __init__(self, tree: "ScopeTree", k: int) -> None:
        self._tree = tree
        self._k = k  # the pre-order number
        #: the full name (``""`` for the root)
        self.name: str = tree.layout.name(k)
        self._op_counts: dict[str, int] | None = None  # counted when first asked
        self._all_nodes: list[int] | None = None

    def __repr__(self) -> str:
        return f"Scope({self.name or '<root>'!r})"

    # -- structure --------------------------------------------------------
    @property
    def last_name(self) -> str:
        """The last component without a ``_N`` call suffix (``"root"`` for the root)."""
        name = self.name
        return last_name_of(name) if name else "root"

    @property
    def depth(self) -> int:
        """How many scopes lie above this one (0 for the root)."""
        return int(self._tree.layout.depth[self._k])

    @property
    def parent(self) -> "Scope | None":
        """The scope this one lies directly in (None for the root, and once the tree is closed)."""
        p = int(self._tree.layout.parent[self._k])
        return None if p < 0 or self._tree.closed else self._tree.scope_at(p)

    @property
    def is_root(self) -> bool:
        return self._k == 0

    @property
    def sub_type(self) -> str | None:
        """The label a pattern gave this scope, if any (:meth:`ScopeTree.set_label`)."""
        return self._tree.labels.of(self._k)

    @property
    def contains_return(self) -> bool:
        """True when a return node lies in this scope or below it."""
        return bool(self._tree.contains_return[self._k])

    @property
    def children(self) -> Mapping[str, "Scope"]:
        """Direct sub-scopes by last component, in order of first appearance."""
        return {s.name.rpartition("/")[2]: s for s in self.sub_scopes()}

    @property
    def direct_nodes(self) -> list[int]:
        """Indices of the nodes lying directly in this scope, in graph order."""
        return self._tree.layout.direct_nodes(self._k)

    def sub_scopes(self) -> list["Scope"]:
        """Direct sub-scopes, in order of first appearance."""
        tree = self._tree
        return [] if tree.closed else list(map(tree.scope_at, tree.layout.children(self._k)))

    def all_sub_scopes(self) -> list["Scope"]:
        """All descendant scopes (depth first, pre-order): a range of the tree's numbers."""
        tree = self._tree
        if tree.closed:
            return []
        return list(map(tree.scope_at, range(self._k + 1, int(tree.layout.end[self._k]))))

    @property
    def tree(self) -> "ScopeTree":
        return self._tree

    @property
    def graph(self) -> "ScopeGraph":
        """The :class:`ScopeGraph` this scope belongs to."""
        graph = self._tree.graph
        if graph is None:
            raise RuntimeError("this scope tree is not part of a ScopeGraph")
        return graph

    def is_ancestor_of(self, other: "Scope") -> bool:
        """True when ``other`` lies strictly below this scope."""
        return other._tree is self._tree and self._k < other._k < int(self._tree.layout.end[self._k])

    @property
    def op_counts(self) -> dict[str, int]:
        """Descendant nodes per op type (only the types present)."""
        if self._op_counts is None:
            ops = self._tree.index.ops
            self._op_counts = dict(Counter(map(ops.__getitem__, self.all_node_indices())))
        return self._op_counts

    # -- nodes --------------------------------------------------------------
    def all_node_indices(self) -> list[int]:
        """Indices of every node in this scope or below it, in graph order."""
        if self._all_nodes is None:
            self._all_nodes = self._tree.layout.subtree_nodes(self._k)
        return self._all_nodes

    def nodes(self, *, direct: bool = False) -> list["NodeDef"]:
        ids = self.direct_nodes if direct else self.all_node_indices()
        return [self._lend(i) for i in ids]

    def _lend(self, i: int) -> "NodeDef":
        graph = self._tree.graph
        return graph.lend(i) if graph is not None else self._tree.index.nodes[i]

    def node_names(self, *, direct: bool = False) -> list[str]:
        names = self._tree.index.names
        ids = self.direct_nodes if direct else self.all_node_indices()
        return [names[i] for i in ids]

    def nodes_by_op(self, op_type: str, *, direct: bool = False) -> list["NodeDef"]:
        """Nodes of one op type in this scope (or only directly in it)."""
        if not direct and not self.count(op_type):
            return []
        ops = self._tree.index.ops
        ids = self.direct_nodes if direct else self.all_node_indices()
        return [self._lend(i) for i in ids if ops[i] == op_type]

    def count(self, op_type: str) -> int:
        """Descendant nodes of ``op_type`` (0 when none)."""
        if self._op_counts is not None:
            return self._op_counts.get(op_type, 0)
        arrays = self._tree.arrays  # one count column per op type, for every scope at once
        return max(int(arrays.counts(op_type)[arrays.position(self)]), 0)

    def full_name(self, suffix: str) -> str:
        """The full node name of ``suffix`` relative to this scope."""
        return f"{self.name}/{suffix}" if self.name else suffix

    def suffix_of(self, node_name: str) -> str:
        """The name of a node relative to this scope."""
        prefix = self.name + "/" if self.name else ""
        if not node_name.startswith(prefix):
            raise ValueError(f"{node_name!r} is not inside scope {self.name!r}")
        return node_name[len(prefix):]


class ScopeTree:
    """All scopes of a graph: the root first, then in order of first appearance."""

    def __init__(self, index: GraphIndex) -> None:
        self.index = index
        self.layout = ScopeLayout(index.names, index.node_ids())
        self._objects: list[Scope | None] = [None] * len(self.layout)
        self._scopes: list[Scope] | None = None
        self._node_scopes: NodeScopes | None = None
        #: by pre-order number: does a return node lie in the scope or below it?
        self.contains_return = self._holding_returns()
        self.closed = False
        self.labels = ScopeLabels(len(self.layout))
        self.graph: ScopeGraph | None = None
        self._arrays: ScopeArrays | None = None

    def _holding_returns(self) -> np.ndarray:
        returns = [i for op in RETURN_OPS for i in self.index.nodes_of_type(op)]
        if not returns:
            return np.zeros(len(self.layout), dtype=bool)
        return self.layout.range_counts(self.layout.node_scope[returns]) > 0

    @property
    def arrays(self) -> ScopeArrays:
        """Per-scope feature arrays for the search (made on first use; the tree's scopes never change)."""
        if self._arrays is None:
            self._arrays = ScopeArrays(self)
        return self._arrays

    def scope_at(self, k: int) -> Scope:
        """The scope numbered ``k`` in pre-order (one object per scope, made when first asked;
        after :meth:`close`, a new one each time)."""
        try:
            scope = self._objects[k]
        except IndexError:
            if not self.closed:
                raise
            return Scope(self, k)
        if scope is None:
            scope = self._objects[k] = Scope(self, k)
        return scope

    @property
    def root(self) -> Scope:
        """The root scope (name ``""``): the whole graph."""
        return self.scope_at(0)

    @property
    def scopes(self) -> list[Scope]:
        """Every scope, the root first, then in order of first appearance."""
        if self._scopes is None:
            self._scopes = list(map(self.scope_at, self.layout.position.tolist()))
        return self._scopes

    @property
    def node_scope(self) -> "NodeScopes":
        """The scope each node lies directly in, by node index."""
        if self._node_scopes is None:
            self._node_scopes = NodeScopes(self)
        return self._node_scopes

    def __iter__(self) -> Iterator[Scope]:
        return iter(self.scopes)

    def __len__(self) -> int:
        return len(self.layout)

    def set_label(self, scope: Scope, sub_type: str | None) -> None:
        """Label ``scope`` with ``sub_type`` (``None`` removes its label)."""
        self.labels.set([scope._k], sub_type)

    def clear_labels(self) -> None:
        """Remove every label (each pass starts from an unlabelled tree)."""
        self.labels.clear()

    def count_labelled_below(self, scope: Scope, sub_type: str) -> int:
        """How many scopes strictly below ``scope`` carry label ``sub_type``: those of
        :meth:`labelled_positions` within the subtree's range of the pre-order."""
        positions = self.labelled_positions(sub_type)
        if not positions:
            return 0
        k = scope._k
        return bisect_left(positions, int(self.layout.end[k])) - bisect_right(positions, k)

    def labelled_positions(self, sub_type: str) -> list[int]:
        """The pre-order numbers of the scopes labelled ``sub_type``, sorted (once per change of
        the label)."""
        return self.labels.positions(sub_type)

    def get(self, name: str) -> Scope | None:
        """The scope with full name ``name`` (no trailing slash), if any."""
        k = self.layout.find(name.rstrip("/"))
        return None if k is None else self.scope_at(k)

    def close(self) -> None:
        """Drop the scope objects and what refers back to them, so memory is freed at once;
        scopes still held keep their names and nodes but no longer reach other scopes."""
        self.closed = True
        self._objects = []
        self._scopes = None
        self._node_scopes = None
        self._arrays = None
        self.graph = None


class NodeScopes(Sequence[Scope]):
    """The scope each node lies directly in, by node index (scope objects made when asked)."""

    def __init__(self, tree: ScopeTree) -> None:
        self._tree = tree

    def __len__(self) -> int:
        return len(self._tree.layout.node_scope)

    @overload
    def __getitem__(self, i: int) -> Scope: ...

    @overload
    def __getitem__(self, i: slice) -> list[Scope]: ...

    def __getitem__(self, i: int | slice) -> Scope | list[Scope]:
        positions = self._tree.layout.node_scope[i]
        if isinstance(i, slice):
            return list(map(self._tree.scope_at, positions.tolist()))
        return self._tree.scope_at(int(positions))


class ScopeGraph(GraphView):
    """The graph as scope passes see it: node queries (:class:`GraphView`), the scope
    tree, labels and matches."""

    def __init__(self, graph_def: "GraphDef | GraphIndex", *, same_shape: ShapeRules | None = None) -> None:
        super().__init__(graph_def, same_shape=same_shape)
        self.tree = ScopeTree(self.index)
        self.tree.graph = self
        self.matches: dict[str, list[Scope]] = {}

    def close(self) -> None:
        """Drop the scope objects, so memory is freed at once."""
        self.tree.close()
        self.matches = {}

    @property
    def root(self) -> Scope:
        return self.tree.root

    def scopes(self) -> list[Scope]:
        return self.tree.scopes

    def scope(self, name: str) -> Scope | None:
        return self.tree.get(name)

    def scope_of(self, node_name: str) -> Scope:
        """The scope a node lies directly in."""
        return self.tree.node_scope[self.index.index[node_name]]

    def iter_scopes(self, names: Iterable[str]) -> Iterator[Scope]:
        for n in names:
            s = self.scope(n)
            if s is not None:
                yield s
