"""A binary graph written in chunks: the same bytes as one deterministic serialization,
on real graphs (a BERT-style encoder, a graph with a function library), whatever the
chunk size, and written atomically all the same."""
from __future__ import annotations

import os

import numpy as np
import pytest

import scopefusion.core.graph.encoded_graph as encoded_graph
from tests.models.function_models import called_dense_gelu_layer_norm
from scopefusion import fuse, load_model, save_graph
from scopefusion.core.graph.encoded_graph import EncodedGraph
from scopefusion.core.graph.io import graph_payload
from scopefusion.core.graph.output_paths import write_atomically


def _whole(graph_def) -> bytes:
    return graph_def.SerializeToString(deterministic=True)


def test_the_chunks_join_to_the_deterministic_serialization(bert_encoder, registry):
    fused = fuse(bert_encoder.graph_def, registry=registry).graph_def
    for graph in (bert_encoder.graph_def, fused):
        assert bytes(EncodedGraph(graph)) == _whole(graph)


def test_a_graph_with_a_function_library_and_versions_is_encoded_whole():
    graph = called_dense_gelu_layer_norm().graph_def
    assert len(graph.library.function) > 0 and graph.versions.producer > 0
    assert bytes(EncodedGraph(graph)) == _whole(graph)


def test_small_chunks_split_between_nodes_and_join_to_the_same_bytes(bert_encoder, monkeypatch):
    monkeypatch.setattr(encoded_graph, "CHUNK_BYTES", 2000)
    chunks = list(EncodedGraph(bert_encoder.graph_def))
    assert len(chunks) > 10
    assert b"".join(chunks) == _whole(bert_encoder.graph_def)


def test_a_node_longer_than_two_length_bytes_gets_a_longer_length(bert_encoder):
    import tensorflow as tf

    graph = type(bert_encoder.graph_def)()
    graph.CopyFrom(bert_encoder.graph_def)
    big = tf.make_tensor_proto(np.arange(70000, dtype=np.float32))  # 280 kB: a three-byte length
    graph.node.add(name="big_table", op="Const").attr["value"].tensor.CopyFrom(big)
    graph.node[-1].attr["dtype"].type = big.dtype
    assert graph.node[-1].ByteSize() >= 1 << 14
    assert bytes(EncodedGraph(graph)) == _whole(graph)


def test_fields_protobuf_does_not_know_are_kept(bert_encoder):
    unknown = b"\xf8\x06\x2a"  # field 111, varint 42: no field of GraphDef
    graph = type(bert_encoder.graph_def).FromString(bert_encoder.graph_def.SerializeToString() + unknown)
    data = bytes(EncodedGraph(graph))
    assert data == _whole(graph)
    assert data.endswith(unknown)


def test_saving_writes_the_chunks_and_a_failing_write_leaves_the_old_file(tmp_path, bert_encoder):
    dest = tmp_path / "out.pb"
    save_graph(bert_encoder.graph_def, dest)
    assert dest.read_bytes() == _whole(bert_encoder.graph_def)
    assert isinstance(graph_payload(bert_encoder.graph_def, "pb"), EncodedGraph)
    assert isinstance(graph_payload(bert_encoder.graph_def, "pbtxt"), bytes)

    def failing_chunks():
        yield b"\x0a\x00"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(dest, failing_chunks())
    assert dest.read_bytes() == _whole(bert_encoder.graph_def)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.pb"]
    assert load_model(dest).graph_def == bert_encoder.graph_def
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_another_repeated_field_than_the_nodes_makes_the_graph_encoded_whole(monkeypatch):
    graph = called_dense_gelu_layer_norm().graph_def
    monkeypatch.setattr(encoded_graph, "CHUNK_BYTES", 100)
    assert len(list(EncodedGraph(graph))) > 1
    monkeypatch.setattr(encoded_graph, "is_repeated", lambda field: True)  # as a future GraphDef field would be
    assert list(EncodedGraph(graph)) == [_whole(graph)]
