"""A fused node is placed where the nodes it replaces were: it takes the device of the first node
it removes that names one.  A graph read from a file tells at load whether any node names a
device; where none does, the rewrite reads no removed node's device, and the fused graph is the
one an in-memory run of the same graph gives."""
from __future__ import annotations

from tensorflow.core.framework import graph_pb2
from tests.robustness.test_fuzz import _dense_gelu

import scopefusion
from scopefusion.core.graph.graph_scan import graph_columns
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.graph.io import take_columns

DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"


def _fused(graph, tmp_path, name: str):
    """The graph fused from a file (the load's columns) and in memory."""
    path = tmp_path / f"{name}.pb"
    path.write_bytes(graph.SerializeToString())
    from_file = scopefusion.fuse(scopefusion.load_model(path)).graph_def
    in_memory = scopefusion.fuse(graph).graph_def
    assert from_file.SerializeToString(deterministic=True) == in_memory.SerializeToString(deterministic=True)
    return from_file


def _fused_nodes(graph):
    """The nodes of fused ops (each dense layer and its GELU end as one MatMulBiasAddActivation)."""
    made = [node for node in graph.node if node.op == "MatMulBiasAddActivation"]
    assert len(made) == 2
    return made


def test_fused_nodes_take_the_device_of_the_nodes_they_replace(tmp_path):
    graph = _dense_gelu()
    for node in graph.node:
        if node.op not in ("Placeholder", "Const"):
            node.device = DEVICE
    assert all(node.device == DEVICE for node in _fused_nodes(_fused(graph, tmp_path, "placed")))


def test_a_device_on_one_removed_node_places_the_fused_node(tmp_path):
    """Only each GELU's Erfc or Tanh names a device: the Gelu takes it, and the node the second
    stage makes of the dense layer and its Gelu takes it from the Gelu."""
    graph = _dense_gelu()
    inner = [node for node in graph.node if node.op in ("Erfc", "Tanh")]
    assert len(inner) == 2
    for node in inner:
        node.device = DEVICE
    assert all(node.device == DEVICE for node in _fused_nodes(_fused(graph, tmp_path, "one_device")))


def test_a_graph_without_devices_is_known_to_have_none(tmp_path):
    graph = _dense_gelu()
    assert not any(node.device for node in graph.node)
    data = graph.SerializeToString()
    assert GraphIndex(graph, columns=graph_columns(graph, data)).devices_used is False
    placed = graph_pb2.GraphDef.FromString(data)
    placed.node[-1].device = DEVICE
    assert GraphIndex(placed, columns=graph_columns(placed, placed.SerializeToString())).devices_used is True
    assert GraphIndex(graph).devices_used is None  # in memory: not known
    path = tmp_path / "plain.pb"
    path.write_bytes(data)
    loaded = scopefusion.load_model(path)
    columns = take_columns(loaded)  # the native scan's, kept past loading (None on the pure-Python path)
    if columns is not None:
        assert GraphIndex(loaded.graph_def, columns=columns).devices_used is False
    assert not any(node.device for node in _fused_nodes(_fused(graph, tmp_path, "plain")))
