"""The scope tree's array layout (``core/scope/layout.py``), worked out in bulk from the node
names, against a tree built node by node as the names are read (each scope created with its
missing ancestors, outermost first, sub-scopes in order of creation) and walked depth first,
on graphs built by real libraries."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.models import layer_norm_models as lm
from tests.models import rnn_models as rm

from scopefusion import ScopeGraph
from scopefusion.core.graph.io import load_model
from scopefusion.core.scope.layout import last_name_of

EXAMPLE = Path(__file__).resolve().parents[2] / "scopefusion" / "examples" / "bert_tiny.pb"
GRAPHS = {
    "bert_tiny example": lambda: load_model(EXAMPLE).graph_def,
    "tf.nn.batch_normalization": lambda: lm.hand_written_layer_norm("batch_normalization").graph_def,
    "static GRUCell": lambda: rm.static_rnn(rm.gru()).graph_def,
}


@functools.cache
def _graph(name: str) -> object:
    return GRAPHS[name]()


class _Walked:
    """The tree built node by node: children by name, in order of creation."""

    def __init__(self, names: list[str]) -> None:
        self.created = [""]
        self.children: dict[str, list[str]] = {"": []}
        self.direct: dict[str, list[int]] = {"": []}
        self.node_scope = []
        for i, name in enumerate(names):
            path = name.rpartition("/")[0]
            self._create(path)
            self.direct[path].append(i)
            self.node_scope.append(path)

    def _create(self, path: str) -> None:
        if path in self.children:
            return
        self._create(path.rpartition("/")[0])
        self.children[path.rpartition("/")[0]].append(path)
        self.children[path], self.direct[path] = [], []
        self.created.append(path)

    def pre_order(self) -> list[str]:
        out, stack = [], [""]
        while stack:
            name = stack.pop()
            out.append(name)
            stack.extend(reversed(self.children[name]))
        return out

    def subtree(self, name: str) -> list[str]:
        out, stack = [], [name]
        while stack:
            s = stack.pop()
            out.append(s)
            stack.extend(self.children[s])
        return out


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_the_layout_is_the_tree_built_node_by_node(graph):
    tree = ScopeGraph(_graph(graph)).tree
    layout, names = tree.layout, tree.index.names
    walked = _Walked(names)
    order = walked.pre_order()
    assert len(order) > 5 and layout.names() == order
    assert [s.name for s in tree.scopes] == walked.created
    at = {name: k for k, name in enumerate(order)}
    codes, table = layout.last_names()
    assert [order[k] for k in layout.node_scope.tolist()] == walked.node_scope
    for k, name in enumerate(order):
        scope = tree.scope_at(k)
        assert layout.find(name) == k and tree.get(name) is scope and scope.name == name
        assert scope.depth == (name.count("/") + 1 if name else 0)
        assert (scope.parent.name if scope.parent else None) == (name.rpartition("/")[0] if name else None)
        assert [s.name for s in scope.sub_scopes()] == walked.children[name]
        subtree = walked.subtree(name)
        assert int(layout.end[k]) - k == len(subtree) and max(at[s] for s in subtree) == int(layout.end[k]) - 1
        assert scope.direct_nodes == walked.direct[name]
        assert scope.all_node_indices() == sorted(i for s in subtree for i in walked.direct[s])
        assert scope.last_name == (last_name_of(name) if name else "root") == table[codes[k]]
    assert [tree.node_scope[i].name for i in range(len(names))] == walked.node_scope


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_scopes_holding_a_return_node_are_those_above_it(graph):
    graph_def = type(_graph(graph))()
    graph_def.CopyFrom(_graph(graph))
    deepest = max(range(len(graph_def.node)), key=lambda i: graph_def.node[i].name.count("/"))
    for i in (deepest, len(graph_def.node) // 2):
        graph_def.node[i].op = "_Retval"
    tree = ScopeGraph(graph_def).tree
    holding = set()
    for i in (deepest, len(graph_def.node) // 2):
        path = graph_def.node[i].name
        while path:
            path = path.rpartition("/")[0]
            holding.add(path)
    assert [s.contains_return for s in tree.scopes] == [s.name in holding for s in tree.scopes]
    assert sum(s.contains_return for s in tree.scopes) >= 2


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_ancestors_are_the_scopes_a_name_lies_under(graph):
    """``is_ancestor_of`` answers a plain bool: True exactly for the scopes strictly above."""
    tree = ScopeGraph(_graph(graph)).tree
    names = tree.layout.names()
    for scope in tree.scopes:
        above = [s.is_ancestor_of(scope) for s in tree.scopes]
        assert all(type(answer) is bool for answer in above)
        assert [s.name for s, answer in zip(tree.scopes, above, strict=True) if answer] == [
            name for name in names if name != scope.name and (not name or scope.name.startswith(name + "/"))]


def test_a_closed_tree_still_names_its_scopes():
    sg = ScopeGraph(_graph("bert_tiny example"))
    deep = max(sg.tree.layout.names(), key=lambda name: name.count("/"))
    held = sg.scope(deep)
    nodes = held.all_node_indices()
    sg.close()
    assert held.name == deep and held.all_node_indices() == nodes and held.parent is None
    assert sg.scope(deep).name == deep and sg.scope(deep).sub_scopes() == []


def test_node_lists_hold_the_index_s_own_int_objects(bert_encoder):
    """A scope's nodes are the index's int objects, not new ones per list (they are held by every
    candidate's members: a million nodes would otherwise carry a million more ints)."""
    graph = ScopeGraph(bert_encoder.graph_def)
    ids = graph.index.node_ids()
    assert len(ids) > 300  # indices past 256 are ints Python does not share by itself
    scopes = [s for s in graph.scopes() if s.all_node_indices()]
    assert len(scopes) > 20
    for scope in scopes:
        for nodes in (scope.all_node_indices(), scope.direct_nodes):
            assert all(i is ids[i] for i in nodes)
    big = [i for s in scopes for i in s.all_node_indices() if i > 256]
    assert big and all(i is ids[i] for i in big)
