"""The set of dropped nodes held as a byte per node: the same answers as a Python set."""
from __future__ import annotations

import random

import numpy as np
import pytest

from scopefusion.core.graph.node_set import NodeSet, member_test


def test_it_answers_as_a_python_set_of_the_same_indices():
    rng = random.Random(7)
    size = 1000
    nodes, plain = NodeSet(size), set()
    for _ in range(300):
        batch = [rng.randrange(size) for _ in range(rng.randrange(1, 6))]
        if rng.random() < 0.5:
            nodes.update(batch)
            plain.update(batch)
        else:
            nodes.add(batch[0])
            plain.add(batch[0])
        assert len(nodes) == len(plain)
    assert list(nodes) == sorted(plain)
    assert nodes == plain and nodes.indices().tolist() == sorted(plain)
    assert all((i in nodes) == (i in plain) for i in range(size))
    assert NodeSet(size, plain) == nodes


@pytest.mark.parametrize("other", [-1, 10, None, "3", 2.5, np.int64(3)])
def test_what_is_no_node_of_the_graph_is_never_a_member(other):
    nodes = NodeSet(10, range(10))
    assert (other in nodes) is (other == 3 and isinstance(other, np.integer))


@pytest.mark.parametrize("bad", [-1, 10])
def test_an_index_outside_the_graph_is_refused_when_added(bad):
    nodes = NodeSet(10)
    with pytest.raises(IndexError, match=f"node {bad} is not in a graph of 10 nodes"):
        nodes.add(bad)
    assert len(nodes) == 0
    with pytest.raises(IndexError):
        nodes.update([1, bad])
    assert list(nodes) == [1] and len(nodes) == 1  # what was added before the refusal stays, counted
    assert len(NodeSet(0)) == 0 and not NodeSet(5)


def test_its_member_test_answers_as_membership_for_every_node_of_the_graph():
    rng = random.Random(11)
    size = 500
    plain = {rng.randrange(size) for _ in range(120)}
    nodes = NodeSet(size, plain)
    for kind in (nodes, plain, frozenset(plain)):
        test = member_test(kind)
        assert [bool(test(i)) for i in range(size)] == [i in plain for i in range(size)]
