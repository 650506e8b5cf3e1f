"""The scope view of a graph: :class:`ScopeGraph` > :class:`ScopeTree` > :class:`Scope`.

Scopes come from ``/``-separated node names: node ``a/b/c`` lies directly in
scope ``a/b``, a child of ``a``, a child of the root (name ``""``).  Every scope
counts op types over all of its descendant nodes.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from types import MappingProxyType
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping

from ..graph.index import GraphIndex, no_gc
from ..graph.tf_shapes import ShapeRules
from ..graph.view import GraphView
from ..graph.vocabulary import FORWARDING_OPS, RETURN_OPS
from .arrays import ScopeArrays

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

__all__ = ["FORWARDING_OPS", "RETURN_OPS", "Scope", "ScopeGraph", "ScopeTree", "strip_index_suffix"]

#: What a scope without sub-scopes holds until it has some (one shared, read-only mapping: most
#: scopes are leaves)
_NONE: Mapping = MappingProxyType({})


def strip_index_suffix(component: str) -> str:
    """``LayerNorm_1`` -> ``LayerNorm``; ``x_0`` and ``x`` are unchanged."""
    base, sep, digits = component.rpartition("_")
    if sep and base and digits.isascii() and digits.isdigit() and digits.strip("0"):
        return base
    return component


class Scope:
    """One name scope: its nodes, sub-scopes and op-type counts."""

    __slots__ = (
        "name", "last_name", "parent", "depth", "children", "direct_nodes",
        "_op_counts", "sub_type", "contains_return", "_tree", "_all_sub_scopes",
        "_all_nodes",
    )

    def __init__(self, tree: "ScopeTree", name: str, parent: "Scope | None") -> None:
        self._tree = tree
        self.name = name
        component = name.rpartition("/")[2]
        self.last_name = (strip_index_suffix(component) if "_" in component else component) if name else "root"
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.children: Mapping[str, Scope] = _NONE  # a dict once it has one
        self.direct_nodes: list[int] = []
        self._op_counts: dict[str, int] | None = None  # counted for the whole tree on first use
        self.sub_type: str | None = None
        self.contains_return = False
        self._all_sub_scopes: list[Scope] | None = None
        self._all_nodes: list[int] | None = None

    def __repr__(self) -> str:
        return f"Scope({self.name or '<root>'!r})"

    # -- structure --------------------------------------------------------
    @property
    def is_root(self) -> bool:
        return self.parent is None

    def sub_scopes(self) -> list["Scope"]:
        """Direct sub-scopes, in order of first appearance."""
        return list(self.children.values())

    def all_sub_scopes(self) -> list["Scope"]:
        """All descendant scopes (depth first, pre-order)."""
        arrays = self._tree._arrays if self._tree is not None else None
        if self._all_sub_scopes is None and arrays is not None:  # a range of the arrays' pre-order
            k = arrays.position(self)
            self._all_sub_scopes = arrays.order[k + 1:int(arrays.end[k])]
        if self._all_sub_scopes is None:
            out: list[Scope] = []
            stack = list(reversed(self.sub_scopes()))
            while stack:
                s = stack.pop()
                out.append(s)
                stack.extend(reversed(s.sub_scopes()))
            self._all_sub_scopes = out
        return self._all_sub_scopes

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
        s = other.parent
        while s is not None and s.depth >= self.depth:
            if s is self:
                return True
            s = s.parent
        return False

    @property
    def op_counts(self) -> dict[str, int]:
        """Descendant nodes per op type (only the types present)."""
        if self._op_counts is None:
            self._tree.count_ops()
        return self._op_counts  # type: ignore[return-value]

    # -- nodes --------------------------------------------------------------
    def all_node_indices(self) -> list[int]:
        """Indices of every node in this scope or below it, in graph order."""
        if self._all_nodes is None:
            nodes = list(self.direct_nodes)
            for s in self.all_sub_scopes():
                nodes.extend(s.direct_nodes)
            nodes.sort()
            self._all_nodes = nodes
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
        self.root = Scope(self, "", None)
        self._by_name: dict[str, Scope] = {"": self.root}
        self.scopes: list[Scope] = [self.root]
        self.node_scope: list[Scope] = []
        self.labelled: dict[str, dict[int, Scope]] = {}  # sub_type -> labelled scopes by id
        self._label_positions: dict[str, list[int]] = {}  # sub_type -> pre-order numbers, sorted
        self.graph: ScopeGraph | None = None
        self._arrays: ScopeArrays | None = None
        self._build()

    @property
    def arrays(self) -> ScopeArrays:
        """The tree in pre-order as arrays (built on first use; the tree's scopes never change)."""
        if self._arrays is None:
            self._arrays = ScopeArrays(self)
        return self._arrays

    def _scope_for(self, path: str) -> Scope:
        """The scope called ``path``, created with every missing ancestor (outermost first,
        without recursion: names may be thousands of scopes deep)."""
        by_name = self._by_name
        missing = []
        parent = by_name.get(path)
        while parent is None:  # the root ("") is always there
            missing.append(path)
            path = path.rpartition("/")[0]
            parent = by_name.get(path)
        for name in reversed(missing):
            scope = Scope(self, name, parent)
            children = parent.children
            if children is _NONE:
                children = parent.children = {}
            children[name.rpartition("/")[2]] = scope  # type: ignore[index]
            by_name[name] = scope
            self.scopes.append(scope)
            parent = scope
        return parent

    def _build(self) -> None:
        by_name = self._by_name
        node_scope = self.node_scope
        with no_gc():
            for i, name in enumerate(self.index.names):
                path = name.rpartition("/")[0]
                scope = by_name.get(path) or self._scope_for(path)
                node_scope.append(scope)
                scope.direct_nodes.append(i)
            for op in RETURN_OPS:
                for i in self.index.nodes_of_type(op):
                    s: Scope | None = node_scope[i]
                    while s is not None and not s.contains_return:
                        s.contains_return = True
                        s = s.parent

    def count_ops(self) -> None:
        """Every scope's :attr:`Scope.op_counts` (counted once, when a scope is first asked)."""
        with no_gc():
            for scope in self.scopes:
                scope._op_counts = {}
            for scope, op in zip(self.node_scope, self.index.ops):
                counts = scope._op_counts
                counts[op] = counts.get(op, 0) + 1  # type: ignore[index]
            # Children are always created after their parents: summing in
            # reverse creation order folds every subtree into its ancestors.
            for scope in reversed(self.scopes[1:]):
                parent_counts = scope.parent._op_counts  # type: ignore[union-attr]
                for op, n in scope._op_counts.items():  # type: ignore[union-attr]
                    parent_counts[op] = parent_counts.get(op, 0) + n  # type: ignore[index]

    def __iter__(self) -> Iterator[Scope]:
        return iter(self.scopes)

    def __len__(self) -> int:
        return len(self.scopes)

    def set_label(self, scope: Scope, sub_type: str | None) -> None:
        """Label ``scope`` with ``sub_type`` (``None`` removes its label)."""
        old = scope.sub_type
        if old == sub_type:
            return
        if old is not None:
            del self.labelled[old][id(scope)]
            self._label_positions.pop(old, None)
        scope.sub_type = sub_type
        if sub_type is not None:
            self.labelled.setdefault(sub_type, {})[id(scope)] = scope
            self._label_positions.pop(sub_type, None)

    def clear_labels(self) -> None:
        """Remove every label (each pass starts from an unlabelled tree)."""
        for by_id in self.labelled.values():
            for scope in by_id.values():
                scope.sub_type = None
        self.labelled = {}
        self._label_positions = {}

    def count_labelled_below(self, scope: Scope, sub_type: str) -> int:
        """How many scopes strictly below ``scope`` carry label ``sub_type``: those of
        :meth:`labelled_positions` within the subtree's range of the pre-order."""
        if not self.labelled.get(sub_type):
            return 0
        positions = self.labelled_positions(sub_type)
        k = self.arrays.position(scope)
        return bisect_left(positions, int(self.arrays.end[k])) - bisect_right(positions, k)

    def labelled_positions(self, sub_type: str) -> list[int]:
        """The pre-order numbers (:attr:`arrays`) of the scopes labelled ``sub_type``, sorted
        (once per change of the label)."""
        positions = self._label_positions.get(sub_type)
        if positions is None:
            positions = sorted(map(self.arrays.position, self.labelled.get(sub_type, {}).values()))
            self._label_positions[sub_type] = positions
        return positions

    def get(self, name: str) -> Scope | None:
        """The scope with full name ``name`` (no trailing slash), if any."""
        return self._by_name.get(name.rstrip("/"))


class ScopeGraph(GraphView):
    """The graph as scope passes see it: node queries (:class:`GraphView`), the scope
    tree, labels and matches."""

    def __init__(self, graph_def: "GraphDef | GraphIndex", *, same_shape: ShapeRules | None = None) -> None:
        super().__init__(graph_def, same_shape=same_shape)
        self.tree = ScopeTree(self.index)
        self.tree.graph = self
        self.matches: dict[str, list[Scope]] = {}

    def close(self) -> None:
        """Break the parent/child reference cycles so memory is freed at once."""
        for scope in self.tree.scopes:
            scope.children = _NONE
            scope.parent = None
            scope._all_sub_scopes = None
            scope._tree = None  # type: ignore[assignment]
        self.tree.labelled = {}
        self.tree._label_positions = {}
        self.tree._arrays = None
        self.tree.graph = None
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
