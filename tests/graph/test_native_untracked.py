"""The edge lists the C extensions make are tuples of ints (and tuples of those), which can never be
part of a reference cycle: the extensions stop the cyclic garbage collector tracking them as they
make them, as the collector itself does the first time it walks such a tuple, so that a collection
after indexing a large graph does not walk them all.  A tuple holding anything else stays tracked."""
from __future__ import annotations

import gc
from itertools import chain

import pytest
from tests.graph.test_native_edges import random_graph
from tests.helpers.native_paths import required_extension, using

from scopefusion.core.graph.edge_lists import consumers_of, node_ids, parse_inputs, renumbered
from scopefusion.core.graph.vocabulary import MAX_PORT_DIGITS



@pytest.fixture(autouse=True)
def c_path():
    """The C path, also where the environment forces the pure-Python one (the extensions built)."""
    for name in ("_edges", "_tables", "_scan"):
        required_extension(name)
    with using(True):
        yield


def _tracked(tables) -> list:
    """The tuples among per-node edge tuples (and the edges in them) that the collector tracks."""
    tuples = [t for t in tables if t]
    return [t for t in chain(tuples, chain.from_iterable(tuples)) if gc.is_tracked(t)]


def test_edge_lists_are_left_untracked():
    checked = 0
    for seed in range(40):
        graph = random_graph(seed)
        nodes, names = list(graph.node), [node.name for node in graph.node]
        index = dict(zip(names, range(len(names)), strict=True))
        inputs = parse_inputs(nodes, names, index, [])
        scanned = required_extension("_scan").scan(graph.SerializeToString(), MAX_PORT_DIGITS)
        moved = list(range(len(names), 0, -1))
        tables = [inputs, renumbered(inputs, moved)]
        if scanned is not None:
            tables.append(scanned[7])  # the inputs column
        if all(p >= 0 for p, _ in chain.from_iterable(inputs)):
            tables.append(consumers_of(inputs, node_ids(index, len(names))))
        for table in tables:
            assert _tracked(table) == []
            checked += sum(1 for t in table if t)
    assert checked > 200


class Node(int):
    """A node id of a type of its own: not an exact int, so the tuples holding it stay tracked."""


def test_tuples_holding_other_objects_stay_tracked():
    ids = [Node(i) for i in range(3)]
    inputs = [(), ((0, 0),), ((1, 0), (0, -1))]
    readers = consumers_of(inputs, ids)
    assert all(gc.is_tracked(edge) for edge in chain.from_iterable(readers))
    assert all(gc.is_tracked(t) for t in readers if t)
    moved = renumbered(inputs, ids)
    assert all(gc.is_tracked(edge) for edge in chain.from_iterable(moved))
