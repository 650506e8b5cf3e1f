"""Graphs TensorFlow would refuse are refused when they are read, in one line naming the
node and what is wrong: ports out of range, empty ops, attributes of the wrong kind or
missing, names TensorFlow rejects, graphs nested deeper than protobuf reads."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
import tensorflow as tf
from google.protobuf import text_format
from tests.helpers.graph_helpers import side_by_side
from tensorflow.core.framework import graph_pb2

import scopefusion
from scopefusion import GraphLoadError, GraphValidationError, load_model
from scopefusion.cli import main
from scopefusion.core.graph import validate
from scopefusion.core.graph.io import parse_graph_def
from scopefusion.core.graph.vocabulary import parse_input, tensor_name
from scopefusion.testing import graph_from_function

Spoiler = Callable[[graph_pb2.GraphDef], None]


def _model(x):
    y = tf.nn.gelu(tf.matmul(x, tf.ones([8, 8])))
    return tf.concat(tf.split(y, 2, axis=1), axis=1) + 1.0


@pytest.fixture(scope="module")
def graph() -> graph_pb2.GraphDef:
    """Placeholder x, MatMul, the ops of an exact GELU, Split (2 outputs), ConcatV2 (N=2), AddV2, Identity."""
    return graph_from_function(_model, tf.TensorSpec([2, 8], tf.float32, "x"))


def _node(graph: graph_pb2.GraphDef, name: str):
    return next(n for n in graph.node if n.name == name)


def _spoilt(graph: graph_pb2.GraphDef, spoil: Spoiler) -> graph_pb2.GraphDef:
    copy = graph_pb2.GraphDef()
    copy.CopyFrom(graph)
    spoil(copy)
    return copy


def _load(tmp_path: Path, graph: graph_pb2.GraphDef, fmt: str = "pb"):
    path = tmp_path / f"m.{fmt}"
    path.write_bytes(text_format.MessageToString(graph).encode() if fmt == "pbtxt" else graph.SerializeToString())
    return load_model(path)


def _imports(graph: graph_pb2.GraphDef) -> None:
    with tf.Graph().as_default():
        tf.compat.v1.import_graph_def(graph, name="")


def _set_input(name: str, slot: int, text: str) -> Spoiler:
    return lambda g: _node(g, name).input.__setitem__(slot, text)


# ------------------------------------------------------------------ ports
@pytest.mark.parametrize("fmt", ["pb", "pbtxt"])
def test_a_port_past_the_producers_last_is_refused_naming_both(graph, tmp_path, fmt):
    fine = _spoilt(graph, _set_input("concat", 0, "split:1"))  # Split has 2 outputs
    _imports(_load(tmp_path, fine, fmt).graph_def)
    with pytest.raises(GraphValidationError) as caught:
        _load(tmp_path, _spoilt(graph, _set_input("concat", 0, "split:2")), fmt)
    assert str(caught.value) == (f"{tmp_path / f'm.{fmt}'}: invalid graph: node 'concat' (ConcatV2): input 0 "
                                 "'split:2' reads output 2 of 'split' (Split), which has 2 outputs")


def test_a_port_of_the_bert_encoder_out_of_range_is_refused(bert_encoder, tmp_path):
    assert _load(tmp_path, bert_encoder.graph_def).graph_def.node
    spoilt = _spoilt(bert_encoder.graph_def, _set_input("bert/pooler/dense/MatMul", 0, "bert/pooler/dense/BiasAdd:99"))
    with pytest.raises(GraphValidationError, match="reads output 99 of 'bert/pooler/dense/BiasAdd' "
                                                   r"\(BiasAdd\), which has 1 output$"):
        _load(tmp_path, spoilt)


def test_reading_a_node_without_outputs_is_refused_and_waiting_on_it_is_not(graph, tmp_path):
    def add_noop(g, reads: str) -> None:
        g.node.add(name="done", op="NoOp")
        _node(g, "Identity").input.append(reads)
    _imports(_load(tmp_path, _spoilt(graph, lambda g: add_noop(g, "^done"))).graph_def)
    with pytest.raises(GraphValidationError, match=r"input 1 'done' reads output 0 of 'done' \(NoOp\), which has 0"):
        _load(tmp_path, _spoilt(graph, lambda g: add_noop(g, "done")))


def test_a_data_input_after_a_control_input_is_refused(graph, tmp_path):
    def control_first(g):
        node = _node(g, "add")
        node.input[:] = ["^x", *node.input]
    with pytest.raises(GraphValidationError, match="node 'add' .AddV2.: data input 1 'concat' comes after a control"):
        _load(tmp_path, _spoilt(graph, control_first))


def test_an_op_tensorflow_does_not_know_is_counted_from_its_output_shapes_else_not_at_all(graph, tmp_path):
    def custom(shapes: int, port: int) -> Spoiler:
        def spoil(g):
            node = _node(g, "split")
            node.op = "MySplit"
            for _ in range(shapes):
                node.attr["_output_shapes"].list.shape.add()
            _node(g, "concat").input[1] = f"split:{port}"
        return spoil
    assert _load(tmp_path, _spoilt(graph, custom(0, 7))).graph_def.node  # nothing tells its outputs
    assert _load(tmp_path, _spoilt(graph, custom(3, 2))).graph_def.node
    with pytest.raises(GraphValidationError, match="reads output 3 of 'split' .MySplit., which has 3 outputs"):
        _load(tmp_path, _spoilt(graph, custom(3, 3)))


def test_a_function_call_has_as_many_outputs_as_the_function(graph):
    def call(port: int) -> graph_pb2.GraphDef:
        g = _spoilt(graph, lambda g: None)
        function = g.library.function.add()
        function.signature.name = "two_outputs"
        function.signature.output_arg.add(name="a", type=1)
        function.signature.output_arg.add(name="b", type=1)
        g.node.add(name="call", op="two_outputs")
        _node(g, "add").input[0] = f"call:{port}"
        return g
    validate.validate_graph(call(1))
    with pytest.raises(GraphValidationError, match="reads output 2 of 'call' .two_outputs., which has 2 outputs"):
        validate.validate_graph(call(2))


# ------------------------------------------------------------------ ops and attributes
def test_an_empty_op_is_refused(graph, tmp_path):
    with pytest.raises(GraphValidationError, match="node 'Gelu/Erfc' .no op.: it has no op type"):
        _load(tmp_path, _spoilt(graph, lambda g: setattr(_node(g, "Gelu/Erfc"), "op", "")))


WRONG_KINDS = [
    ("Gelu/Erfc", "T", lambda v: setattr(v, "i", 1), "attribute 'T' holds an int, the op declares type"),
    ("Gelu/Erfc", "T", lambda v: v.list.type.append(1), "attribute 'T' holds a list of dtypes, the op declares type"),
    ("Gelu/Erfc", "T", lambda v: v.Clear(), "attribute 'T' holds no value, the op declares type"),
    ("Gelu/Erfc", "T", lambda v: setattr(v, "type", 0), "attribute 'T' holds dtype enum 0, which is no valid dtype"),
    ("Gelu/Erfc", "T", lambda v: setattr(v, "type", 101), "attribute 'T' holds dtype enum 101, which is no valid"),
    ("Gelu/Erfc", "T", lambda v: setattr(v, "type", 7), "attribute 'T' holds string, which the op does not allow"),
    ("concat", "N", lambda v: setattr(v, "s", b"2"), "attribute 'N' holds a string, the op declares int"),
    ("concat", "N", lambda v: setattr(v, "i", 1), "attribute 'N' holds the value 1, the op's minimum is 2"),
    ("split", "num_split", lambda v: setattr(v, "f", 2.0), "attribute 'num_split' holds a float, the op declares int"),
    ("MatMul", "transpose_a", lambda v: setattr(v, "i", 0),
     "attribute 'transpose_a' holds an int, the op declares bool"),
    ("x", "shape", lambda v: setattr(v, "i", 3), "attribute 'shape' holds an int, the op declares shape"),
    ("ones", "value", lambda v: setattr(v, "b", True), "attribute 'value' holds a bool, the op declares tensor"),
    ("ones", "value", lambda v: v.tensor.tensor_shape.dim.add(size=-1),
     "attribute 'value' holds a tensor of undefined shape [8, 8, -1]"),
    ("ones", "value", lambda v: v.tensor.tensor_shape.dim.add(size=2**62),
     "attribute 'value' holds a tensor of shape [8, 8, 4611686018427387904], more than 2**63 - 1 elements"),
]


@pytest.mark.parametrize("name,key,spoil,needle", WRONG_KINDS, ids=[w[3][:45] for w in WRONG_KINDS])
def test_an_attribute_tensorflow_would_refuse_is_refused(graph, tmp_path, name, key, spoil, needle):
    spoilt = _spoilt(graph, lambda g: spoil(_node(g, name).attr[key]))
    with pytest.raises(GraphValidationError) as caught:
        _load(tmp_path, spoilt)
    assert f"node {name!r} (" in str(caught.value) and needle in str(caught.value)
    with pytest.raises(ValueError):  # TensorFlow refuses it too
        _imports(spoilt)


def test_a_missing_attribute_is_refused_unless_it_has_a_default(graph, tmp_path):
    _imports(_load(tmp_path, _spoilt(graph, lambda g: _node(g, "MatMul").attr.pop("transpose_a"))).graph_def)
    with pytest.raises(GraphValidationError, match=r"node 'MatMul' \(MatMul\): it lacks the required attribute\(s\) "
                                                   r"'T' \(type\)"):
        _load(tmp_path, _spoilt(graph, lambda g: _node(g, "MatMul").attr.pop("T")))


# ------------------------------------------------------------------ names and the message
@pytest.mark.parametrize("bad", ["add:0", "^add", "add\nx", "_add", "a//add", "add/", "add x", "add\u00e9"])
def test_a_node_name_tensorflow_rejects_is_refused(graph, tmp_path, bad):
    def rename(g):
        for node in g.node:
            node.input[:] = [tensor_name(bad, p) if n == "add" else t for t, (n, p) in
                             ((t, parse_input(t)) for t in node.input)]
        _node(g, "add").name = bad
    with pytest.raises(GraphValidationError, match=re.escape(f"node {bad!r} (AddV2): its name is not one TensorFlow")):
        _load(tmp_path, _spoilt(graph, rename), "pbtxt")


def test_the_message_is_one_line_naming_five_nodes_and_counting_the_rest(graph):
    long_name = "/".join(f"scope{k}" for k in range(400)) + "/relu"

    def spoil(g):
        for k in range(7):
            g.node.add(name=f"bad{k}", op="")
        g.node.add(name=long_name, op="")
        g.node.add(name="new\nline", op="Relu", input=["x:5"]).attr["T"].type = 1
    with pytest.raises(GraphValidationError) as caught:
        validate.validate_graph(_spoilt(graph, spoil))
    message = str(caught.value)
    assert "\n" not in message and len(message) < 1000
    assert message.startswith("invalid graph: node 'bad0' (no op): it has no op type; node 'bad1'")
    assert "node 'bad4' (no op)" in message and "'bad5'" not in message and message.endswith("; and 4 more node(s)")


# ------------------------------------------------------------------ nesting
def _nested_text(depth: int, tail: str) -> bytes:
    nested = 'func { name: "g" attr { key: "k" value { ' * depth + tail + " } } }" * depth
    return (b'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
            b'attr { key: "f" value { ' + nested.encode() + b" } } }")


@pytest.mark.parametrize("depth", [30, 31, 32, 33])
@pytest.mark.parametrize("tail", ["i: 1", "tensor { dtype: DT_FLOAT }", "tensor { tensor_shape { } }",
                                  "tensor { tensor_shape { dim { size: 1 } } }",
                                  'list { func { name: "h" attr { key: "j" value { b: true } } } }'])
def test_a_text_graph_is_refused_exactly_when_protobuf_could_not_read_it_back(depth, tail):
    parsed = graph_pb2.GraphDef()
    text_format.Parse(_nested_text(depth, tail).decode(), parsed)
    try:
        graph_pb2.GraphDef().ParseFromString(parsed.SerializeToString())
        readable = True
    except Exception:  # noqa: BLE001 - protobuf's own depth limit
        readable = False
    if readable:
        parse_graph_def(_nested_text(depth, tail))
    else:
        with pytest.raises(GraphValidationError, match="node 'x' .Placeholder.: attribute 'f' is nested more than 100"):
            parse_graph_def(_nested_text(depth, tail))


def test_a_text_graph_nested_hundreds_of_levels_deep_is_one_clear_error(tmp_path):
    path = tmp_path / "deep.pbtxt"
    path.write_bytes(_nested_text(600, "i: 1"))
    with pytest.raises(GraphLoadError, match="deep.pbtxt: the graph is nested more than 100 levels deep"):
        load_model(path)


def test_a_binary_graph_nested_past_protobufs_limit_is_one_clear_error(tmp_path):
    graph = graph_pb2.GraphDef()
    value = graph.node.add(name="x", op="NoOp").attr["f"]
    for _ in range(60):
        value.func.name = "g"
        value = value.func.attr["k"]
    path = tmp_path / "deep.pb"
    path.write_bytes(graph.SerializeToString())
    with pytest.raises(GraphLoadError) as caught:
        load_model(path)
    assert str(caught.value) == (f"{path}: the graph is nested more than 100 levels deep (messages within "
                                 "messages); protobuf reads no deeper graph")


# ------------------------------------------------------------------ where it runs, and its cost
def test_the_command_line_prints_the_node_on_one_line(graph, tmp_path, capsys):
    path = tmp_path / "m.pb"
    path.write_bytes(_spoilt(graph, _set_input("concat", 0, "split:2")).SerializeToString())
    assert main(["run", str(path), "-o", str(tmp_path / "out.pb")]) == 3
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"scopefusion: error: {path}: invalid graph: node 'concat' (ConcatV2): input 0 'split:2' "
                     "reads output 2 of 'split' (Split), which has 2 outputs"]
    assert not (tmp_path / "out.pb").exists()


def test_fuse_refuses_an_in_memory_graph_as_it_refuses_a_file(graph):
    with pytest.raises(GraphValidationError, match="node 'concat' .ConcatV2.: input 0 'split:2' reads output 2"):
        scopefusion.fuse(_spoilt(graph, _set_input("concat", 0, "split:2")))


def test_op_definitions_are_looked_up_once_per_op_type_whatever_the_size(graph, monkeypatch):
    calls: list[str] = []
    looked_up = validate.op_rules
    monkeypatch.setattr(validate, "op_rules", lambda op, functions: calls.append(op) or looked_up(op, functions))
    validate.validate_graph(side_by_side(graph, 1))
    one = sorted(calls)
    calls.clear()
    validate.validate_graph(side_by_side(graph, 300))
    assert sorted(calls) == one == sorted({n.op for n in graph.node})


def _refusal(graph: graph_pb2.GraphDef) -> str:
    """The error of a graph read from bytes, which is that of the same graph handed over in memory."""
    with pytest.raises(GraphValidationError) as caught:
        parse_graph_def(graph.SerializeToString(), "m.pb")
    with pytest.raises(GraphValidationError) as in_memory:
        validate.validate_graph(graph, "m.pb")
    assert str(caught.value) == str(in_memory.value)
    return str(caught.value).removeprefix("m.pb: ")


def test_a_bad_attribute_is_found_after_many_nodes_holding_the_same_good_ones(graph):
    def spoil(g: graph_pb2.GraphDef, prefix: str) -> None:
        _node(g, f"{prefix}MatMul").attr["transpose_a"].i = 3
        _node(g, f"{prefix}split").attr["num_split"].i = 0
    alone = side_by_side(graph, 1)
    spoil(alone, "c0/")
    big = side_by_side(graph, 150)  # every node of a type holds the attributes of the first
    spoil(big, "c149/")
    assert _refusal(big) == _refusal(alone).replace("'c0/", "'c149/") == (
        "invalid graph: node 'c149/MatMul' (MatMul): attribute 'transpose_a' holds an int, the op declares "
        "bool; node 'c149/split' (Split): attribute 'num_split' holds the value 0, the op's minimum is 1; "
        "node 'c149/concat' (ConcatV2): input 0 'c149/split' reads output 0 of 'c149/split' (Split), which has 0 "
        "outputs, input 1 'c149/split:1' reads output 1 of 'c149/split' (Split), which has 0 outputs")


def test_a_bad_attribute_is_found_among_many_nodes_whose_attributes_all_differ(graph):
    big = side_by_side(graph, 150)
    consts = [n for n in big.node if n.op == "Const"]
    for k, node in enumerate(consts):  # no two constants alike
        node.attr["value"].tensor.string_val.append(str(k).encode())
    assert len(consts) > 150
    parse_graph_def(big.SerializeToString())
    consts[-1].attr["value"].tensor.tensor_shape.dim.add(size=-1)
    assert _refusal(big).startswith(f"invalid graph: node {consts[-1].name!r} (Const): attribute 'value' holds a "
                                    "tensor of undefined shape [")


def test_tensorflow_is_not_imported_with_the_module():
    code = "import sys, scopefusion.core.graph.validate; print('tensorflow' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr


def test_a_graph_given_in_memory_is_judged_as_the_same_graph_read_from_a_file(tmp_path):
    """fuse(GraphDef) checks a copy parsed from the graph's bytes, as a file is read: the same
    refusal, word for word; the caller's graph is left as it was."""
    graph = graph_pb2.GraphDef()
    text_format.Parse('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }'
                      'node { name: "y" op: "Relu" input: "x:3" attr { key: "T" value { type: DT_FLOAT } } }'
                      'node { name: "z" op: "Relu" input: "y" attr { key: "T" value { i: 1 } } }', graph)
    before = graph.SerializeToString()
    path = tmp_path / "g.pb"
    path.write_bytes(before)
    with pytest.raises(GraphValidationError) as from_file:
        load_model(path)
    with pytest.raises(GraphValidationError) as in_memory:
        scopefusion.fuse(graph)
    assert str(in_memory.value) == str(from_file.value).removeprefix(f"{path}: ")
    assert "'y' (Relu)" in str(in_memory.value) and "'z' (Relu)" in str(in_memory.value)
    assert graph.SerializeToString() == before


def test_a_graph_in_memory_nested_deeper_than_protobuf_reads_is_one_clear_error():
    graph = graph_pb2.GraphDef()
    text_format.Parse(_nested_text(60, "i: 1").decode(), graph)
    with pytest.raises(GraphValidationError, match="node 'x' .Placeholder.: attribute 'f' is nested more than 100"):
        scopefusion.fuse(graph)
