"""Colocation told by the native scan: ``scan(data, max_port_digits, b"_class")`` lists the nodes
whose attribute map holds a ``_class`` entry, read from the entries' keys in C, and
:meth:`GraphIndex.colocated_nodes` of an index made of those columns reads no attribute.  Both
paths give the same nodes: on a real TF1 graph that colocates (a ``cond``'s ``Switch`` nodes),
on hand-made attribute map entries, on bytes spoilt at random; and a run fuses the same.
"""
from __future__ import annotations

import random

import pytest
from tensorflow.core.framework import graph_pb2
from tests.graph import test_graph_scan as scan_tests
from tests.graph.test_graph_scan import SEED, _node, _parsed, _spoil, _tag, _text, _varint
from tests.models.loop_models import layer_norm_in_cond

from scopefusion.core.graph import graph_scan
from scopefusion.core.graph.graph_scan import python_columns
from scopefusion.core.graph.index import COLOCATE, GraphIndex
from scopefusion.core.graph.io import load_model
from scopefusion.core.graph.vocabulary import MAX_PORT_DIGITS

KEY = COLOCATE.encode()
native, real_graphs = scan_tests.native, scan_tests.real_graphs  # the scan tests' fixtures


def _colocated(graph) -> list[int]:
    return [i for i, node in enumerate(graph.node) if COLOCATE in node.attr]


@pytest.fixture(scope="module")
def cond_graph() -> graph_pb2.GraphDef:
    """A tf_slim layer norm feeding a TF1 ``cond``: TensorFlow colocates the ``Switch`` nodes with the
    tensors they switch (``_class: loc:@...``)."""
    return layer_norm_in_cond()


def test_the_scan_tells_the_colocated_nodes_of_a_real_graph(native, cond_graph, real_graphs):
    for graph in (cond_graph, *real_graphs.values()):
        data = graph.SerializeToString()
        found = native.scan(data, MAX_PORT_DIGITS, KEY)
        assert found is not None and len(found) == 11
        assert found[-1] == _colocated(graph)
        assert found[:-1] == native.scan(data, MAX_PORT_DIGITS)  # the other columns as without the key
    assert len(_colocated(cond_graph)) >= 2  # the case holds what it is made for


ENTRY_CASES = {
    "a _class entry": _node("a", "Switch", extra=_text(5, _text(1, "_class") + _text(2, b""))),
    "among other entries": _node("a", "NoOp", extra=_text(5, _text(1, "T")) + _text(5, _text(1, "_class"))
                                 + _text(5, _text(1, "dtype"))),
    "the key given twice: the last counts": _node("a", "NoOp", extra=_text(5, _text(1, "_class") + _text(1, "T")))
    + _node("b", "NoOp", extra=_text(5, _text(1, "T") + _text(1, "_class"))),
    "an entry without a key": _node("a", "NoOp", extra=_text(5, _text(2, b""))),
    "an empty entry": _node("a", "NoOp", extra=_text(5, b"")),
    "the attribute field of another wire type": _node("a", "NoOp", extra=_tag(5, 0) + _varint(1)),
    "_class inside a value, not a key": _node("a", "NoOp",
                                              extra=_text(5, _text(1, "T") + _text(2, _text(2, "_class")))),
    "keys that only start alike": _node("a", "NoOp", extra=_text(5, _text(1, "_clas")))
    + _node("b", "NoOp", extra=_text(5, _text(1, "_classes")))
    + _node("c", "NoOp", extra=_text(5, _text(1, "_CLASS"))),
    "unknown fields in the value": _node("a", "NoOp", extra=_text(5, _text(1, "_class")
                                                                   + _text(2, _tag(99, 0) + _varint(1)))),
    "the same key twice": _node("a", "NoOp", extra=_text(5, _text(1, "_class")) + _text(5, _text(1, "_class"))),
    "every node": b"".join(_node(f"n{i}", "NoOp", extra=_text(5, _text(1, "_class")) if i % 3 else b"")
                           for i in range(50)),
}


@pytest.mark.parametrize("case", sorted(ENTRY_CASES))
def test_attribute_entries_are_read_as_protobuf_reads_them(native, case):
    data = ENTRY_CASES[case]
    graph = _parsed(data)
    assert graph is not None, "the case is meant to parse"
    found = native.scan(data, MAX_PORT_DIGITS, KEY)
    assert found is not None and found[-1] == _colocated(graph)
    assert python_columns(graph).colocated is None  # left to the index, which reads the attributes
    assert GraphIndex(graph, validate=False, columns=python_columns(graph)).colocated_nodes() == found[-1]


def test_the_entry_cases_hold_what_they_are_said_to():
    told = {case: _colocated(_parsed(data)) for case, data in ENTRY_CASES.items()}
    assert told["a _class entry"] == told["among other entries"] == told["the same key twice"] == [0]
    assert told["the key given twice: the last counts"] == [1]
    assert told["unknown fields in the value"] == [0]
    for case in ("an entry without a key", "an empty entry",
                 "the attribute field of another wire type", "_class inside a value, not a key",
                 "keys that only start alike"):
        assert told[case] == [], case
    assert len(told["every node"]) == 33


LEFT_TO_PROTOBUF = {
    # protobuf's runtimes differ on an entry with more fields than its key and value (upb keeps it
    # out of the map, among the node's unknown fields): the scan does not tell
    "an unknown field in the entry": _text(5, _tag(9, 5) + bytes(4) + _text(1, "_class")),
    "a group in the entry": _text(5, _text(1, "_class") + _tag(10, 3) + _tag(10, 4)),
    "a key of another wire type": _text(5, _tag(1, 0) + _varint(3)),
    "a value of another wire type": _text(5, _text(1, "_class") + _tag(2, 0) + _varint(3)),
}


@pytest.mark.parametrize("case", sorted(LEFT_TO_PROTOBUF))
def test_entries_protobuf_runtimes_read_differently_are_left_to_protobuf(native, case):
    data = _node("a", "NoOp", extra=LEFT_TO_PROTOBUF[case])
    assert _parsed(data) is not None
    assert native.scan(data, MAX_PORT_DIGITS, KEY) is None
    assert native.scan(data, MAX_PORT_DIGITS) is not None  # without the key, the entry is stepped over unread


def test_a_malformed_entry_is_left_to_protobuf(native):
    cut = _node("a", "NoOp", extra=_tag(5, 2) + _varint(4) + _tag(1, 2) + _varint(9) + b"_c")
    assert _parsed(cut) is None
    assert native.scan(cut, MAX_PORT_DIGITS, KEY) is None
    assert native.scan(cut, MAX_PORT_DIGITS) is not None  # without the key, the entry is stepped over unread


def test_spoilt_bytes_that_both_read_give_the_same_colocated_nodes(native, cond_graph):
    rng = random.Random(SEED)
    data = cond_graph.SerializeToString()
    agreed = 0
    for case in range(800):
        spoilt = _spoil(data, rng)
        graph = _parsed(spoilt)
        found = native.scan(spoilt, MAX_PORT_DIGITS, KEY)
        if graph is None or found is None:  # never a crash; what the scan refuses, protobuf reads
            continue
        agreed += 1
        assert found[-1] == _colocated(graph), f"case {case}"
        assert found[:-1] == native.scan(spoilt, MAX_PORT_DIGITS), f"case {case}"
    assert agreed > 50, agreed


@pytest.mark.parametrize("built", [True, False], ids=["native", "pure-python"])
def test_an_index_of_the_columns_tells_the_colocated_nodes_without_reading_attributes(native, monkeypatch, tmp_path,
                                                                                      cond_graph, built):
    monkeypatch.setattr(graph_scan, "native_module", lambda name: native if built else None)
    path = tmp_path / "cond.pb"
    path.write_bytes(cond_graph.SerializeToString())
    model = load_model(path)
    assert (model.columns is not None) == built
    expected = _colocated(cond_graph)
    columns = model.columns
    graph = model.graph_def
    if built:
        assert columns.colocated == expected
        index = GraphIndex(graph, columns=columns)
        # no attribute is read: the nodes' attribute maps are not there to read
        for node in graph.node:
            node.ClearField("attr")
        assert index.colocated_nodes() == expected
    else:
        assert GraphIndex(graph).colocated_nodes() == expected


def test_a_run_fuses_the_same_with_colocation_from_the_scan(native, monkeypatch, tmp_path, cond_graph):
    """The cond graph's layer norm is fused away, the Switch colocated with it loses the constraint:
    the same fused graph whether the colocated nodes came from the scan or from the attributes."""
    from scopefusion import fuse

    path = tmp_path / "cond.pb"
    path.write_bytes(cond_graph.SerializeToString())
    fused = []
    for module in (native, None):
        monkeypatch.setattr(graph_scan, "native_module", lambda name, m=module: m)
        result = fuse(load_model(path), hints=False)
        assert result.report.fused_count("LayerNorm") == 1
        fused.append(result.graph_def.SerializeToString(deterministic=True))
    assert fused[0] == fused[1]
