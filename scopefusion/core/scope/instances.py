"""Several calls of one layer in one scope.

A Keras layer called several times from one graph function (a shared layer, a cell
applied per step) opens the same name scope on every call: TensorFlow then numbers
the ops inside it (``ln/moments/mean``, ``ln/moments_1/mean``, ...; six
``FusedBatchNormV3`` in one flat scope).  :func:`split_instances` cuts such a scope
into its calls and :class:`ScopePart` presents one call with the node queries of a
:class:`~.scope_graph.Scope`, so that a pass analyses each call as it analyses a
scope of its own.

A call is a connected piece of the scope's computation: the nodes that depend on
non-constant values, joined by their data edges.  Constants (and what is computed
from constants alone) join the call that reads them; one read by several calls,
such as the shared gamma of a layer, belongs to none and stays in the graph as an
input of each.  Calls chained directly inside the scope (``ln(ln(x))``) form one
piece and are not split.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from ..graph.vocabulary import CONTROL

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef

    from ..graph.index import GraphIndex

    from .scope_graph import Scope, ScopeGraph


class ScopePart:
    """One call of a layer: a subset of a scope's nodes, queried like the scope itself."""

    def __init__(self, scope: "Scope", indices: Iterable[int]) -> None:
        self.scope = scope
        self.indices = sorted(indices)
        self.name = scope.name
        self.is_root = scope.is_root

    def __repr__(self) -> str:
        return f"ScopePart({self.name!r}, {len(self.indices)} nodes)"

    @property
    def graph(self) -> "ScopeGraph":
        return self.scope.graph

    def all_node_indices(self) -> list[int]:
        return self.indices

    def nodes(self, *, direct: bool = False) -> list["NodeDef"]:
        graph = self.scope.graph
        return [graph.lend(i) for i in self.indices]

    def node_names(self, *, direct: bool = False) -> list[str]:
        names = self.scope.graph.index.names
        return [names[i] for i in self.indices]

    def nodes_by_op(self, op_type: str, *, direct: bool = False) -> list["NodeDef"]:
        ops = self.scope.graph.index.ops
        graph = self.scope.graph
        return [graph.lend(i) for i in self.indices if ops[i] == op_type]

    def count(self, op_type: str) -> int:
        ops = self.scope.graph.index.ops
        return sum(1 for i in self.indices if ops[i] == op_type)

    def full_name(self, suffix: str) -> str:
        return self.scope.full_name(suffix)

    def suffix_of(self, node_name: str) -> str:
        return self.scope.suffix_of(node_name)


def constant_nodes(index: "GraphIndex", members: list[int], inside: set[int]) -> set[int]:
    """Members computed from constants alone (no data input from anything else)."""
    position = index.position
    constant: set[int] = set()
    for i in sorted(members, key=position.__getitem__):  # producers before consumers
        producers = [p for p, port in index.inputs[i] if port != CONTROL]
        if all(p in constant or (p not in inside and index.ops[p] == "Const") for p in producers):
            constant.add(i)
    return constant


class DisjointSets:
    """Node indices joined into pieces (union-find, path halving): ``join`` two, ``find`` a piece's
    representative."""

    def __init__(self, items: Iterable[int]) -> None:
        self.parent = {i: i for i in items}

    def __contains__(self, i: int) -> bool:
        return i in self.parent

    def __iter__(self) -> Iterator[int]:
        return iter(self.parent)

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def split_instances(scope: "Scope", anchors: Iterable[int]) -> list[ScopePart] | None:
    """The calls of a layer in ``scope``, one per anchor node (e.g. each call's
    ``FusedBatchNormV3``), in graph order; None when the scope does not split into
    pieces holding one anchor each (then it is one call, or calls chained inside it)."""
    index = scope.graph.index
    members = scope.all_node_indices()
    inside = set(members)
    constant = constant_nodes(index, members, inside)
    sets = DisjointSets(i for i in members if i not in constant)
    find = sets.find
    for i in sets:
        for p, port in index.inputs[i]:
            if port != CONTROL and p in sets:
                sets.join(i, p)
    anchor_of: dict[int, int] = {}
    for a in anchors:
        root = find(a)
        if root in anchor_of:
            return None  # two anchors in one piece
        anchor_of[root] = a
    if len(anchor_of) < 2:
        return None
    pieces: dict[int, set[int]] = {root: set() for root in anchor_of}
    for i in sets:
        root = find(i)
        if root in pieces:
            pieces[root].add(i)
    _add_constants(index, constant, inside, pieces, find)
    return [ScopePart(scope, pieces[root]) for root in sorted(pieces, key=lambda r: anchor_of[r])]


def _add_constants(index: "GraphIndex", constant: set[int], inside: set[int], pieces: dict[int, set[int]],
                   find: Callable[[int], int]) -> None:
    """Give each constant node the piece of every node that reads it, when that is one piece."""
    readers: dict[int, set[int]] = {c: set() for c in constant}
    for i in inside:
        for p, _ in index.inputs[i]:
            if p in readers:
                readers[p].add(i)
    owner: dict[int, int | None] = {}

    def piece_of(c: int, active: set[int]) -> int | None:
        if c in owner:
            return owner[c]
        roots: set[int | None] = set()
        active.add(c)
        for r in readers[c]:
            if r in constant:
                roots.add(None if r in active else piece_of(r, active))
            else:
                root = find(r)
                roots.add(root if root in pieces else None)
        active.discard(c)
        owner[c] = roots.pop() if len(roots) == 1 else None
        return owner[c]

    for c in constant:
        root = piece_of(c, set())
        if root is not None:
            pieces[root].add(c)
