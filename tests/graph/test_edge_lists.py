"""The edge lists of a graph index, built in bulk, equal the same lists written out plainly, node by
node and edge by edge, on real graphs (a BERT encoder; a TF1 loop, whose inputs name ports and
control edges); dangling inputs are told in graph order."""
from __future__ import annotations

import pytest
from tests.models import loop_models as lm
from tests.models import rnn_models as rm
from tests.helpers.graph_helpers import make_graph

from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.errors import GraphValidationError
from scopefusion.core.graph.edge_lists import consumers_of, node_ids, parse_inputs, renumbered


def _plain_inputs(graph_def) -> list[list[tuple[int, int]]]:
    index = {node.name: i for i, node in enumerate(graph_def.node)}
    out = []
    for node in graph_def.node:
        ins = []
        for text in node.input:
            if text.startswith("^"):
                ins.append((index[text[1:]], -1))
            elif ":" in text:
                name, port = text.rsplit(":", 1)
                ins.append((index[name], int(port)))
            else:
                ins.append((index[text], 0))
        out.append(ins)
    return out


def _plain_consumers(inputs) -> list[list[tuple[int, int, int]]]:
    consumers: list[list[tuple[int, int, int]]] = [[] for _ in inputs]
    for c, ins in enumerate(inputs):
        for slot, (p, port) in enumerate(ins):
            consumers[p].append((c, port, slot))
    return consumers


@pytest.fixture(params=["bert", "tf1_loop"])
def graph_def(request, bert_encoder):
    if request.param == "bert":
        return bert_encoder.graph_def
    return lm.dynamic_rnn(rm.gru(), control_flow_v1=True).graph_def


def test_inputs_and_consumers_equal_the_plain_ones(graph_def):
    index = GraphIndex(graph_def)
    plain = _plain_inputs(graph_def)
    if any(node.op == "Merge" for node in graph_def.node):  # the loop: control edges and ports past 0 read
        assert {-1, 1} <= {port for ins in plain for _, port in ins}
    assert list(map(list, index.inputs)) == plain
    assert all(type(ins) is tuple for ins in index.inputs)
    assert list(map(list, index.consumers)) == _plain_consumers(plain)
    assert all(type(cs) is tuple for cs in index.consumers)


def test_edges_share_the_name_tables_ints(graph_def):
    """Every node index an edge, the order, the positions or the op table holds is the name table's own
    int object."""
    index = GraphIndex(graph_def)
    ids = index.node_ids()
    assert list(ids) == list(range(len(index)))
    assert all(p is ids[p] for ins in index.inputs for p, _ in ins)
    assert all(c is ids[c] for cs in index.consumers for c, _, _ in cs)
    assert all(i is ids[i] for i in index.topological_order())
    assert all(k is ids[k] for k in index.position)
    assert all(i is ids[i] for op in index.op_types() for i in index.nodes_of_type(op))


def test_the_node_wrappers_are_the_graphs_own(graph_def):
    """Wrappers of nodes without inputs are made anew after their inputs are read; the index still
    holds the graph's messages, and a wrapper held elsewhere stays the one in use."""
    empty = next(i for i, node in enumerate(graph_def.node) if not node.input)
    held = graph_def.node[empty]
    index = GraphIndex(graph_def)
    assert index.inputs[empty] == () and index.nodes[empty] is held
    assert all(a is b for a, b in zip(index.nodes, graph_def.node, strict=True))
    assert [node.name for node in index.nodes] == index.names


def test_renumbered_maps_every_producer(graph_def):
    index = GraphIndex(graph_def)
    shift = [len(index) - 1 - i for i in range(len(index))]
    assert list(map(list, renumbered(index.inputs, shift))) == [
        [(shift[p], port) for p, port in ins] for ins in _plain_inputs(graph_def)]


def test_dangling_inputs_are_told_in_graph_order():
    graph = make_graph([("a", "Const", []), ("b", "Add", ["a", "^nowhere"]), ("c", "Add", ["x:1", "a:0"])])
    names = [n.name for n in graph.node]
    dangling: list[str] = []
    inputs = parse_inputs(list(graph.node), names, {n: i for i, n in enumerate(names)}, dangling)
    assert dangling == ["'b' reads '^nowhere'", "'c' reads 'x:1'"]
    assert inputs == [(), ((0, 0), (-1, -1)), ((-1, 1), (0, 0))]
    with pytest.raises(GraphValidationError, match="'b' reads '\\^nowhere'; 'c' reads 'x:1'"):
        GraphIndex(graph)


def test_without_unique_names_the_ids_are_a_range():
    assert node_ids({"a": 1}, 2) == range(2)
    assert consumers_of([((1, 0),), ()], range(2)) == [(), ((0, 0, 0),)]
