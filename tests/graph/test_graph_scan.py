"""The native scan of a serialized GraphDef (``native/_scan.c``) against the pure-Python path
(protobuf's API, :func:`python_columns`): the same columns on real frozen graphs, on the
benchmark generators' graphs, on hand-made wire forms (repeated and unknown fields, fields
between the nodes, ports, control and dangling inputs, bad UTF-8, cut bytes) and on bytes
spoilt at random, where the scan must never crash and must accept exactly what protobuf
accepts of the fields it reads.

The native comparisons import the extension directly, so they run whether or not
``SCOPEFUSION_PURE_PYTHON`` forces the pure-Python path elsewhere; they are skipped only when
the extension is not built and that path is forced (an install without a C compiler).
"""
from __future__ import annotations

import copy
import importlib
import random
import shutil
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest
import tensorflow as tf
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory
from tensorflow.core.framework import graph_pb2, node_def_pb2
from tests.models.model_builders import bert_style_encoder
from tests.helpers.native_paths import BUILD_HINT, required_extension
from tests.robustness.test_fuzz import MUTATIONS, _dense_gelu, _loop

from scopefusion import GraphValidationError
from scopefusion.core.graph import graph_scan
from scopefusion.core.graph.graph_scan import GraphColumns, node_ranges, python_columns
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.graph.io import LoadedModel, load_model, read_graph_def, take_columns
from scopefusion.core.graph.validate import validate_graph
from scopefusion.core.graph.vocabulary import MAX_PORT_DIGITS
from scopefusion.testing import graph_from_function

SEED = 20261206
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
COLUMNS = ("names", "ops", "devices", "counts", "inputs", "index", "dangling", "texts", "offsets", "lengths")


# ------------------------------------------------------------------ the two paths
def _c_compiler() -> str | None:
    """The C compiler setuptools would use here, if it is on the PATH."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc)


@pytest.fixture(scope="module")
def native() -> ModuleType:
    return required_extension("_scan")


def test_extension_is_built_where_a_compiler_is():
    """Where a C compiler is on the PATH, ``pip install .`` builds the extension (and so does this checkout's
    ``python setup.py build_ext --inplace``): a missing one is a failure, not a skip."""
    if _c_compiler() is None:
        pytest.skip("no C compiler on this machine: the pure-Python path is the one there is")
    try:
        module = importlib.import_module("scopefusion.core.graph.native._scan")
    except ImportError as exc:
        pytest.fail(f"a C compiler is here ({_c_compiler()}) but the _scan extension is not built ({exc}); "
                    f"{BUILD_HINT}")
    assert callable(module.scan)


def test_the_environment_variable_forces_the_python_path(monkeypatch, native):
    """``scan_columns`` hands out the native scan's columns unless the pure-Python path is forced."""
    data = _dense_gelu().SerializeToString()
    monkeypatch.setattr(graph_scan, "native_module", lambda name: None)  # what the variable makes of it
    assert graph_scan.scan_columns(data) is None
    monkeypatch.setattr(graph_scan, "native_module", lambda name: native)
    assert graph_scan.scan_columns(data) is not None


def _native(module: ModuleType, data: bytes) -> GraphColumns | None:
    found = module.scan(data, MAX_PORT_DIGITS)
    if found is None:
        return None
    offsets, lengths, names, ops, devices, counts, texts, inputs, index, dangling = found
    return GraphColumns(names, ops, devices, counts, inputs, index, dangling, texts,
                        graph_scan._int64s(offsets), graph_scan._int64s(lengths))


def _parsed(data: bytes, cls=graph_pb2.GraphDef):
    graph = cls()
    try:
        graph.ParseFromString(data)
    except message.DecodeError:
        return None
    return graph


def assert_same_columns(native_columns: GraphColumns | None, graph, data: bytes) -> GraphColumns:
    """The native columns equal protobuf's for ``graph`` parsed from ``data``, down to the objects
    shared: one string per op type, the name table's int objects in the inputs."""
    assert native_columns is not None
    expected = python_columns(graph, data)
    for column in COLUMNS:
        assert getattr(native_columns, column) == getattr(expected, column), column
    assert type(native_columns.offsets) is type(expected.offsets)
    assert len({id(op) for op in native_columns.ops}) == len(set(native_columns.ops))
    assert all(op is sys.intern(op) for op in native_columns.ops)
    ids = {id(v) for v in native_columns.index.values()}
    assert all(id(p) in ids for ins in native_columns.inputs for p, _ in ins if p >= 0)
    return native_columns


# ------------------------------------------------------------------ real graphs
def _loop_graph():
    return graph_from_function(_loop, tf.TensorSpec([2, 4], tf.float32, "x"))


REAL_GRAPHS = {
    "bert": lambda: bert_style_encoder(layers=1, hidden=16, heads=2, seq=4, batch=1, seed=0).graph_def,
    "dense_gelu": _dense_gelu,
    "while_loop": _loop_graph,
}


@pytest.fixture(scope="module")
def real_graphs() -> dict[str, graph_pb2.GraphDef]:
    return {name: build() for name, build in REAL_GRAPHS.items()}


@pytest.mark.parametrize("name", sorted(REAL_GRAPHS))
def test_real_graphs_give_the_same_columns(native, real_graphs, name):
    graph = real_graphs[name]
    data = graph.SerializeToString()
    columns = assert_same_columns(_native(native, data), graph, data)
    assert len(columns) == len(graph.node) > 10
    for i in (0, len(graph.node) // 2, len(graph.node) - 1):  # each range holds its node's bytes
        node = node_def_pb2.NodeDef.FromString(data[columns.offsets[i]:columns.offsets[i] + columns.lengths[i]])
        assert node == graph.node[i]
    if name == "while_loop":  # ports and control inputs are there to read
        assert any(port == -1 for ins in columns.inputs for _, port in ins)
        assert any(port > 0 for ins in columns.inputs for _, port in ins)


@pytest.mark.parametrize("name", sorted(REAL_GRAPHS))
def test_an_index_of_the_columns_is_the_index_of_the_graph(native, real_graphs, name):
    graph = real_graphs[name]
    data = graph.SerializeToString()
    scanned = GraphIndex(graph, columns=_native(native, data))
    plain = GraphIndex(graph)
    for table in ("names", "ops", "index", "inputs", "consumers"):
        assert getattr(scanned, table) == getattr(plain, table), table
    assert scanned.topological_order() == plain.topological_order()
    assert [n.name for n in scanned.nodes] == scanned.names


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_spoilt_graphs_give_the_same_columns_and_errors(native, real_graphs, mutation):
    """Dangling inputs, duplicate names, bad ports, cycles ...: the same columns, and the index
    and load-time validation say the same words either way."""
    rng = random.Random(f"{SEED}-{mutation}")
    for name in sorted(real_graphs):
        graph = copy.deepcopy(real_graphs[name])
        try:
            MUTATIONS[mutation](graph, rng)
        except (ValueError, IndexError):  # the graph has nothing the mutation applies to
            continue
        data = graph.SerializeToString()
        columns = assert_same_columns(_native(native, data), graph, data)
        assert _raised(GraphIndex, graph, columns=columns) == _raised(GraphIndex, graph)
        with_columns = _raised(validate_graph, graph, "m.pb", parsed=True, serialized=data, columns=columns)
        assert with_columns == _raised(validate_graph, graph, "m.pb", parsed=True, serialized=data)


def _raised(call, *args, **kwargs) -> str | None:
    try:
        call(*args, **kwargs)
    except GraphValidationError as exc:
        return str(exc)
    return None


# ------------------------------------------------------------------ the benchmark generators
@pytest.fixture(scope="module")
def bench_graphs():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        bench = importlib.import_module("bench_graphs")
        graphs = {}
        for kind in bench.GRAPH_KINDS:
            generator = bench.make_generator(kind, hidden=8, heads=2, batch=1, seq=4, seed=0)
            graphs[kind] = generator.build(2).graph_def
        return graphs
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_benchmark_graphs_give_the_same_columns(native, bench_graphs):
    for kind, graph in sorted(bench_graphs.items()):
        data = graph.SerializeToString()
        columns = assert_same_columns(_native(native, data), graph, data)
        assert len(columns) == len(graph.node) > 20, kind


# ------------------------------------------------------------------ hand-made wire forms
def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _text(number: int, value: bytes | str) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return _tag(number, 2) + _varint(len(raw)) + raw


def _node(name: str | bytes = "", op: str | bytes = "", inputs=(), device: str | bytes = "",
          extra: bytes = b"") -> bytes:
    body = (_text(1, name) if name != "" else b"") + (_text(2, op) if op != "" else b"")
    body += b"".join(_text(3, i) for i in inputs) + (_text(4, device) if device != "" else b"") + extra
    return _text(1, body)


ATTR = _text(5, _text(1, "T") + _text(2, _tag(6, 0) + _varint(1)))  # attr {key: "T" value {type: DT_FLOAT}}
VERSIONS = _text(4, _tag(1, 0) + _varint(27))

WIRE_CASES = {
    "empty graph": b"",
    "plain": _node("a", "Const", extra=ATTR) + _node("b", "Identity", ["a"], device="/device:CPU:0"),
    "name given twice: the last wins": _node(b"", extra=_text(1, "first") + _text(1, "x") + _text(2, "NoOp"))
    + _node("y", "Identity", ["x", "first"]),
    "op and device given twice": _node("a", "Const", device="/cpu:0", extra=_text(2, "Placeholder") + _text(4, "")),
    "inputs around other fields": _node("a", "Const")
    + _node("b", "AddV2", extra=_text(3, "a") + ATTR + _text(3, "a:0")),
    "unknown fields of every wire type": _node("a", "Const", extra=_tag(9, 0) + _varint(300) + _tag(10, 1) + bytes(8)
                                               + _tag(11, 5) + bytes(4) + _text(12, b"\xff\xfe")
                                               + _tag(13, 3) + _tag(1, 0) + _varint(1) + _tag(13, 4))
    + _tag(99, 0) + _varint(5) + _node("b", "Identity", ["a"]),
    "a known field of another wire type is an unknown one": _node("a", "Const", extra=_tag(1, 0) + _varint(7)
                                                                  + _tag(3, 5) + bytes(4))
    + _tag(1, 0) + _varint(1),
    "nodes between other graph fields": VERSIONS + _node("a", "Const") + _text(2, b"") + _node("b", "Identity", ["a"])
    + VERSIONS + _node("c", "Identity", ["b:0"]),
    "ports": _node("s", "Split") + _node("t", "AddN", ["s:1", "s:0", "s:12", "s:007", "s:123456789"]),
    "not ports": _node("s", "Split") + _node("s:1234567890", "NoOp") + _node("s:x", "NoOp") + _node("u:", "NoOp")
    + _node("t", "AddN", ["s:1234567890", "s:x", "u:", "s:\u0661", "s:+1", "s: 1"]),
    "control inputs": _node("a", "NoOp") + _node("b", "NoOp", ["^a", "^a"]) + _node("c", "Identity", ["b", "^b", "^a"]),
    "dangling inputs": _node("a", "NoOp") + _node("b", "Identity", ["x", "^y", "a:3", "z:1", "^a:1", "^", "", ":1"]),
    "a name with a colon": _node(":a", "NoOp") + _node("b", "Identity", [":a", ":a:2"]),
    "duplicate names": _node("a", "NoOp") + _node("a", "Const") + _node("b", "Identity", ["a", "^a"]),
    "unicode names": _node("\u00e9t\u00e9", "NoOp")
    + _node("\u4e2d", "Identity", ["\u00e9t\u00e9:1", "^\u00e9t\u00e9"]),
    "a node without fields": _node() + _node("b", "Identity", [""]),
    "more op types and devices than the scan keeps at hand": b"".join(
        _node(f"n{i}", f"Op{i * 7 % 150}", device=f"/device:CPU:{i % 70}" if i % 3 else "") for i in range(600)),
    "lengths in more bytes than needed": _tag(1, 2) + b"\x83\x80\x80\x00" + _text(1, "a") + _tag(1, 2) + b"\x80\x00",
}

REJECTED = {
    "bad UTF-8 in a name": _node(b"a\xff", "NoOp"),
    "bad UTF-8 in an op": _node("a", b"\xc3\x28"),
    "bad UTF-8 in an input": _node("a", "NoOp", [b"b\xed\xa0\x80"]),
    "bad UTF-8 in a device": _node("a", "NoOp", device=b"\xe2\x82"),
    "bad UTF-8 in a name given again": _node("a", "NoOp", extra=_text(1, b"\xff") + _text(1, "b")),
    "a truncated node": _node("a", "Const", extra=ATTR)[:-3],
    "a length past the end": _tag(1, 2) + _varint(50) + _text(1, "a"),
    "a varint of eleven bytes": _tag(9, 0) + b"\xff" * 10 + b"\x01",
    "field number 0": _tag(0, 0) + _varint(1),
    "an undefined wire type": _tag(3, 7) + b"\x00",
    "an end tag alone": _node("a", extra=_tag(5, 4)),
    "a group never closed": _tag(9, 3) + _tag(1, 0) + _varint(1),
    "a group closed by another field": _tag(9, 3) + _tag(10, 4),
    "a tag beyond 32 bits": b"\x80\x80\x80\x80\x80\x01" + _varint(1),
}


@pytest.mark.parametrize("case", sorted(WIRE_CASES))
def test_wire_forms_are_read_as_protobuf_reads_them(native, case):
    data = WIRE_CASES[case]
    graph = _parsed(data)
    assert graph is not None, "the case is meant to parse"
    columns = assert_same_columns(_native(native, data), graph, data)
    assert node_ranges(data) == (columns.offsets, columns.lengths)


def test_the_wire_forms_hold_what_they_are_said_to():
    """The cases test what they say: read through protobuf, here are the values they are made for."""
    def columns(case: str) -> GraphColumns:
        return python_columns(_parsed(WIRE_CASES[case]))
    assert columns("name given twice: the last wins").names == ["x", "y"]
    assert columns("op and device given twice").ops == ["Placeholder"]
    assert columns("op and device given twice").devices == [""]
    assert columns("ports").inputs[1] == ((0, 1), (0, 0), (0, 12), (0, 7), (0, 123456789))
    assert columns("not ports").inputs[4] == ((1, 0), (2, 0), (3, 0), (-1, 0), (-1, 0), (-1, 0))
    assert columns("control inputs").inputs[2] == ((1, 0), (1, -1), (0, -1))
    dangling = ("x", "^y", "z:1", "^a:1", "^", "", ":1")
    assert columns("dangling inputs").dangling == [f"'b' reads {t!r}" for t in dangling]
    assert columns("a known field of another wire type is an unknown one").names == ["a"]
    assert columns("nodes between other graph fields").names == ["a", "b", "c"]
    assert columns("duplicate names").index == {"a": 1, "b": 2}
    assert columns("a name with a colon").inputs[1] == ((0, 0), (0, 2))


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_what_protobuf_refuses_the_scan_cannot_read(native, case):
    data = REJECTED[case]
    assert _parsed(data) is None, "the case is meant to be refused"
    assert native.scan(data, MAX_PORT_DIGITS) is None
    assert native.scan(bytearray(data), MAX_PORT_DIGITS) is None  # any buffer


def test_every_cut_of_a_graph_is_read_or_refused_as_protobuf_does(native, real_graphs):
    data = real_graphs["dense_gelu"].SerializeToString()
    for cut in range(len(data) + 1):
        graph = _parsed(data[:cut])
        columns = _native(native, data[:cut])
        if graph is None:
            assert columns is None, cut
        else:
            assert_same_columns(columns, graph, data[:cut])


def test_groups_deeper_than_the_scan_reads_are_left_to_protobuf(native):
    deep = _tag(9, 3) * 17 + _tag(9, 4) * 17
    data = _node("a", "NoOp", extra=deep)
    assert _parsed(data) is not None
    assert native.scan(data, MAX_PORT_DIGITS) is None  # the caller reads the graph through protobuf
    shallow = _node("a", "NoOp", extra=deep[1:-1])
    assert_same_columns(_native(native, shallow), _parsed(shallow), shallow)


# ------------------------------------------------------------------ bytes spoilt at random
def _skeleton_class():
    """A GraphDef of nodes holding only fields 1-4 (what the scan reads): every other field is an
    unknown one, which protobuf steps over as the scan does."""
    field = descriptor_pb2.FieldDescriptorProto
    string, repeated, optional = field.TYPE_STRING, field.LABEL_REPEATED, field.LABEL_OPTIONAL
    node = descriptor_pb2.DescriptorProto(name="Node", field=[
        descriptor_pb2.FieldDescriptorProto(name=n, number=k, type=string, label=repeated if n == "input" else optional)
        for k, n in enumerate(("name", "op", "input", "device"), start=1)])
    graph = descriptor_pb2.DescriptorProto(name="Graph", field=[descriptor_pb2.FieldDescriptorProto(
        name="node", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE, label=repeated,
        type_name=".scan_test.Node")])
    file = descriptor_pb2.FileDescriptorProto(name="scan_test.proto", package="scan_test", syntax="proto3",
                                              message_type=[node, graph])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("scan_test.Graph"))


def _spoil(data: bytes, rng: random.Random) -> bytes:
    raw = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        at = rng.randrange(len(raw))
        kind = rng.randrange(6)
        if kind == 0:
            raw[at] = rng.randrange(256)
        elif kind == 1:
            raw[at] ^= 1 << rng.randrange(8)
        elif kind == 2:
            raw.insert(at, rng.randrange(256))
        elif kind == 3:
            del raw[at]
        elif kind == 4:  # a byte that reads as a tag or a length near a field boundary
            raw[at] = rng.choice((0x08, 0x0A, 0x0B, 0x0C, 0x12, 0x1A, 0x22, 0x2A, 0x0F, 0x80, 0xFF))
        else:
            del raw[at:]
        if not raw:
            break
    return bytes(raw)


def test_random_byte_mutations_never_crash_and_agree_with_protobuf(native, real_graphs):
    """Bytes spoilt at random: the scan reads them exactly when protobuf reads the fields it looks
    at (a skeleton GraphDef of those fields), with the same columns; whatever full protobuf
    accepts, the scan reads the same."""
    skeleton = _skeleton_class()
    rng = random.Random(SEED)
    sources = [real_graphs[n].SerializeToString() for n in ("dense_gelu", "while_loop")]
    read = refused = full = 0
    for case in range(1500):
        data = _spoil(rng.choice(sources), rng)
        columns = _native(native, data)
        fields = _parsed(data, skeleton)
        assert (columns is None) == (fields is None), f"case {case}"
        if columns is None:
            refused += 1
            continue
        read += 1
        assert_same_columns(columns, fields, data)
        graph = _parsed(data)
        if graph is not None:
            full += 1
            assert_same_columns(columns, graph, data)
    assert read > 200 and refused > 200 and full > 100, (read, refused, full)


# ------------------------------------------------------------------ loading
def test_a_loaded_model_hands_its_columns_to_the_first_index_only(native, tmp_path, monkeypatch, real_graphs):
    monkeypatch.setattr(graph_scan, "native_module", lambda name: native)
    path = tmp_path / "m.pb"
    path.write_bytes(real_graphs["bert"].SerializeToString())
    model = load_model(path)
    columns = model.columns
    assert columns is not None and len(columns) == len(real_graphs["bert"].node)
    assert (columns.texts, columns.devices, columns.counts, columns.offsets) == (None,) * 4  # the validation's
    assert take_columns(model) is not None and take_columns(model) is None  # once
    model = load_model(path)
    graph = model.graph_def  # handed out: it may be changed, the columns go
    assert model.columns is None and take_columns(model) is None and len(graph.node) > 10
    text = tmp_path / "m.pbtxt"
    text.write_text(str(real_graphs["bert"]))
    assert load_model(text).columns is None  # only the binary form is scanned
    assert LoadedModel(graph, "g", "graph_def").columns is None


def test_loading_says_the_same_either_way(native, monkeypatch, real_graphs):
    """A graph with a dangling input and a bad port: load-time validation words it the same with the
    scan's columns as without."""
    graph = copy.deepcopy(real_graphs["while_loop"])
    graph.node[-1].input.append("nowhere:1")
    graph.node[-2].input.append(graph.node[0].name + ":7")
    data = graph.SerializeToString()
    messages = []
    for module in (native, None):
        monkeypatch.setattr(graph_scan, "native_module", lambda name, m=module: m)
        with pytest.raises(GraphValidationError) as raised:
            read_graph_def(data, "g.pb")
        messages.append(str(raised.value))
    assert messages[0] == messages[1] and "reads output 7" in messages[0]


def test_a_run_indexed_from_the_columns_fuses_the_same(native, monkeypatch, tmp_path, real_graphs):
    """``fuse(load_model(path))``: the first index is made of the scan's columns, and the fused graph
    and its report are those of a run reading the graph through protobuf."""
    from scopefusion import fuse
    from scopefusion.core.fusion import pipeline

    path = tmp_path / "m.pb"
    path.write_bytes(real_graphs["bert"].SerializeToString())
    runs = []
    for module in (native, None):
        monkeypatch.setattr(graph_scan, "native_module", lambda name, m=module: m)
        given: list[bool] = []

        def index(graph_def, *, columns=None, given=given, **kwargs):
            given.append(columns is not None)
            return GraphIndex(graph_def, columns=columns, **kwargs)
        monkeypatch.setattr(pipeline, "GraphIndex", index)
        result = fuse(load_model(path), hints=False)
        report = result.report
        runs.append((given[:1], result.graph_def.SerializeToString(deterministic=True), report.fused_count(),
                     report.op_counts_after, [(r.name, r.reason) for r in report.refused]))
    assert runs[0][0] == [True] and runs[1][0] == [False]
    assert runs[0][1:] == runs[1][1:]
    assert runs[0][2] > 0


def test_graph_columns_are_the_same_by_either_path(native, monkeypatch, real_graphs):
    """:func:`graph_columns` scans where the extension is there and can tell, reads protobuf's API where
    not (not built, forced off, or bytes the scan leaves to protobuf): the same columns."""
    graph = real_graphs["while_loop"]
    data = graph.SerializeToString()
    deep = _node("deep", "NoOp", extra=_tag(9, 3) * 17 + _tag(9, 4) * 17)
    spoilt = data + deep  # a node the scan leaves to protobuf
    both = graph_pb2.GraphDef.FromString(spoilt)
    read = {}
    for module in (native, None):
        monkeypatch.setattr(graph_scan, "native_module", lambda name, m=module: m)
        read[module is None] = (graph_scan.graph_columns(graph, data), graph_scan.graph_columns(both, spoilt),
                                graph_scan.scan_columns(spoilt))
    for column in COLUMNS:
        assert getattr(read[False][0], column) == getattr(read[True][0], column), column
        assert getattr(read[False][1], column) == getattr(read[True][1], column), column
    assert read[False][2] is None and read[True][2] is None
    assert read[False][1].names[-1] == "deep"
