"""Fuzzing: real graphs (Dense + GELU, a tf_slim BERT-style block, TF1 and functional
``tf.while_loop`` graphs) spoilt in every way a bad file or a careless tool spoils them, and
random, truncated and deeply nested bytes, through the API, the command line and the file
loaders.  Whatever goes in: only :class:`scopefusion.ScopeFusionError` escapes, the command
line prints one ``scopefusion: error:`` line and exits non-zero, nothing hangs, the input is
left as it was, and every graph that is accepted comes out importable by TensorFlow.

The seed is fixed; every case is reproducible alone from its category and number.
"""
from __future__ import annotations

import faulthandler
import hashlib
import os
import random
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest
import tensorflow as tf
from tests.helpers.freeze import freeze_function
from tests.models.model_builders import bert_style_encoder
from tensorflow.core.framework import graph_pb2

import scopefusion
from scopefusion.cli import main
from scopefusion.core.graph.output_ports import output_count
from scopefusion.core.graph.tf_ops import tensorflow_op_def
from scopefusion.core.graph.vocabulary import parse_input, tensor_name
from scopefusion.plugins.registry import NO_AUTOLOAD_ENV, load_registry
from scopefusion.testing import graph_from_function

pytestmark = pytest.mark.slow  # these take minutes

SEED = 20240917
CASES_PER_CATEGORY = 25
SUBPROCESS_CASES = 6
CASE_SECONDS = 30  # a case (load, fuse, write, import) running longer than this hangs
TOTAL_SECONDS = 300  # the module's budget; it takes about a minute
GRAPH_CATEGORIES = ("delete_node", "rename_node", "missing_input", "port_out_of_range", "bad_port_string",
                    "duplicate_name", "cycle", "empty_op", "wrong_attr_kind", "huge_splat", "deep_scope",
                    "bad_name_chars", "edge_dtype", "input_count", "const_tensor", "import_rules", "broken_library")
BYTE_CATEGORIES = ("truncated", "random_bytes", "deep_nesting")
COUNTS: dict[str, Counter] = {}  # "interface category" -> outcomes


# ============================================================================ real graphs
def _dense_gelu() -> graph_pb2.GraphDef:
    rng = np.random.default_rng(SEED)
    w1, w2 = (tf.Variable(rng.normal(size=s).astype(np.float32)) for s in ((8, 16), (16, 8)))
    b1, b2 = (tf.Variable(rng.normal(size=s).astype(np.float32)) for s in ((16,), (8,)))

    def fn(x):
        h = tf.nn.gelu(tf.nn.bias_add(tf.matmul(x, w1), b1), approximate=False)
        return tf.nn.gelu(tf.nn.bias_add(tf.matmul(h, w2), b2), approximate=True)
    return graph_from_function(fn, tf.TensorSpec([2, 8], tf.float32, "x"))


def _loop(x):
    def body(i, y):
        return i + 1, tf.nn.relu(y * 0.5 + 1.0)
    return tf.while_loop(lambda i, y: i < 3, body, [tf.constant(0), x])[1]


def _functional_loop() -> graph_pb2.GraphDef:
    return freeze_function(_loop, {"x": tf.TensorSpec([2, 3], tf.float32, "x")}, lower_control_flow=False)[0]


@pytest.fixture(scope="module")
def graphs() -> dict[str, graph_pb2.GraphDef]:
    return {
        "dense_gelu": _dense_gelu(),
        "bert": bert_style_encoder(layers=1, hidden=16, heads=2, seq=4, batch=1, seed=0).graph_def,
        "tf1_while": graph_from_function(_loop, tf.TensorSpec([2, 3], tf.float32, "x")),
        "functional_while": _functional_loop(),
    }


# ============================================================================ graph mutations
def _pick(graph: graph_pb2.GraphDef, rng: random.Random, keep: Callable = lambda n: True):
    return rng.choice([n for n in graph.node if keep(n)])


def _rename(graph: graph_pb2.GraphDef, names: dict[str, str]) -> None:
    """Rename nodes and every input reading them."""
    for node in graph.node:
        for k, text in enumerate(node.input):
            name, port = parse_input(text)
            if name in names:
                node.input[k] = tensor_name(names[name], port)
        node.name = names.get(node.name, node.name)


def delete_node(graph, rng):
    node = _pick(graph, rng)
    graph.node.remove(node)
    return f"deleted {node.name!r} ({node.op})"


def rename_node(graph, rng):
    node = _pick(graph, rng)
    old, new = node.name, node.name + "_renamed"
    if rng.random() < 0.5:
        node.name = new
        return f"renamed {old!r}, its consumers still read the old name"
    _rename(graph, {old: new})
    return f"renamed {old!r} and its consumers"


def missing_input(graph, rng):
    node = _pick(graph, rng, lambda n: len(n.input) > 0)
    k = rng.randrange(len(node.input))
    node.input[k] = ("^" if node.input[k].startswith("^") else "") + "no_such_node"
    return f"input {k} of {node.name!r} -> {node.input[k]!r}"


def port_out_of_range(graph, rng):
    """An input reading one of the ports past the producer's last (99 when its outputs are not known)."""
    node = _pick(graph, rng, lambda n: any(not t.startswith("^") for t in n.input))
    k = rng.choice([i for i, t in enumerate(node.input) if not t.startswith("^")])
    producer = next(n for n in graph.node if n.name == parse_input(node.input[k])[0])
    count = output_count(producer, {f.signature.name: len(f.signature.output_arg) for f in graph.library.function})
    port = 99 if count is None else count + rng.choice([0, 0, 1, 98, 999999999 - count])
    node.input[k] = f"{producer.name}:{port}"
    return f"input {k} of {node.name!r} -> {node.input[k]!r} ({count} outputs)"


BAD_PORTS = [":\u00b2", ":" + "7" * 5000, ":-1", ":", ":1e3", ": 1", ":0x1", "::0", ":\u0663", ":" + "0" * 12]


def bad_port_string(graph, rng):
    node = _pick(graph, rng, lambda n: len(n.input) > 0)
    k = rng.randrange(len(node.input))
    node.input[k] = parse_input(node.input[k])[0] + rng.choice(BAD_PORTS)
    return f"input {k} of {node.name!r} -> {node.input[k][:40]!r}"


def duplicate_name(graph, rng):
    a, b = rng.sample(list(graph.node), 2)
    b.name = a.name
    return f"node {b.op} renamed to {a.name!r}, which another node has"


def cycle(graph, rng):
    consumers: dict[str, list] = {}
    for node in graph.node:
        for text in node.input:
            consumers.setdefault(parse_input(text)[0], []).append(node)
    start = _pick(graph, rng, lambda n: n.name in consumers)
    end = start
    for _ in range(rng.randint(1, 6)):
        if end.name not in consumers:
            break
        end = rng.choice(consumers[end.name])
    data = [i for i, t in enumerate(start.input) if not t.startswith("^")]
    if data and rng.random() < 0.5:
        start.input[data[0]] = end.name
        return f"data input 0 of {start.name!r} -> its descendant {end.name!r}"
    start.input.append("^" + end.name)
    return f"{start.name!r} waits on its descendant {end.name!r}"


def empty_op(graph, rng):
    node = _pick(graph, rng)
    node.op = ""
    return f"op of {node.name!r} removed"


KIND_MAKERS: dict[str, Callable] = {
    "int": lambda v: setattr(v, "i", 7), "string": lambda v: setattr(v, "s", b"fuzz"),
    "float": lambda v: setattr(v, "f", 0.5), "bool": lambda v: setattr(v, "b", True),
    "type": lambda v: setattr(v, "type", 3), "shape": lambda v: v.shape.dim.add(size=2),
    "list(int)": lambda v: v.list.i.extend([1, 2]), "list(type)": lambda v: v.list.type.append(1),
    "tensor": lambda v: v.tensor.float_val.append(1.0), "func": lambda v: setattr(v.func, "name", "nope"),
    "no value": lambda v: None, "missing": None,
}


def wrong_attr_kind(graph, rng):
    def declared(n):
        op_def = tensorflow_op_def(n.op)
        return {a.name: a.type for a in op_def.attr if a.name in n.attr} if op_def is not None else {}
    node = _pick(graph, rng, lambda n: bool(declared(n)))
    key, kind = rng.choice(sorted(declared(node).items()))
    new = rng.choice([k for k in KIND_MAKERS if k != kind])
    if KIND_MAKERS[new] is None:
        del node.attr[key]
    else:
        node.attr[key].Clear()
        KIND_MAKERS[new](node.attr[key])
    return f"attribute {key!r} ({kind}) of {node.name!r} ({node.op}) -> {new}"


HUGE_SHAPES = [[2_000_000_000], [100_000, 100_000], [2**20] * 3, [2**40, 2**40], [-1], [3, -7], [2**62, 2]]


def huge_splat(graph, rng):
    shape = rng.choice(HUGE_SHAPES)
    if rng.random() < 0.3:  # an existing constant as one value repeated, same shape
        node = _pick(graph, rng, lambda n: n.op == "Const" and n.attr["value"].tensor.dtype == 1)
        tensor = node.attr["value"].tensor
        tensor.ClearField("tensor_content")
        del tensor.float_val[:]
        tensor.float_val.append(0.25)
        return f"constant {node.name!r} as a splat of its shape"
    const = graph.node.add(name=f"huge{rng.randrange(100)}/LayerNorm/moments/reduction_indices", op="Const")
    const.attr["dtype"].type = 3
    tensor = const.attr["value"].tensor
    tensor.dtype = 3
    for d in shape:
        tensor.tensor_shape.dim.add(size=d)
    tensor.int_val.append(-1)
    if rng.random() < 0.5:
        identity = graph.node.add(name=const.name + "/read", op="Identity", input=[const.name])
        identity.attr["T"].type = 3
    return f"splat constant of shape {shape}"


def deep_scope(graph, rng):
    prefix = "/".join(f"s{k}" for k in range(rng.randint(1000, 2500))) + "/"
    if rng.random() < 0.5:
        _rename(graph, {n.name: prefix + n.name for n in graph.node})
        return f"every node under a scope {prefix.count('/')} levels deep"
    node = _pick(graph, rng)
    _rename(graph, {node.name: prefix + node.name})
    return f"{node.name[-30:]!r} moved {prefix.count('/')} scopes deep"


def bad_name_chars(graph, rng):
    node = _pick(graph, rng)
    bad = rng.choice([":", "^", "\n", " ", ":0", "//", "\u00e9"])
    new = rng.choice([node.name + bad + "x", bad + node.name, node.name + bad])
    _rename(graph, {node.name: new})
    return f"{node.name!r} renamed {new!r}"


MUTATIONS = {f.__name__: f for f in (delete_node, rename_node, missing_input, port_out_of_range, bad_port_string,
                                     duplicate_name, cycle, empty_op, wrong_attr_kind, huge_splat, deep_scope,
                                     bad_name_chars)}



# ---------------------------------------------------------------- what TensorFlow's op definitions refuse
def _typed(n) -> bool:
    return "T" in n.attr and n.attr["T"].WhichOneof("value") == "type" and any(not t.startswith("^") for t in n.input)


def edge_dtype(graph, rng):
    """A node's dtype attribute changed: its inputs carry another dtype than it takes."""
    node = _pick(graph, rng, _typed)
    old = node.attr["T"].type
    node.attr["T"].type = 3 if old != 3 else 1
    return f"attribute 'T' of {node.name!r} ({node.op}) {old} -> {node.attr['T'].type}"


def input_count(graph, rng):
    """A data input added to, or taken from, a node of a registered op."""
    node = _pick(graph, rng, lambda n: tensorflow_op_def(n.op) is not None
                 and any(not t.startswith("^") for t in n.input))
    data = [t for t in node.input if not t.startswith("^")]
    controls = [t for t in node.input if t.startswith("^")]
    if len(data) > 1 and rng.random() < 0.5:
        data.pop(rng.randrange(len(data)))
        how = "one data input fewer"
    else:
        data.append(rng.choice(data))
        how = "one data input more"
    del node.input[:]
    node.input.extend(data + controls)
    return f"{node.name!r} ({node.op}): {how}"


def const_tensor(graph, rng):
    """A constant's tensor against its dtype (TensorFlow aborts on it) or shape."""
    node = _pick(graph, rng, lambda n: n.op == "Const")
    tensor = node.attr["value"].tensor
    how = rng.choice(["dtype", "short", "long"] if tensor.tensor_content else ["dtype"])
    if how == "dtype":
        tensor.dtype = rng.choice([d for d in (1, 2, 3, 9, 10) if d != tensor.dtype])
    elif how == "short":
        tensor.tensor_content = tensor.tensor_content[: len(tensor.tensor_content) // 2]
    else:
        tensor.tensor_content = tensor.tensor_content * 2
    return f"constant {node.name!r}: tensor {how}"


def import_rules(graph, rng):
    """What TensorFlow's import refuses besides op definitions: colocation with an unknown node, a
    device it does not read, version fields out of range, a shape with a dimension below -1."""
    how = rng.choice(["colocation", "device", "producer", "min_consumer", "bad_consumer", "output_shapes", "shape"])
    node = _pick(graph, rng)
    if how == "colocation":
        node.attr["_class"].list.s.append(b"loc:@no_such_node")
    elif how == "device":
        node.device = rng.choice(["/foo:bar", "/job:a/replica:x", "/device:CPU:zero", "/cpu:0/gpu:0"])
    elif how == "producer":
        graph.versions.producer = -rng.randint(1, 9)
    elif how == "min_consumer":
        graph.versions.min_consumer = 10**6
    elif how == "bad_consumer":
        graph.versions.bad_consumers.append(tf.version.GRAPH_DEF_VERSION)
    elif how == "output_shapes":
        node.attr["_output_shapes"].list.shape.add().dim.add(size=-rng.randint(2, 9))
    else:
        node = _pick(graph, rng, lambda n: n.op == "Placeholder")
        node.attr["shape"].shape.dim.add(size=-rng.randint(2, 9))
    return f"{how} of {node.name!r}" if how not in ("producer", "min_consumer", "bad_consumer") else how


def _call(graph, name: str, reads: str):
    call = graph.node.add(name=f"call_{name}_{len(graph.node)}", op="PartitionedCall", input=[reads])
    call.attr["Tin"].list.type.append(1)
    call.attr["Tout"].list.type.append(1)
    call.attr["f"].func.name = name
    return call


def broken_library(graph, rng):
    """A function library TensorFlow refuses or crashes on: a function calling itself (directly or
    through another), a call to a function the library lacks, two functions of one name, a
    function output naming no node."""
    how = rng.choice(["self", "mutual", "missing", "duplicate", "ret"])
    reads = _pick(graph, rng, lambda n: n.op == "Placeholder" and n.attr["dtype"].type == 1).name
    names = ["fuzz_f", "fuzz_g"] if how == "mutual" else ["fuzz_f"]
    for k, name in enumerate(names):
        function = graph.library.function.add()
        function.signature.name = name
        function.signature.input_arg.add(name="a", type=1)
        function.signature.output_arg.add(name="out", type=1)
        callee = {"self": name, "mutual": names[(k + 1) % len(names)], "missing": "no_such_function"}.get(how)
        if callee is not None:
            inner = function.node_def.add(name="inner", op="PartitionedCall", input=["a"])
            inner.attr["Tin"].list.type.append(1)
            inner.attr["Tout"].list.type.append(1)
            inner.attr["f"].func.name = callee
            function.ret["out"] = "inner:output:0"
        else:
            function.ret["out"] = "nowhere:output:0" if how == "ret" else "a"
    if how == "duplicate":
        graph.library.function.append(graph.library.function[-1])
    _call(graph, "fuzz_f", reads)
    return f"library: {how}"


DEFINITION_MUTATIONS = {f.__name__: f for f in (edge_dtype, input_count, const_tensor, import_rules,
                                                broken_library)}
ALL_MUTATIONS = {**MUTATIONS, **DEFINITION_MUTATIONS}

# ============================================================================ byte mutations
def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field."""
    def varint(v: int) -> bytes:
        out = bytearray()
        while True:
            out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
            v >>= 7
            if not v:
                return bytes(out)
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _as(graph: graph_pb2.GraphDef, fmt: str) -> bytes:
    from google.protobuf import text_format

    return text_format.MessageToString(graph).encode() if fmt == "pbtxt" else graph.SerializeToString()


def truncated(graphs, rng):
    name, fmt = rng.choice(sorted(graphs)), rng.choice(["pb", "pbtxt"])
    data = _as(graphs[name], fmt)
    cut = rng.randrange(1, len(data))
    return data[:cut], fmt, f"{name} as {fmt} cut at byte {cut} of {len(data)}"


def random_bytes(graphs, rng):
    how = rng.choice(["random", "text head", "flipped"])
    if how == "random":
        return rng.randbytes(rng.randrange(0, 3000)), "pb", "random bytes"
    if how == "text head":
        return b"node {" + bytes(rng.choice(b' {}:"\n\tabcxyz019_/^') for _ in range(500)), "pbtxt", "text head"
    name = rng.choice(sorted(graphs))
    data = bytearray(_as(graphs[name], "pb"))
    for _ in range(rng.randint(1, 12)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data), "pb", f"{name} with bytes changed"


def deep_nesting(graphs, rng):
    """A real graph plus a node whose attribute nests functions ``depth`` levels deep."""
    depth, fmt = rng.choice([20, 32, 33, 60, 150, 600, 2000]), rng.choice(["pb", "pbtxt"])
    base = _as(graphs["dense_gelu"], fmt)
    if fmt == "pbtxt":
        nested = 'func { name: "g" attr { key: "k" value { ' * depth + "i: 1" + " } } }" * depth
        node = (f'node {{ name: "deep" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} '
                f'attr {{ key: "f" value {{ {nested} }} }} }}\n')
        return base + node.encode(), fmt, f"function attribute {depth} levels deep, text"
    nested = b"\x18\x01"  # AttrValue.i = 1
    for _ in range(depth):
        nested = _field(10, _field(1, b"g") + _field(2, _field(1, b"k") + _field(2, nested)))
    node = (_field(1, b"deep") + _field(2, b"Placeholder") + _field(5, _field(1, b"dtype") + _field(2, b"\x30\x01"))
            + _field(5, _field(1, b"f") + _field(2, nested)))
    return base + _field(1, node), fmt, f"function attribute {depth} levels deep, binary"


BYTE_MUTATIONS = {f.__name__: f for f in (truncated, random_bytes, deep_nesting)}


# ============================================================================ cases
@dataclass
class Case:
    category: str
    number: int
    description: str
    data: bytes = field(repr=False)  # the file's content
    suffix: str
    graph: graph_pb2.GraphDef | None = field(default=None, repr=False)  # the spoilt graph (graph mutations)

    @property
    def label(self) -> str:
        return f"{self.category} #{self.number} ({self.description[:150]})"


def _graph_case(graphs, category: str, number: int) -> Case:
    rng = random.Random(f"{SEED}:{category}:{number}")
    names = sorted(graphs)
    rng.shuffle(names)
    for name in names:  # the first graph that has a node to spoil this way
        graph = graph_pb2.GraphDef()
        graph.CopyFrom(graphs[name])
        try:
            what = ALL_MUTATIONS[category](graph, rng)
        except (IndexError, ValueError):
            continue
        fmt = rng.choice(["pb", "pbtxt"])
        return Case(category, number, f"{name}: {what}", _as(graph, fmt), fmt, graph)
    raise AssertionError(f"no graph can be spoilt by {category}")


@pytest.fixture(scope="module")
def cases(graphs) -> list[Case]:
    out = [_graph_case(graphs, c, k) for c in GRAPH_CATEGORIES for k in range(CASES_PER_CATEGORY)]
    for category in BYTE_CATEGORIES:
        for k in range(CASES_PER_CATEGORY):
            data, fmt, what = BYTE_MUTATIONS[category](graphs, random.Random(f"{SEED}:{category}:{k}"))
            out.append(Case(category, k, what, data, fmt))
    return out


@pytest.fixture(scope="module")
def registry():
    return load_registry(autoload=False)


@pytest.fixture(scope="module")
def deadline() -> float:
    """When the module's time budget runs out (counted from its first test)."""
    return time.monotonic() + TOTAL_SECONDS


@pytest.fixture(scope="module", autouse=True)
def case_counts(request) -> Iterator[None]:
    """Print how many cases each interface ran per category, and how they ended."""
    yield
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        for key, outcomes in sorted(COUNTS.items()):
            ended = ", ".join(f"{n} {verdict}" for verdict, n in sorted(outcomes.items()))
            reporter.write_line(f"fuzz {key}: {sum(outcomes.values())} case(s): {ended}")


# ============================================================================ checks
class CaseTimeout(KeyboardInterrupt):
    """A case ran past its time limit (a KeyboardInterrupt: nothing may swallow it)."""


@contextmanager
def time_limit() -> Iterator[dict[str, bool]]:
    state = {"expired": False}

    def expire(signum: int, frame: object) -> None:
        state["expired"] = True
        raise CaseTimeout(f"ran longer than {CASE_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    faulthandler.dump_traceback_later(3 * CASE_SECONDS, exit=True, file=sys.__stderr__)  # stuck in native code
    try:
        yield state
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _digest(data: bytes | graph_pb2.GraphDef) -> str:
    raw = data if isinstance(data, bytes) else data.SerializeToString(deterministic=True)
    return hashlib.sha256(raw).hexdigest()


def _where(exc: BaseException) -> str:
    """The innermost frame of the project a traceback passed through."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/scopefusion/" in f.filename]
    if not frames:
        return "outside scopefusion"
    f = frames[-1]
    return f"{f.filename[f.filename.rindex('/scopefusion/') + 1:]}:{f.lineno} in {f.name}"


def import_problem(graph_def: graph_pb2.GraphDef) -> str | None:
    """Why TensorFlow does not import ``graph_def`` into a fresh graph, or None."""
    try:
        with tf.Graph().as_default():
            tf.compat.v1.import_graph_def(graph_def, name="")
    except Exception as exc:  # noqa: BLE001 - any refusal of TensorFlow's
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return None


def written_problem(path: Path) -> str | None:
    """Why the graph written to ``path`` cannot be read back and imported, or None."""
    output = graph_pb2.GraphDef()
    try:
        output.ParseFromString(path.read_bytes())
    except Exception as exc:  # noqa: BLE001 - protobuf's refusal
        return f"the output cannot be read back: {type(exc).__name__}: {str(exc)[:200]}"
    problem = import_problem(output)
    return problem and f"the output does not import: {problem}"


@dataclass
class Run:
    """Outcomes of one interface over the cases."""

    interface: str
    deadline: float
    failures: list[str] = field(default_factory=list)

    def record(self, case: Case, verdict: str, problem: str | None = None) -> None:
        COUNTS.setdefault(f"{self.interface} {case.category}", Counter())[verdict] += 1
        if problem is not None:
            self.failures.append(f"{self.interface} {case.label}: {problem}")

    def within_budget(self, done: int) -> bool:
        if time.monotonic() < self.deadline:
            return True
        self.failures.append(f"{self.interface}: the total budget of {TOTAL_SECONDS} s ran out after {done} cases")
        return False

    def check(self) -> None:
        shown = "\n".join(self.failures[:20])
        more = f"\n... and {len(self.failures) - 20} more" if len(self.failures) > 20 else ""
        if self.failures:
            pytest.fail(f"{len(self.failures)} failing case(s):\n{shown}{more}", pytrace=False)


# ============================================================================ the tests
def _also(problem: str | None, happened: bool, what: str) -> str | None:
    """``problem``, and ``what`` when it ``happened``."""
    if not happened:
        return problem
    return f"{problem}; {what}" if problem else what


def _write(case: Case, directory: Path) -> Path:
    path = directory / f"{case.category}_{case.number}.{case.suffix}"
    path.write_bytes(case.data)
    return path


def test_fuzzed_graphs_through_the_api(deadline, cases, registry, tmp_path):
    """``fuse`` on each spoilt GraphDef (a file for the byte cases): refused with a
    ScopeFusionError, or fused into a graph TensorFlow imports; the input stays as it was."""
    run = Run("api", deadline)
    for done, case in enumerate(cases):
        if not run.within_budget(done):
            break
        target = case.graph if case.graph is not None else str(_write(case, tmp_path))
        before = _digest(case.graph if case.graph is not None else case.data)
        verdict, problem = "accepted", None
        try:
            with time_limit():
                try:
                    result = scopefusion.fuse(target, emit="tf", registry=registry)
                except scopefusion.ScopeFusionError as exc:
                    verdict = "refused"
                    problem = None if str(exc).strip() else "refused with an empty message"
                except Exception as exc:  # noqa: BLE001 - what the test is looking for
                    verdict, problem = "crashed", f"{type(exc).__name__} at {_where(exc)}: {str(exc)[:300]}"
                else:
                    problem = import_problem(result.graph_def)
                    problem = problem and f"accepted, but the output does not import: {problem}"
        except CaseTimeout as exc:
            verdict, problem = "hung", f"{exc} (stopped at {_where(exc)})"
        after = _digest(case.graph if case.graph is not None else Path(target).read_bytes())
        run.record(case, verdict, _also(problem, after != before, "the input was changed"))
    run.check()


def test_fuzzed_files_through_the_command_line(deadline, cases, tmp_path, capsys, monkeypatch):
    """``scopefusion run FILE -o OUT --emit tf`` (in-process): exit 0 and an importable
    output, or exactly one ``scopefusion: error:`` line, a non-zero status and no output."""
    monkeypatch.setenv(NO_AUTOLOAD_ENV, "1")
    run = Run("cli", deadline)
    for done, case in enumerate(cases):
        if not run.within_budget(done):
            break
        path, out = _write(case, tmp_path), tmp_path / f"out_{case.category}_{case.number}.pb"
        capsys.readouterr()
        status, problem = None, None
        try:
            with time_limit() as limit:
                status = main(["run", str(path), "-o", str(out), "--emit", "tf"])
        except CaseTimeout as exc:
            limit = {"expired": True}
            problem = f"{exc} (stopped at {_where(exc)})"
        err = capsys.readouterr().err.strip().splitlines()
        if limit["expired"]:
            verdict, problem = "hung", problem or f"ran longer than {CASE_SECONDS} s"
        elif status == 0:
            verdict, problem = "accepted", written_problem(out)
        else:
            verdict = "refused"
            if len(err) != 1 or not err[0].startswith("scopefusion: error:"):
                problem = f"exit {status} with {len(err)} line(s) on stderr: {err[:3]}"
            elif "run with --debug for a traceback" in err[0]:
                verdict, problem = "crashed", f"an unexpected failure: {err[0][:400]}"
            problem = _also(problem, out.exists(), "an output was written")
        run.record(case, verdict, _also(problem, path.read_bytes() != case.data, "the input file was changed"))
    run.check()


def test_a_few_fuzzed_files_through_a_real_subprocess(deadline, cases, tmp_path):
    """The installed command, as a user runs it, on one case of a few categories."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as in a user's shell
    env[NO_AUTOLOAD_ENV] = "1"
    run = Run("subprocess", deadline)
    wanted: dict[str, Callable[[Case], bool]] = {
        "port_out_of_range": lambda c: True, "random_bytes": lambda c: True, "deep_scope": lambda c: True,
        "deep_nesting": lambda c: c.suffix == "pbtxt" and int(c.description.split()[2]) >= 500,  # a RecursionError
        # what killed the process inside TensorFlow: a recursive function, a constant's dtype
        "broken_library": lambda c: c.description.endswith("library: self"),
        "const_tensor": lambda c: c.description.endswith("tensor dtype"),
    }
    picked = [next(c for c in cases if c.category == cat and keep(c)) for cat, keep in wanted.items()]
    for done, case in enumerate(picked[:SUBPROCESS_CASES]):
        if not run.within_budget(done):
            break
        path, out = _write(case, tmp_path), tmp_path / f"out_{case.category}.pb"
        command = [sys.executable, "-m", "scopefusion.cli", "run", str(path), "-o", str(out), "--emit", "tf"]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=4 * CASE_SECONDS)
        except subprocess.TimeoutExpired:
            run.record(case, "hung", f"ran longer than {4 * CASE_SECONDS} s")
            continue
        err = proc.stderr.strip().splitlines()
        if proc.returncode == 0:
            verdict, problem = "accepted", written_problem(out)
        else:
            verdict = "refused"
            one_line = len(err) == 1 and err[0].startswith("scopefusion: error:") and "--debug" not in err[0]
            problem = None if one_line else f"exit {proc.returncode}, stderr: {err[:4]}"
            problem = _also(problem, out.exists(), "an output was written")
        run.record(case, verdict, _also(problem, path.read_bytes() != case.data, "the input file was changed"))
    run.check()
