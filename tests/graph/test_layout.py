"""The layout of a rewritten node list, worked out with array arithmetic, is the list a plain
walk over the old nodes builds: dropped nodes left out, new nodes right after their anchor (or
where it stood); sorting the old nodes followed by the new ones by its keys gives that list."""
from __future__ import annotations

import random
from functools import partial

import numpy as np
import pytest

import scopefusion
from scopefusion.core.graph.layout import NodeLayout
from scopefusion.core.graph.protos import message_class


def _walk(count: int, dropped: set[int], inserted: dict[int, int]) -> list[str]:
    """The new node list, built one node at a time: old nodes as "o<i>", new ones as "n<anchor>.<k>"."""
    out: list[str] = []
    for i in range(count):
        if i not in dropped:
            out.append(f"o{i}")
        out += [f"n{i}.{k}" for k in range(inserted.get(i, 0))]
    return out


def _tokens(count: int, inserted: dict[int, int]) -> list[str]:
    """The old nodes, then the new ones in ``inserted``'s order (as a rewrite appends them)."""
    return [f"o{i}" for i in range(count)] + [f"n{a}.{k}" for a, size in inserted.items() for k in range(size)]


def _check(count: int, dropped: set[int], inserted: dict[int, int]) -> None:
    layout = NodeLayout.of(count, dropped, inserted)
    expected = _walk(count, dropped, inserted)
    tokens = _tokens(count, inserted)
    assert len(layout) == len(expected)
    assert [tokens[k] for k in layout.order] == expected
    assert layout.gather(tokens[:count], tokens[count:]) == expected
    where = {t: k for k, t in enumerate(expected)}
    assert layout.position == [where.get(f"o{i}", -1) for i in range(count)]
    assert layout.fresh == [where[t] for t in tokens[count:]]
    listed = list(tokens)
    listed.sort(key=partial(next, iter(layout.sort_keys)))  # as the rewrite sorts the node list
    assert listed[:len(expected)] == expected
    assert listed[len(expected):] == [f"o{i}" for i in sorted(dropped)]


@pytest.mark.parametrize("seed", range(40))
def test_random_rewrites(seed):
    rng = random.Random(seed)
    count = rng.randint(1, 60)
    dropped = {i for i in range(count) if rng.random() < 0.4}
    anchors = rng.sample(range(count), rng.randint(0, count))
    rng.shuffle(anchors)  # plans come in any order
    _check(count, dropped, {a: rng.randint(0, 3) for a in anchors})


@pytest.mark.parametrize("count, dropped, inserted", [
    (5, set(), {}),  # nothing changes
    (5, {0, 1, 2, 3, 4}, {}),  # everything goes
    (5, {0, 1, 2, 3, 4}, {2: 2}),  # a graph replaced whole
    (4, {0}, {0: 1}),  # a new node where the first stood
    (4, {3}, {3: 2}),  # new nodes where the last stood
    (4, set(), {3: 1, 0: 1}),  # after kept anchors, listed out of order
])
def test_edges(count, dropped, inserted):
    _check(count, dropped, inserted)


def test_a_graph_node_list_is_arranged_in_place():
    """The repeated field itself: the wrappers taken before the sort hold the same nodes after it."""
    graph = message_class("GraphDef")()
    for i in range(6):
        graph.node.add(name=f"o{i}", op="NoOp")
    held = list(graph.node)
    graph.node.add(name="n1.0", op="NoOp")
    graph.node.add(name="n4.0", op="NoOp")
    held += list(graph.node)[6:]
    layout = NodeLayout.of(6, {1, 2}, {1: 1, 4: 1})
    layout.arrange(graph.node)
    assert [n.name for n in graph.node] == ["o0", "n1.0", "o3", "o4", "n4.0", "o5"]
    assert all(a is b for a, b in zip(graph.node, layout.gather(held[:6], held[6:]), strict=True))


class _Ids(list):
    """The index's int objects, counting how often they are read."""

    reads = 0

    def __iter__(self):
        self.reads += 1
        return super().__iter__()


@pytest.mark.parametrize("dropped, inserted, used", [
    ({1, 2, 3}, {1: 1}, True),  # fewer nodes after: the keys are the ids' objects
    ({1}, {1: 1, 4: 2}, False),  # more nodes after than ids: keys of their own
])
def test_a_node_list_is_arranged_on_the_index_s_int_objects_when_they_reach(dropped, inserted, used):
    graph = message_class("GraphDef")()
    for i in range(6):
        graph.node.add(name=f"o{i}", op="NoOp")
    held = list(graph.node)
    for anchor, count in inserted.items():
        for k in range(count):
            graph.node.add(name=f"n{anchor}.{k}", op="NoOp")
    held += list(graph.node)[6:]
    layout = NodeLayout.of(6, dropped, inserted)
    expected = [n.name for n in layout.gather(held[:6], held[6:])]
    ids = _Ids(range(6))
    layout.arrange(graph.node, ids)
    assert [n.name for n in graph.node] == expected
    assert all(a is b for a, b in zip(graph.node, layout.gather(held[:6], held[6:]), strict=True))
    assert (ids.reads > 0) is used


def _numpy_before_1_23(monkeypatch) -> None:
    """``np.fromiter`` as numpy had it before 1.23 (TensorFlow 2.13 allows numpy 1.22): it makes no
    object arrays."""
    real = np.fromiter

    def fromiter(iterable, dtype, count=-1, **kwargs):
        if np.dtype(dtype) == np.dtype(object):
            raise ValueError("cannot create object arrays from iterator")
        return real(iterable, dtype, count, **kwargs)

    monkeypatch.setattr(np, "fromiter", fromiter)


def test_a_fusion_run_needs_no_numpy_newer_than_tensorflow_2_13_allows(bert_encoder, registry, monkeypatch):
    """The rewrites of a real graph (each drops more nodes than it adds, so their sort keys are the
    index's int objects) give the same graph with numpy before 1.23."""
    expected = scopefusion.fuse(bert_encoder.graph_def, registry=registry, hints=False)
    _numpy_before_1_23(monkeypatch)
    result = scopefusion.fuse(bert_encoder.graph_def, registry=registry, hints=False)
    assert result.report.fused_count("LayerNorm") == 7 and result.report.fused_count() > 7
    assert len(result.graph_def.node) < len(bert_encoder.graph_def.node)
    assert result.graph_def.SerializeToString(deterministic=True) == \
        expected.graph_def.SerializeToString(deterministic=True)


def test_a_node_list_of_another_length_is_refused():
    graph = message_class("GraphDef")()
    graph.node.add(name="o0", op="NoOp")
    with pytest.raises(ValueError, match="holds 1 nodes, not the 2 laid out"):
        NodeLayout.of(1, set(), {0: 1}).arrange(graph.node)
    assert [n.name for n in graph.node] == ["o0"]
