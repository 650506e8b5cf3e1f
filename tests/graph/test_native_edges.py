"""The C extensions ``native/_edges.c``, ``_tables.c`` and ``_order.c`` give exactly what the
pure-Python path gives, for every function they take over: on random graphs (ports, control edges,
TF1 loops, cycles, dangling and odd input strings, empty graphs) and on odd data (producers out of
range, negative ones, edges that are no pairs), where both raise the same error."""
from __future__ import annotations

import random

import numpy as np
import pytest
from tests.helpers.native_paths import (assert_same, assert_same_on_both_paths, edges_extension, empty_tuples_shared,
                                        on_both_paths, using)
from tests.helpers.graph_helpers import make_graph

from scopefusion.core.graph.edge_lists import consumers_of, node_ids, nodes_by_op, parse_inputs, renumbered, unread
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.graph.layout import NodeLayout
from scopefusion.core.graph.toposort import drop_loop_back_edges, kahn_order_by_readers

OPS = ["Const", "Add", "Identity", "Merge", "NextIteration", "RefMerge", "RefNextIteration", "Switch", "NoOp"]


# ---------------------------------------------------------------------------- random graphs
def _input_text(rng: random.Random, names: list[str], odd: bool) -> str:
    """An input string: a node's output (port 0, a port past 0, a control edge); where ``odd``,
    sometimes one naming no node or spelled oddly."""
    name = rng.choice(names)
    kind = rng.random()
    if kind < 0.45:
        return name
    if kind < 0.65:
        return f"{name}:{rng.choice([0, 1, 2, 7, 31, 300, 999999999])}"
    if kind < 0.85 or not odd:
        return f"^{name}"
    return rng.choice([f"{name}:", f"{name}:01", f"{name}:1234567890", f"{name}:²", f"{name}:-1", f"{name}:1a",
                       f"^{name}:1", "^", ":1", ":", "nowhere", "nowhere:3", "^nowhere", f"{name}:0:0", f"{name}^"])


def random_graph(seed: int):
    """A graph of up to 40 nodes reading any node (cycles, loops through Merge and NextIteration,
    self loops), its inputs spelled every way, in some graphs some naming no node; node names of
    any kind."""
    rng = random.Random(seed)
    count = rng.choice([0, 1, 2, rng.randint(3, 40)])
    names = [f"n{i}" for i in range(count)]
    for i in rng.sample(range(count), min(count, 2)):  # names that look like tensors or scopes
        names[i] = rng.choice([f"n{i}:1", f"s/n{i}", f"n{i}_1", f"ñ{i}"])
    odd = rng.random() < 0.3
    nodes = []
    for name in names:
        inputs = [_input_text(rng, names, odd) for _ in range(rng.choice([0, 0, 1, 2, 3, 5]))]
        nodes.append((name, rng.choice(OPS), inputs))
    return make_graph(nodes)


def index_tables(graph_def) -> dict:
    """Every table the extension builds, from ``graph_def``'s node list (and, when every input names
    a node, from an unvalidated index of it)."""
    nodes = list(graph_def.node)
    names = [node.name for node in nodes]
    ops = [node.op for node in nodes]
    table = dict(zip(names, range(len(names)), strict=True))
    ids = node_ids(table, len(names))
    dangling: list[str] = []
    inputs = parse_inputs(nodes, names, table, dangling)
    tables: dict = {"inputs": inputs, "dangling": dangling, "by op": nodes_by_op(ids, ops),
                    "unread": unread(inputs, len(names))}
    if dangling:  # producers -1: no consumers, no index
        return tables
    consumers = consumers_of(inputs, ids)
    readers = list(consumers)
    indegree = list(map(len, inputs))
    drop_loop_back_edges(ops, readers, inputs, indegree)
    tables["consumers"] = consumers
    tables["unread from consumers"] = unread(inputs, len(names), consumers)
    tables["loop counts"] = list(indegree)
    tables["order"] = kahn_order_by_readers(indegree, readers, ids)
    tables["left"] = indegree
    tables["order of new ints"] = kahn_order_by_readers(list(map(len, inputs)), readers)
    if len(table) == len(names):
        index = GraphIndex(graph_def, validate=False)
        tables["index"] = (index.inputs, index.sinks(), index.consumers, index.sinks(), index._by_op_table())
    return tables


@pytest.mark.parametrize("seed", range(120))
def test_random_graphs(seed):
    graph_def = random_graph(seed)
    tables = assert_same_on_both_paths(lambda: index_tables(graph_def))
    with using(True):
        tables = index_tables(graph_def)  # the objects the C path gives
    names = [node.name for node in graph_def.node]
    ids = node_ids(dict(zip(names, range(len(names)), strict=True)), len(names))
    assert all(p is ids[p] for ins in tables["inputs"] for p, _ in ins if p >= 0)
    assert empty_tuples_shared(tables["inputs"])
    if "consumers" in tables:
        assert all(c is ids[c] for cs in tables["consumers"] for c, _, _ in cs)
        assert all(i is ids[i] for i in tables["order"])
        assert empty_tuples_shared(tables["consumers"])
    assert all(i is ids[i] for nodes in tables["by op"].values() for i in nodes)


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_validated(seed):
    """A validated index raises the same (duplicate names, dangling inputs, cycles) or is the same."""
    graph_def = random_graph(seed)

    def build():
        index = GraphIndex(graph_def)
        return index.inputs, index.consumers, index.topological_order(), index.sinks(), index._by_op_table()

    assert_same_on_both_paths(build)


def test_the_loop_and_cycle_cases_are_reached():
    """The random graphs hold what the comparison is for: loops counted anew, cycles left, dangling inputs."""
    seen = {"loop": 0, "cycle": 0, "dangling": 0, "port": 0, "control": 0, "empty": 0}
    for seed in range(120):
        with using(False):
            tables = index_tables(random_graph(seed))
        seen["dangling"] += bool(tables["dangling"])
        seen["empty"] += not tables["inputs"]
        ports = {port for ins in tables["inputs"] for _, port in ins}
        seen["port"] += any(port > 0 for port in ports)
        seen["control"] += -1 in ports
        if "order" in tables:
            seen["loop"] += tables["loop counts"] != list(map(len, tables["inputs"]))
            seen["cycle"] += len(tables["order"]) < len(tables["inputs"])
    assert all(seen.values()), seen


def test_the_empty_graph():
    graph_def = make_graph([])
    tables = assert_same_on_both_paths(lambda: index_tables(graph_def))
    assert tables["inputs"] == [] and tables["order"] == [] and tables["by op"] == {}


# -------------------------------------------------------------------- rewrites: renumber, gather
@pytest.mark.parametrize("seed", range(40))
def test_random_rewrites(seed):
    rng = random.Random(seed)
    count = rng.randint(0, 50)
    dropped = {i for i in range(count) if rng.random() < 0.3}
    anchors = rng.sample(range(count), rng.randint(0, count))
    layout = NodeLayout.of(count, dropped, {a: rng.randint(0, 3) for a in anchors})
    old = [f"o{i}" for i in range(count)]
    new = [f"n{j}" for j in range(len(layout.fresh))]
    inputs = [tuple((rng.randrange(count), rng.choice([-1, 0, 1, 5])) for _ in range(rng.choice([0, 1, 3])))
              for _ in range(count)]
    position = layout.position
    kept_inputs = [tuple((p, port) for p, port in ins if p not in dropped) for ins in inputs]

    def rewrite():
        return (layout.gather(old, new), layout.gather(position, layout.fresh),
                renumbered(layout.gather(kept_inputs, [()] * len(new)), position), renumbered(inputs, position))

    gathered, ids, renumbered_kept, renumbered_all = assert_same_on_both_paths(rewrite)
    assert gathered == [[*old, *new][k] for k in layout.order]
    assert renumbered_all == [tuple((position[p], port) for p, port in ins) for ins in inputs]  # -1 for dropped
    with using(True):
        again = layout.gather(position, layout.fresh)
    listed = [*position, *layout.fresh]
    assert all(a is listed[k] for a, k in zip(again, layout.order, strict=True))  # the caller's int objects
    assert empty_tuples_shared(renumbered_kept)


def test_gather_hands_out_the_callers_objects():
    layout = NodeLayout.of(4, {1}, {2: 2})
    old, new = [object() for _ in range(4)], [object() for _ in range(2)]
    with using(True):
        gathered = layout.gather(old, new)
    assert [id(x) for x in gathered] == [id([*old, *new][k]) for k in layout.order]


# ------------------------------------------------------------------------------- odd data
@pytest.mark.parametrize("inputs", [
    [((5, 0),), ()],  # a producer past the end
    [((-3, 0),), ()],  # a negative one past the start
    [((-1, 0),), ((0, -7),)],  # -1 (a dangling input) counts from the end, as Python's indexing does
    [((0, 0, 0),), ()],  # no pair
    [((0,),), ()],
    [([1, 0],), ()],  # a list for a pair
    [((1.5, 0),), ()],  # no int
    [((2**70, 0),), ()],
])
def test_odd_edges_raise_the_same(inputs):
    ids = list(range(len(inputs)))
    pure, native_ = on_both_paths(lambda: consumers_of(inputs, ids))
    assert pure[0] == native_[0]
    if pure[0] == "raised":
        assert pure[1][0] is native_[1][0]
        if pure[1][0] is IndexError:
            assert pure[1] == native_[1]
    else:
        assert_same(pure[1], native_[1])
    for run in (lambda: renumbered(inputs, [1, 0]), lambda: unread(inputs, len(inputs)),
                lambda: kahn_order_by_readers([0, 0], [[(p, port, 0) for p, port in ins] for ins in inputs])):
        pure, native_ = on_both_paths(run)
        assert pure[0] == native_[0], (pure, native_)
        if pure[0] == "returned":
            assert_same(pure[1], native_[1])
        elif pure[1][0] is IndexError:
            assert pure[1] == native_[1]


def test_lengths_that_differ_raise_as_zip_does():
    for run in (lambda: consumers_of([()], [0, 1]), lambda: consumers_of([(), ()], [0]),
                lambda: nodes_by_op([0], ["Add", "Mul"]),
                lambda: parse_inputs(list(make_graph([("a", "Const", [])]).node), [], {}, [])):
        pure, native_ = on_both_paths(run)
        assert pure == native_ and pure[0] == "raised" and pure[1][0] is ValueError


def test_odd_input_strings_read_the_same():
    graph_def = make_graph([("a", "Const", []), ("a:1", "Const", []), ("b", "Add", [
        "a", "a:1", "a:01", "a:1:1", "^a", "^a:1", "a:", ":1", "", "^", "a:²", "a:٣", "a:99999999999", "a:123456789"])])
    names = [node.name for node in graph_def.node]

    def read():
        dangling: list[str] = []
        return parse_inputs(list(graph_def.node), names, {n: i for i, n in enumerate(names)}, dangling), dangling

    (inputs, dangling) = assert_same_on_both_paths(read)
    assert inputs[2][:4] == ((0, 0), (1, 0), (0, 1), (1, 1)) and inputs[2][-1] == (0, 123456789)
    assert "'b' reads 'a:99999999999'" in dangling


def test_the_indegree_left_by_a_cycle_is_the_same():
    readers = [((1, 0, 0),), ((2, 0, 0),), ((1, 0, 1),), ()]

    ids = [0, 1, 2, 3]

    def sort():
        indegree = [0, 2, 1, 0]
        return kahn_order_by_readers(indegree, readers, ids), indegree

    order, left = assert_same_on_both_paths(sort)
    assert order == [0, 3] and left == [0, 1, 1, 0]
    ids = [10, 11, 12, 13]  # the readers are followed by the ids' values: none reaches that far
    assert on_both_paths(sort) == (("raised", (IndexError, "list index out of range")),) * 2


def test_the_order_array_must_be_32_bit_ints():
    module = edges_extension()
    for wrong in (np.zeros(1, np.int64), np.zeros(1, ">i4" if np.little_endian else "<i4"), b"abcd"):
        with pytest.raises(TypeError, match="32-bit"):
            module.gather([1], [], wrong)
    with pytest.raises(IndexError):
        module.gather([1], [], np.array([1], np.int32))
    assert module.gather([1], [2], np.array([-1, 0], np.int32)) == [2, 1]
    assert module.gather([1], [2], np.array([1, 0], np.int32)[::-1].copy()) == [1, 2]
    with pytest.raises(TypeError, match="must be a dict"):
        module.parse_inputs([], [], type("Table", (dict,), {})(), [])
