"""Load-time validation takes shortcuts: node names judged all at once, attributes judged once
per signature (read from the file's bytes, tensor contents left out, or per serialized node),
inputs looked at only where one does not plainly name a node with outputs.  Here the
validator, by each of its routes (a graph with the bytes it was read from, with the columns
and node signatures the native scan reads from those bytes, parsed without
them, built in memory), is held against a plain reference that judges every node, attribute
and input one by one, on real graphs spoilt at random and on hand-made wire forms that only a
careless signature would confuse."""
from __future__ import annotations

import random

import pytest
import tensorflow as tf
from tests.helpers.graph_helpers import side_by_side
from tests.models.model_builders import bert_style_encoder
from tensorflow.core.framework import graph_pb2
from tests.robustness.test_fuzz import MUTATIONS, _dense_gelu

from scopefusion import GraphValidationError
from scopefusion.core.graph import validate, wire_view
from scopefusion.core.graph.graph_scan import scan_columns
from scopefusion.core.graph.attr_rules import OpRules, attr_problem, op_rules, shorten, valid_dtypes
from scopefusion.core.graph.io import parse_graph_def
from scopefusion.core.graph.output_ports import output_count
from scopefusion.core.graph.vocabulary import is_valid_node_name, parse_input
from scopefusion.testing import graph_from_function

SEED = 20251123
CASES_PER_MUTATION = 3
NAME_PROBLEM = ("its name is not one TensorFlow accepts (letters, digits and . _ - / >, starting with a letter, "
                "digit or '.', no empty scope)")


# ------------------------------------------------------------------ the reference
def _attr_problems(node, rules: OpRules, dtypes, cache) -> list[str]:
    found = []
    missing = [key for key in rules.required if key not in node.attr]
    if missing:
        found.append(f"it lacks the required attribute(s) {', '.join(repr(k) for k in missing)} "
                     f"({', '.join(rules.attrs[k].declared for k in missing)})")
    for key, value in node.attr.items():
        if key in rules.attrs:
            problem = attr_problem(key, value, rules.attrs[key], dtypes)
            if problem is not None:
                found.append(problem)
        if validate.nested_too_deep(value, 3, cache):
            found.append(f"attribute {key!r} is nested more than {validate.MAX_NESTING} levels deep")
    return found


def _input_problems(node, index, nodes, rules_of, functions) -> list[str]:
    found, after_control = [], False
    for slot, text in enumerate(node.input):
        producer, name, port = index.get(text), text, 0
        if producer is None:
            if text.startswith("^"):
                after_control = True
                continue
            name, port = parse_input(text)
            producer = index.get(name)
        if after_control:
            found.append(f"data input {slot} {shorten(text)} comes after a control input")
        if producer is None:
            continue
        outputs = rules_of(nodes[producer].op).outputs
        count = output_count(nodes[producer], functions) if outputs is None else outputs
        if count is not None and port >= count:
            found.append(f"input {slot} {shorten(text)} reads output {port} of {shorten(name)} "
                         f"({nodes[producer].op or 'no op'}), which has {count} output{'' if count == 1 else 's'}")
    return found


def reference_problems(graph: graph_pb2.GraphDef) -> list[tuple[str, list[str]]]:
    """Every node in graph order, everything about it one by one: name, op type, each
    attribute, each input (a repeated name stands for its last node)."""
    functions = {f.signature.name: len(f.signature.output_arg) for f in graph.library.function}
    nodes = list(graph.node)
    index = {node.name: i for i, node in enumerate(nodes)}
    rules: dict[str, OpRules] = {"": OpRules()}
    dtypes, cache = valid_dtypes(), {}

    def rules_of(op: str) -> OpRules:
        return rules[op] if op in rules else rules.setdefault(op, op_rules(op, functions))

    problems = []
    for node in nodes:
        found = [] if is_valid_node_name(node.name) else [NAME_PROBLEM]
        found += [] if node.op else ["it has no op type"]
        found += _attr_problems(node, rules_of(node.op), dtypes, cache)
        found += _input_problems(node, index, nodes, rules_of, functions)
        if found:
            problems.append((f"node {shorten(node.name)} ({node.op or 'no op'})", found))
    for function in graph.library.function:
        for inner in function.node_def:
            if any(validate.nested_too_deep(v, 5, cache) for v in inner.attr.values()):
                problems.append((f"node {shorten(inner.name)} of function {shorten(function.signature.name)}",
                                 [f"an attribute is nested more than {validate.MAX_NESTING} levels deep"]))
    return problems


def routes(data: bytes) -> dict[str, list[tuple[str, list[str]]]]:
    """What the validator finds in the graph serialized in ``data``, by each of its routes."""
    def parsed() -> graph_pb2.GraphDef:
        return graph_pb2.GraphDef.FromString(data)
    return {"bytes": validate._Validator(parsed(), True, data).problems(),
            "scanned bytes": validate._Validator(parsed(), True, data, scan_columns(data)).problems(),
            "parsed": validate._Validator(parsed(), True).problems(),
            "in memory": validate._Validator(parsed(), False).problems()}


def assert_agree(data: bytes, what: str) -> list[tuple[str, list[str]]]:
    expected = reference_problems(graph_pb2.GraphDef.FromString(data))
    for route, found in routes(data).items():
        assert found == expected, f"{what}: the validator ({route}) and the reference disagree"
    return expected


# ------------------------------------------------------------------ real graphs, spoilt
def _loop(x):
    def body(i, y):
        return i + 1, tf.nn.relu(y * 0.5 + 1.0)
    return tf.while_loop(lambda i, y: i < 3, body, [tf.constant(0), x])[1]


@pytest.fixture(scope="module")
def big_graphs() -> dict[str, graph_pb2.GraphDef]:
    """Real graphs, each copied many times: most nodes repeat the attributes of many others."""
    return {
        "bert": side_by_side(bert_style_encoder(layers=1, hidden=16, heads=2, seq=4, batch=1, seed=0).graph_def, 12),
        "dense_gelu": side_by_side(_dense_gelu(), 40),
        "tf1_while": side_by_side(graph_from_function(_loop, tf.TensorSpec([2, 3], tf.float32, "x")), 30),
    }


def test_the_unspoilt_graphs_pass_every_route(big_graphs):
    for name, graph in big_graphs.items():
        assert assert_agree(graph.SerializeToString(), name) == []


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_every_route_finds_what_the_reference_finds_in_spoilt_graphs(big_graphs, mutation):
    refused = 0
    for number in range(CASES_PER_MUTATION):
        rng = random.Random(f"{SEED}:{mutation}:{number}")
        name = rng.choice(sorted(big_graphs))
        graph = graph_pb2.GraphDef()
        graph.CopyFrom(big_graphs[name])
        what = MUTATIONS[mutation](graph, rng)
        refused += bool(assert_agree(graph.SerializeToString(), f"{name}: {what}"))
    if mutation in ("port_out_of_range", "empty_op", "wrong_attr_kind", "bad_name_chars"):
        assert refused == CASES_PER_MUTATION  # these spoil every graph in a way validation refuses


def _node(graph: graph_pb2.GraphDef, name: str):
    return next(n for n in graph.node if n.name == name)


BAD_NAMES = ["{}\nx", "x\n{}", "{}\n", "{}/", "a//{}", "_{}", "/{}", "{} x", "{}\u00e9", "{}:0", ""]


@pytest.mark.parametrize("pattern", BAD_NAMES)
def test_a_bad_name_among_many_good_ones_is_named(big_graphs, pattern):
    """The names are judged all at once; one at fault, anywhere, is still named (and only it)."""
    for position in (0, 777, -1):
        graph = graph_pb2.GraphDef()
        graph.CopyFrom(big_graphs["dense_gelu"])
        node = graph.node[position]
        node.name = pattern.format(node.name)
        assert assert_agree(graph.SerializeToString(), f"{node.name!r}") == [
            (f"node {shorten(node.name)} ({node.op})", [NAME_PROBLEM])]


def test_several_bad_names_are_each_named(big_graphs):
    graph = graph_pb2.GraphDef()
    graph.CopyFrom(big_graphs["dense_gelu"])
    spoilt = {5: "{}\nx", 400: "{}/", len(graph.node) - 1: "a//{}"}
    for position, pattern in spoilt.items():
        graph.node[position].name = pattern.format(graph.node[position].name)
    problems = assert_agree(graph.SerializeToString(), "three bad names")
    assert problems == [(f"node {shorten(graph.node[p].name)} ({graph.node[p].op})", [NAME_PROBLEM])
                        for p in sorted(spoilt)]


def test_inputs_are_judged_the_same_whatever_reads_a_node_without_outputs(big_graphs):
    """A NoOp has no output: reading it is refused, waiting on it is not (also when its name is
    repeated and the last node of that name is, or is not, the NoOp)."""
    graph = graph_pb2.GraphDef()
    graph.CopyFrom(big_graphs["dense_gelu"])
    first, last = graph.node[3].name, graph.node[-1].name
    graph.node.add(name="wait", op="NoOp")
    graph.node.add(name=first, op="NoOp")  # repeats a name: the NoOp is the last node of that name
    graph.node.add(name="r1", op="Identity", input=["wait"]).attr["T"].type = 1
    graph.node.add(name="r2", op="Identity", input=[first, "^wait"]).attr["T"].type = 1
    graph.node.add(name="r3", op="Identity", input=["^wait", last]).attr["T"].type = 1
    problems = dict(assert_agree(graph.SerializeToString(), "NoOps"))
    assert problems["node 'r1' (Identity)"] == ["input 0 'wait' reads output 0 of 'wait' (NoOp), which has 0 outputs"]
    assert problems["node 'r2' (Identity)"] == [
        f"input 0 {first!r} reads output 0 of {first!r} (NoOp), which has 0 outputs"]
    assert problems["node 'r3' (Identity)"] == [f"data input 1 {last!r} comes after a control input"]


# ------------------------------------------------------------------ wire forms
def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (lengths below 128)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _varint_field(number: int, value: int) -> bytes:
    assert 0 <= value < 128
    return bytes([number << 3, value])


def _node_bytes(name: str, op: str, *attrs: tuple[str, bytes]) -> bytes:
    entries = b"".join(_field(5, _field(1, key.encode()) + _field(2, value)) for key, value in attrs)
    return _field(1, name.encode()) + _field(2, op.encode()) + entries


def _graph_bytes(*nodes: bytes) -> bytes:
    return b"".join(_field(1, node) for node in nodes)


def test_an_attribute_value_holding_two_kinds_is_judged_by_the_last_in_every_route():
    """AttrValue is a oneof: on the wire ``type`` then ``i`` holds an int, ``i`` then ``type``
    a dtype.  Nodes holding either order must not share a judgment."""
    as_dtype = _varint_field(3, 7) + _varint_field(6, 1)  # i = 7, then type = DT_FLOAT: a dtype
    as_int = _varint_field(6, 1) + _varint_field(3, 7)  # type, then i: an int
    placeholder = _node_bytes("x", "Placeholder", ("dtype", _varint_field(6, 1)))
    good = [_node_bytes(f"n{k}", "Identity", ("T", as_dtype)) for k in range(100)]
    data = _graph_bytes(placeholder, *good, _node_bytes("bad", "Identity", ("T", as_int)))
    assert assert_agree(data, "two kinds") == [
        ("node 'bad' (Identity)", ["attribute 'T' holds an int, the op declares type"])]


def test_a_tensor_shape_given_twice_on_the_wire_is_judged_merged_in_every_route():
    """A message field given twice is merged: shape [-1] then shape [4] is a shape [-1, 4],
    undefined, though its last part alone is the shape of the clean constants before it."""
    def const(name: str, *shapes: bytes) -> bytes:
        tensor = _varint_field(1, 1) + b"".join(_field(2, s) for s in shapes)
        return _node_bytes(name, "Const", ("dtype", _varint_field(6, 1)), ("value", _field(8, tensor)))
    dim4, dim_unknown = _field(2, _varint_field(1, 4)), _field(2, bytes([1 << 3]) + b"\xff" * 9 + b"\x01")
    data = _graph_bytes(*(const(f"c{k}", dim4) for k in range(100)), const("merged", dim_unknown, dim4))
    assert assert_agree(data, "shape given twice") == [
        ("node 'merged' (Const)", ["attribute 'value' holds a tensor of undefined shape [-1, 4]"])]
    with pytest.raises(GraphValidationError, match="node 'merged' .Const.: attribute 'value' holds a tensor of "
                                                   r"undefined shape \[-1, 4\]$"):
        parse_graph_def(data, "m.pb")


def test_attribute_signatures_are_each_nodes_own_trimmed_serialization(big_graphs):
    """The signatures, cut out of the trimmed graph serialized at once, are the bytes each trimmed
    node serializes to on its own: equal signatures mean equal trimmed nodes."""
    for graph in big_graphs.values():
        data = graph.SerializeToString()
        view = wire_view._classes()["Graph"]()
        view.ParseFromString(data)
        view.DiscardUnknownFields()
        expected = [node.SerializeToString() for node in view.node]
        assert wire_view.attr_signatures(data) == expected
        assert len(expected) == len(graph.node) and len(set(expected)) < len(expected)
