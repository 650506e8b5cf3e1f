"""Node signatures read natively from a GraphDef's bytes (``native/_signatures.c``) against the
trimmed serializations protobuf makes (:func:`wire_view.attr_signatures`): the native ones are
another encoding, so the test is that they group the nodes in the same way (equal native
signatures always mean equal trimmed nodes; for bytes protobuf wrote, the other way round too),
and that each constant's content length is what protobuf reads, or -1 where it is not plain."""
from __future__ import annotations

import random

import pytest
from tensorflow.core.framework import graph_pb2
from tests.graph.test_validation_agreement import _field, _graph_bytes, _node_bytes, _varint_field, big_graphs
from tests.helpers.native_paths import required_extension
from tests.robustness.test_fuzz import DEFINITION_MUTATIONS

from scopefusion.core.graph import validate, wire_view
from scopefusion.core.graph.graph_scan import node_ranges, scan_columns

__all__ = ["big_graphs"]  # a fixture, used here too

SEED = 20261206


@pytest.fixture(scope="module")
def native():
    return required_extension("_signatures")


def _signatures(native, data: bytes) -> tuple[list[bytes], list[int]] | None:
    """The native signatures of the nodes of ``data``, at the byte ranges Python's reading finds."""
    offsets, lengths = node_ranges(data)
    return native.signatures(data, offsets.tobytes(), lengths.tobytes(), b"value")


def _partition(keys: list[bytes]) -> list[int]:
    """Each position's group: the first position with the same key."""
    first: dict[bytes, int] = {}
    return [first.setdefault(key, i) for i, key in enumerate(keys)]


def _contents(graph: graph_pb2.GraphDef) -> list[int]:
    return [len(node.attr["value"].tensor.tensor_content) if "value" in node.attr else 0 for node in graph.node]


def test_native_signatures_group_nodes_as_their_trimmed_serializations(native, big_graphs):
    for name, graph in big_graphs.items():
        data = graph.SerializeToString()
        signatures, contents = _signatures(native, data)
        assert _partition(signatures) == _partition(wire_view.attr_signatures(data)), name
        assert len(set(signatures)) < len(signatures) / 5, name  # copies share signatures ...
        assert all(signatures[i] is signatures[j] for i, j in enumerate(_partition(signatures)))  # ... and objects
        expected = _contents(graph)
        assert all(c == e for c, e in zip(contents, expected, strict=True) if c >= 0), name
        consts = [i for i, node in enumerate(graph.node) if node.op == "Const"]
        assert consts and all(contents[i] >= 0 for i in consts), name  # plain constants: all told


def test_constants_that_differ_only_in_contents_share_a_signature(native):
    def const(name: str, content: bytes, dims: tuple[int, ...] = (2,), dtype: int = 1) -> bytes:
        shape = b"".join(_field(2, _varint_field(1, d)) for d in dims)
        tensor = _varint_field(1, dtype) + _field(2, shape) + _field(4, content)
        return _node_bytes(name, "Const", ("dtype", _varint_field(6, dtype)), ("value", _field(8, tensor)))
    data = _graph_bytes(const("a", b"\0" * 8), const("b", b"\1" * 8), const("c", b"\1" * 12, (3,)),
                        const("d", b"\1" * 8, dtype=3), const("e", b"\2" * 8))
    signatures, contents = _signatures(native, data)
    assert _partition(signatures) == [0, 0, 2, 3, 0]
    assert contents == [8, 8, 12, 8, 8]
    assert _partition(wire_view.attr_signatures(data)) == [0, 0, 2, 3, 0]


def test_a_content_length_protobuf_must_tell_is_left_to_it(native):
    tensor = _varint_field(1, 1) + _field(4, b"\0" * 4)
    plain = ("value", _field(8, tensor))
    cases = {
        "plain": (_node_bytes("n", "Const", plain), 4),
        "no contents": (_node_bytes("n", "Const", ("value", _field(8, _varint_field(1, 1)))), 0),
        "two value entries": (_node_bytes("n", "Const", plain, plain), -1),
        "contents given twice": (_node_bytes("n", "Const", ("value", _field(8, tensor + _field(4, b"\0")))), -1),
        "the tensor given twice": (_node_bytes("n", "Const", ("value", _field(8, tensor) + _field(8, tensor))), -1),
        "another kind after the tensor": (_node_bytes("n", "Const", ("value", _field(8, tensor) + _varint_field(3, 1))),
                                          -1),
        "contents of another wire type": (_node_bytes("n", "Const", ("value", _field(8, bytes([4 << 3, 1])))), -1),
        "no value": (_node_bytes("n", "Const", ("dtype", _varint_field(6, 1))), -1),
    }
    for what, (node, expected) in cases.items():
        data = _graph_bytes(node)
        assert _signatures(native, data)[1] == [expected], what
        if expected >= 0:
            assert _contents(graph_pb2.GraphDef.FromString(data)) == [expected], what


def test_an_entry_with_a_field_of_its_own_is_left_to_protobuf(native):
    entry = _field(1, b"T") + _field(2, _varint_field(6, 1)) + _field(3, b"x")
    data = _graph_bytes(_field(1, b"n") + _field(2, b"Identity") + _field(5, entry))
    offsets, lengths = node_ranges(data)  # (the scan itself leaves such a graph to protobuf)
    assert native.signatures(data, offsets.tobytes(), lengths.tobytes(), b"value") is None
    signatures, contents = wire_view.node_signatures(data, offsets, lengths)
    assert contents is None and signatures == wire_view.attr_signatures(data)  # protobuf's route instead


def test_byte_ranges_outside_the_data_are_refused(native):
    data = _graph_bytes(_node_bytes("n", "NoOp"))
    with pytest.raises(ValueError, match="outside the data"):
        native.signatures(data, (len(data)).to_bytes(8, "little"), (1).to_bytes(8, "little"), b"value")
    with pytest.raises(ValueError, match="as many nodes"):
        native.signatures(data, bytes(8), bytes(16), b"value")
    with pytest.raises(TypeError, match="native int64s"):
        native.signatures(data, bytes(7), bytes(7), b"value")


def test_randomly_spoilt_bytes_never_group_unequal_nodes(native, big_graphs):
    """Bytes changed at random that protobuf still reads: wherever the native signatures say two
    nodes are alike, their trimmed serializations are equal, and a told content length is
    protobuf's."""
    rng = random.Random(SEED)
    graph = big_graphs["dense_gelu"]
    clean = graph.SerializeToString()
    read = 0
    for _ in range(1000):
        data = bytearray(clean)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data)
        try:
            parsed = graph_pb2.GraphDef.FromString(data)
        except Exception:  # noqa: BLE001 - protobuf refuses the bytes: nothing to compare
            continue
        ranges = node_ranges(data)
        trimmed = wire_view.attr_signatures(data)
        if ranges is None or trimmed is None:
            continue
        found = native.signatures(data, ranges[0].tobytes(), ranges[1].tobytes(), b"value")
        if found is None:
            continue
        read += 1
        groups = _partition(found[0])
        assert all(trimmed[i] == trimmed[g] for i, g in enumerate(groups))
        expected = _contents(parsed)
        assert all(c == e for c, e in zip(found[1], expected, strict=True) if c >= 0)
    assert read > 200  # enough spoilt graphs protobuf still reads


@pytest.mark.parametrize("mutation", sorted(DEFINITION_MUTATIONS))
def test_constants_are_judged_alike_with_and_without_the_native_signatures(big_graphs, mutation):
    """The op-definition checks (constants' contents among them) find the same with the scan's
    columns and native signatures as through protobuf alone."""
    for number in range(3):
        rng = random.Random(f"{SEED}:{mutation}:{number}")
        graph = graph_pb2.GraphDef()
        graph.CopyFrom(big_graphs[rng.choice(sorted(big_graphs))])
        DEFINITION_MUTATIONS[mutation](graph, rng)
        data = graph.SerializeToString()
        routes = [validate._Validator(graph_pb2.GraphDef.FromString(data), True, data, columns).problems(True)
                  for columns in (scan_columns(data), None)]
        assert routes[0] == routes[1], mutation
        assert routes[0] == validate._Validator(graph_pb2.GraphDef.FromString(data)).problems(True), mutation
