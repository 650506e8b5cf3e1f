"""Checks of a GraphDef against what TensorFlow accepts, made when a graph is read.

:class:`GraphIndex` refuses duplicate names, inputs naming no node and cycles; this
module refuses what would still make TensorFlow reject the graph later, node by node:

* a node without an op type, or with a name TensorFlow does not accept;
* an input reading an output port its producer does not have (outputs are counted
  as :mod:`.output_ports` counts them), or a data input listed after a control input;
* for ops of TensorFlow's registry, an attribute whose value is of another kind than
  the op declares (an int where a dtype is expected ...), an invalid dtype, a value
  outside the allowed ones or below the minimum, a tensor whose shape is undefined or
  too large, and a required attribute missing;
* an attribute value nested deeper than protobuf reads (:data:`MAX_NESTING`);
* and, checked against TensorFlow's op definitions (``definitions``, as :func:`validate_graph`
  checks): input counts and edge dtypes (:mod:`.edge_checks`, typed once per attribute
  signature by :mod:`.op_typing`), constants against their dtype and shape, shapes with a
  dimension below -1, colocation with unknown nodes, function attributes naming no function,
  device strings and versions (:mod:`.graph_checks`) and the function library
  (:mod:`.library_checks`: recursion, which kills TensorFlow's import, among others).

Two passes over the nodes (their own fields, then their inputs), each linear, and most of
each done once for many nodes.  Names are matched all at once (joined by newlines), name by
name only to tell which are wrong.  Op definitions are looked up once per op type, output
counts once per producer read, and repeated attribute values judged once.  Given the bytes a
graph was read from, :mod:`.wire_view` reads them again for each node's attribute signature
(its op type and attributes, tensor contents left out), and each signature is judged on one
of its nodes; without them (a text file), a node holding the same serialized attributes as an
earlier clean node of its type is clean, and a graph built in memory is judged node by node.
The nodes' names, inputs and devices come from the native scan of those bytes where it read
them (:mod:`.graph_scan`), else from :mod:`.wire_view` (inputs and devices) and the message.
Inputs are looked at one by one only in the nodes holding one that does not plainly name a
node with an output, found among the graph's distinct inputs.  TensorFlow is imported on the
first call.
"""
from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate, chain, compress
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import GraphValidationError
from .attr_rules import (
    AttrRule,
    OpRules,
    attr_problem,
    attr_signature,
    op_rules,
    shorten,
    valid_dtypes,
)
from .edge_checks import check_edges
from .graph_checks import const_problems, content_sizes, device_problem, shape_problem, version_problems
from .graph_scan import GraphColumns
from .index import no_gc
from .library_checks import called_functions, library_problems, missing_function
from .op_typing import NodeTypes, node_types
from .output_ports import output_count
from .protos import is_repeated
from .vocabulary import invalid_node_names, parse_input
from .wire_view import inputs_and_devices, node_signatures

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

#: Protobuf reads messages nested at most this many levels below the GraphDef (its
#: nodes are level 1, an attribute's value level 3); deeper graphs cannot be read back.
MAX_NESTING = 100
_ATTR_LEVEL = 3  # GraphDef > NodeDef > attr map entry > AttrValue
_LIBRARY_ATTR_LEVEL = 5  # GraphDef > library > FunctionDef > NodeDef > entry > AttrValue
_MAX_NODES_SHOWN = 5
_MAX_PROBLEMS_PER_NODE = 3
_FIRST_TRIES = 64  # nodes of a type looked up by attribute signature before the hit rate decides
_SCALAR_FIELDS = frozenset({"s", "i", "f", "b", "type"})
_NESTING_KINDS = frozenset({"func", "tensor", "list"})
_NAME, _OP, _INPUT, _DEVICE = attrgetter("name"), attrgetter("op"), attrgetter("input"), attrgetter("device")
_CONST_OPS = frozenset({"Const", "HostConst"})


def _message_fields(descriptor: Any, cache: dict[Any, list[tuple[str, bool, bool]]]) -> list[tuple[str, bool, bool]]:
    """The message-typed fields of a message type: (name, repeated, map of messages)."""
    fields = cache.get(descriptor)
    if fields is None:
        fields = []
        for fd in descriptor.fields:
            if fd.message_type is None:
                continue
            if fd.message_type.GetOptions().map_entry:
                if fd.message_type.fields_by_name["value"].message_type is not None:
                    fields.append((fd.name, True, True))
            else:
                fields.append((fd.name, is_repeated(fd), False))
        cache[descriptor] = fields
    return fields


def nested_too_deep(message: Any, level: int, cache: dict[Any, Any]) -> bool:
    """Whether a message at nesting ``level`` holds messages deeper than :data:`MAX_NESTING`
    (a map's entry counts as a level, as protobuf counts it)."""
    stack = [(message, level)]
    while stack:
        msg, depth = stack.pop()
        if depth > MAX_NESTING:
            return True
        for name, repeated, is_map in _message_fields(msg.DESCRIPTOR, cache):
            if is_map:
                stack.extend((v, depth + 2) for v in getattr(msg, name).values())
            elif repeated:
                stack.extend((v, depth + 1) for v in getattr(msg, name))
            elif msg.HasField(name):
                stack.append((getattr(msg, name), depth + 1))
    return False


def _may_nest(value: Any) -> bool:
    """Only functions and tensors holding variants nest without bound."""
    kind = value.WhichOneof("value")
    if kind == "func":
        return True
    if kind == "tensor":
        return len(value.tensor.variant_val) > 0
    return kind == "list" and (len(value.list.func) > 0 or len(value.list.tensor) > 0)


class _Validator:
    """Two passes over a graph's nodes (their own fields, then their inputs), collecting
    what is wrong with each node."""

    def __init__(self, graph_def: "GraphDef", parsed: bool = False, serialized: bytes | None = None,
                 columns: GraphColumns | None = None) -> None:
        self.graph_def = graph_def
        self.parsed = parsed  # read from bytes: no deeper than protobuf reads, so each node serializes safely
        self.serialized = serialized  # the bytes the graph was parsed from, when known
        self.nodes: Sequence["NodeDef"] = graph_def.node  # no list: a node's object is made when it is read
        if columns is not None and (len(columns) != len(self.nodes) or None in (columns.texts, columns.devices,
                                                                                 columns.counts)):
            columns = None
        self.columns = columns  # the graph's columns as scanned from those bytes, when known
        self.names: list[str] = list(map(_NAME, self.nodes)) if columns is None else columns.names
        self.functions = {f.signature.name: len(f.signature.output_arg) for f in graph_def.library.function}
        self.signatures = {f.signature.name: f.signature for f in graph_def.library.function}
        self.name_set: set[str] | None = None  # the node names, made when a colocation names one
        self.types: list[NodeTypes] = []  # each node's, in graph order
        self.flat: list[str] | None = None  # every node's inputs, end to end
        self.counts: list[int] | None = None  # each node's number of inputs, when counted
        self.devices: set[str] | None = None  # the distinct devices, when read from the bytes
        self.consts: list[int] | None = None  # the positions of the constants, when known
        self.signature_list: list[bytes] | None = None  # each node's attribute signature, when read
        self.content_lengths: list[int] | None = None  # each node's value tensor's raw contents (-1: ask), when read
        self.rules: dict[str, OpRules] = {"": OpRules()}
        self.dtypes = valid_dtypes()
        self.fields: dict[Any, Any] = {}
        self.found: dict[int, list[str]] = {}  # node position -> its problems
        self.definitions = False  # whether the op-definition checks are made too

    def problems(self, definitions: bool = False) -> list[tuple[str, list[str]]]:
        """``(node label, problems)`` of every node that has any, in graph order.  A node's
        problems come in this order: its name, its op type, its attributes, its inputs.
        ``definitions``: also what TensorFlow's op definitions and import rules refuse (input
        counts and dtypes, constants, function calls, colocation, output shapes), then the
        graph's versions, devices and function library."""
        self.definitions = definitions
        for i in invalid_node_names(self.names):
            self.report(i, "its name is not one TensorFlow accepts (letters, digits and . _ - / >, "
                           "starting with a letter, digit or '.', no empty scope)")
        read = None if self.serialized is None else self.read_signatures(self.serialized)
        signatures = None if read is None else read[0]
        if signatures is not None and len(signatures) == len(self.nodes):
            self.signature_list, self.content_lengths = read  # type: ignore[misc]  # read is not None here
            silent = self.check_by_signature(signatures)
        else:
            silent = self.check_by_op()
        self.check_inputs(silent)
        if definitions:
            self.check_edges()
            self.check_consts()
        problems = [(f"node {shorten(self.names[i])} ({self.nodes[i].op or 'no op'})", found)
                    for i, found in sorted(self.found.items())]
        if definitions:
            problems += self.graph_problems()
        for function in self.graph_def.library.function:
            for inner in function.node_def:
                if any(_may_nest(v) and nested_too_deep(v, _LIBRARY_ATTR_LEVEL, self.fields)
                       for v in inner.attr.values()):
                    problems.append((f"node {shorten(inner.name)} of function {shorten(function.signature.name)}",
                                     [f"an attribute is nested more than {MAX_NESTING} levels deep"]))
        return problems

    def read_signatures(self, data: bytes) -> tuple[list[bytes], list[int] | None] | None:
        """Each node's attribute signature (and constants' content lengths) read from ``data``:
        through the node byte ranges of the columns when they are known."""
        columns = self.columns
        if columns is None or columns.offsets is None:
            return node_signatures(data)
        return node_signatures(data, columns.offsets, columns.lengths)

    def report(self, position: int, problem: str) -> None:
        self.found.setdefault(position, []).append(problem)

    def rules_of(self, op: str) -> OpRules:
        rules = self.rules.get(op)
        if rules is None:
            rules = self.rules[op] = op_rules(op, self.functions)
        return rules

    def check_by_signature(self, signatures: list[bytes]) -> list[int]:
        """Op types and attributes, judged once per attribute signature (:mod:`.wire_view`):
        a node whose signature is another's has the same op type and problems.  Returns the
        positions of the nodes whose op type tells no output count above zero."""
        nodes, problems_of, silent = self.nodes, {}, set()
        types_of: dict[bytes, NodeTypes] = {}
        consts = set()
        for signature, i in dict(zip(signatures, range(len(nodes)), strict=True)).items():
            op = nodes[i].op
            if op in _CONST_OPS:
                consts.add(signature)
            rules = self.rules_of(op)
            types_of[signature] = node_types(nodes[i], rules.op_def, self.signatures)
            problems = ([] if op else ["it has no op type"]) + self.attr_problems(nodes[i], rules)
            if problems:
                problems_of[signature] = problems
            if not rules.outputs:
                silent.add(signature)
        for i in compress(range(len(nodes)), map(problems_of.__contains__, signatures)) if problems_of else ():
            self.found.setdefault(i, []).extend(problems_of[signatures[i]])
        self.types = list(map(types_of.__getitem__, signatures))
        self.consts = list(compress(range(len(nodes)), map(consts.__contains__, signatures))) if consts else []
        return list(compress(range(len(nodes)), map(silent.__contains__, signatures))) if silent else []

    def check_by_op(self) -> list[int]:
        """Op types and attributes, node by node within each op type (see
        :meth:`check_attrs_of_type`).  Returns what :meth:`check_by_signature` returns."""
        by_op: dict[str, list[int]] = {}
        for i, op in enumerate(map(_OP, self.nodes)):
            positions = by_op.get(op)
            if positions is None:
                by_op[op] = [i]
            else:
                positions.append(i)
        for i in by_op.get("", ()):
            self.report(i, "it has no op type")
        for op, positions in by_op.items():
            self.check_attrs_of_type(positions, self.rules_of(op))
        self.types = self.types_by_node()
        return sorted(i for op, positions in by_op.items() if not self.rules[op].outputs for i in positions)

    def types_by_node(self) -> list[NodeTypes]:
        """Each node's :class:`NodeTypes`, told once per op type and attributes."""
        memo: dict[tuple[str, bytes], NodeTypes] = {}
        out = []
        for node in self.nodes:
            key = (node.op, attr_signature(node, deterministic=True))
            types = memo.get(key)
            if types is None:
                types = memo[key] = node_types(node, self.rules_of(node.op).op_def, self.signatures)
            out.append(types)
        return out

    def check_attrs_of_type(self, positions: list[int], rules: OpRules) -> None:
        """The attributes of the nodes of one op type.  Such nodes mostly repeat the same
        attributes: in a parsed graph, a node whose attribute signature was found clean before is
        clean too.  Once fewer than one node in four is found so (counted after the first
        ``_FIRST_TRIES``), the type's remaining nodes are judged attribute by attribute, as every
        node of a graph built in memory is (it may nest deeper than serializing goes)."""
        nodes, clean = self.nodes, rules.clean
        for k, i in enumerate(positions):
            if not self.parsed or (k >= _FIRST_TRIES and rules.hits * 4 < k):
                for j in positions[k:]:
                    for problem in self.attr_problems(nodes[j], rules):
                        self.report(j, problem)
                return
            signature = attr_signature(nodes[i])
            if signature in clean:
                rules.hits += 1
                continue
            problems = self.attr_problems(nodes[i], rules)
            for problem in problems:
                self.report(i, problem)
            if not problems:
                clean.add(signature)

    def attr_problems(self, node: "NodeDef", rules: OpRules) -> list[str]:
        """What is wrong with a node's attributes."""
        attrs = node.attr
        found = []
        missing = [key for key in rules.required if key not in attrs]
        if missing:
            found.append(f"it lacks the required attribute(s) {', '.join(repr(k) for k in missing)} "
                         f"({', '.join(rules.attrs[k].declared for k in missing)})")
        declared, seen = rules.attrs, rules.seen
        for key in attrs:
            value = attrs[key]
            kind = value.WhichOneof("value")
            rule = declared.get(key)
            if rule is not None:
                if kind in _SCALAR_FIELDS or kind == "tensor":  # values repeat: judged once per op type
                    memo = (key, kind, value.tensor.tensor_shape.SerializeToString() if kind == "tensor"
                            else getattr(value, kind))  # of a tensor, only its shape is judged
                    problem = seen[memo] if memo in seen else seen.setdefault(
                        memo, attr_problem(key, value, rule, self.dtypes))
                else:
                    problem = attr_problem(key, value, rule, self.dtypes)
                if problem is not None:
                    found.append(problem)
            if kind in _NESTING_KINDS and _may_nest(value) and nested_too_deep(value, _ATTR_LEVEL, self.fields):
                found.append(f"attribute {key!r} is nested more than {MAX_NESTING} levels deep")
            elif not self.definitions:
                continue
            elif rule is not None and (kind == "func" or kind == "list" and len(value.list.func) > 0):
                found.extend(self.call_problems(key, value))
            elif key == "_class" and kind == "list":
                found.extend(self.colocation_problems(value))
            elif key == "_output_shapes" and kind == "list" or kind == "shape" and rule is not None:
                problem = shape_problem(key, value.list.shape if kind == "list" else [value.shape])
                if problem is not None:
                    found.append(problem)
        return found

    def call_problems(self, key: str, value: Any) -> list[str]:
        """A function attribute naming a function the library does not define."""
        return [f"attribute {key!r} calls function {shorten(name)}, which the library does not define"
                for name in called_functions(value) if missing_function(name, self.functions)][:1]

    def colocation_problems(self, value: Any) -> list[str]:
        """A colocation (``loc:@NAME``) with a node the graph does not have."""
        if self.name_set is None:
            self.name_set = set(self.names)
        return [f"it is to be colocated with {shorten(text)}, which is no node of the graph"
                for text in (s.decode("utf-8", "replace") for s in value.list.s)
                if text.startswith("loc:@") and text[5:] not in self.name_set][:1]

    def check_inputs(self, silent: list[int]) -> None:
        """Every data input reads a port its producer has, and comes before the control inputs.
        An input that plainly names a node whose op type tells it has outputs reads output 0 of
        it, which it has: only the nodes with another input are looked at one by one (found
        among the distinct inputs of the graph, then in the list of all inputs).  ``silent``:
        the positions of the nodes whose op type tells no output count above zero."""
        nodes = self.nodes
        flat = None
        if self.columns is not None and self.columns.devices is not None:
            flat, self.devices, self.counts = self.columns.texts, set(self.columns.devices), self.columns.counts
        read = None if self.serialized is None or flat is not None else inputs_and_devices(self.serialized)
        if read is not None:
            flat, self.devices = read
        if flat is None:
            flat = list(chain.from_iterable(map(_INPUT, nodes)))
        self.flat = flat
        odd, index = self.odd_inputs(flat, silent)
        if not odd:
            return
        if self.counts is None:
            self.counts = list(map(len, map(_INPUT, nodes)))
        ends = list(accumulate(self.counts))
        if ends[-1] != len(flat):  # not seen: the same bytes hold the same inputs
            flat = self.flat = list(chain.from_iterable(map(_INPUT, nodes)))
            odd, index = self.odd_inputs(flat, silent)
        owners = {bisect_right(ends, k) for k in compress(range(len(flat)), map(odd.__contains__, flat))}
        counts: dict[int, int | None] = {}
        for i in sorted(owners):
            self.check_node_inputs(i, nodes[i].input, index, counts)

    def check_edges(self) -> None:
        """Input counts and edge dtypes against what each op takes (:mod:`.edge_checks`)."""
        if not self.nodes or not self.types:
            return
        counts = self.counts if self.counts is not None else list(map(len, map(_INPUT, self.nodes)))
        flat = self.flat
        if flat is None or sum(counts) != len(flat):
            flat = list(chain.from_iterable(map(_INPUT, self.nodes)))
        check_edges(self.nodes, self.names, self.types, counts, flat, self.report,
                    None if self.columns is None else self.columns.index)

    def check_consts(self) -> None:
        """Each constant's tensor against its dtype and shape."""
        nodes = self.nodes
        positions = self.consts
        if positions is None:
            positions = list(compress(range(len(nodes)), map(_CONST_OPS.__contains__, map(_OP, nodes))))
        # a signature's dtype and shape tell the bytes of raw contents its constants hold; a scalar
        # is mostly written in its typed field instead (a splat of one value is a scalar's too)
        sizes: dict[bytes, tuple[int, ...]] = {}
        signatures, lengths = self.signature_list, self.content_lengths
        for i in positions:
            if signatures is not None:
                fine = sizes.get(signatures[i])
                if fine is None:
                    fine = sizes[signatures[i]] = content_sizes(nodes[i])
                length = -1 if lengths is None else lengths[i]
                if length < 0 and fine:
                    length = len(nodes[i].attr["value"].tensor.tensor_content)
                if length in fine:
                    continue
            for problem in const_problems(nodes[i]):
                self.report(i, problem)

    def graph_problems(self) -> list[tuple[str, list[str]]]:
        """The graph's versions, devices and function library."""
        graph = self.graph_def
        out = []
        versions = version_problems(graph.versions)
        if versions:
            out.append(("the graph's versions", versions))
        devices = self.devices if self.devices is not None else set(map(_DEVICE, self.nodes))
        devices.discard("")
        bad = {device: problem for device in devices if (problem := device_problem(device)) is not None}
        if bad:
            i = next(i for i, node in enumerate(self.nodes) if node.device in bad)
            out.append((f"node {shorten(self.names[i])} ({self.nodes[i].op or 'no op'})",
                        [bad[self.nodes[i].device]]))
        out += library_problems(graph.library)
        return out

    def odd_inputs(self, flat: list[str], silent: list[int]) -> tuple[set[str], dict[str, int]]:
        """The distinct inputs that do not plainly name a node with outputs (a repeated name
        stands for its last node), and the position of each name when there are any."""
        names = self.names
        texts = set(flat)
        odd = texts.difference(names)
        read_silent = texts.intersection([names[i] for i in silent]) if silent else ()
        if not odd and not read_silent:
            return odd, {}
        index = dict(zip(names, range(len(names)), strict=True))
        silent_set = set(silent)
        odd.update(name for name in read_silent if index[name] in silent_set)
        return odd, index

    def output_count_of(self, producer: int, counts: dict[int, int | None]) -> int | None:
        """How many outputs node ``producer`` has (None: cannot tell), counted once."""
        if producer not in counts:
            node = self.nodes[producer]
            outputs = self.rules[node.op].outputs
            counts[producer] = output_count(node, self.functions) if outputs is None else outputs
        return counts[producer]

    def check_node_inputs(self, i: int, texts: Sequence[str], index: dict[str, int],
                          counts: dict[int, int | None]) -> None:
        """The inputs of node ``i``, one by one."""
        nodes = self.nodes
        after_control = False
        for slot, text in enumerate(texts):
            producer, name, port = index.get(text), text, 0
            if producer is None:
                if text[:1] == "^":
                    after_control = True
                    continue
                name, port = parse_input(text)
                producer = index.get(name)
            if after_control:
                self.report(i, f"data input {slot} {shorten(text)} comes after a control input")
            if producer is None:
                continue  # an input naming no node: GraphIndex reports it
            count = self.output_count_of(producer, counts)
            if count is not None and port >= count:
                self.report(i, f"input {slot} {shorten(text)} reads output {port} of {shorten(name)} "
                               f"({nodes[producer].op or 'no op'}), which has {count} "
                               f"output{'' if count == 1 else 's'}")


def describe(problems: list[tuple[str, list[str]]]) -> str:
    """One line naming the first nodes and what is wrong with each."""
    parts = []
    for label, found in problems[:_MAX_NODES_SHOWN]:
        more = len(found) - _MAX_PROBLEMS_PER_NODE
        text = ", ".join(found[:_MAX_PROBLEMS_PER_NODE]) + (f" and {more} more" if more > 0 else "")
        parts.append(f"{label}: {text}")
    rest = len(problems) - _MAX_NODES_SHOWN
    return "; ".join(parts) + (f"; and {rest} more node(s)" if rest > 0 else "")


def validate_graph(graph_def: "GraphDef", source: str = "", *, parsed: bool = False,
                   serialized: bytes | None = None, columns: GraphColumns | None = None) -> None:
    """Refuse a graph TensorFlow would not accept (see the module's documentation):
    :class:`GraphValidationError` on one line, naming up to five nodes, each with
    what is wrong with it; ``source`` (a file name) starts the message.  ``parsed``: the
    graph was just parsed from bytes, so that nothing in it nests deeper than protobuf
    reads, and nodes repeating the attributes of an earlier one are judged at once.
    ``serialized``: the bytes ``graph_def`` was parsed from (binary), read again for the
    nodes' attribute signatures and inputs; the result is the same without them.  ``columns``: the
    graph's columns as :mod:`.graph_scan` read them from those bytes (names, inputs, devices)."""
    with no_gc():  # many small objects, none of them cyclic
        validator = _Validator(graph_def, parsed or serialized is not None, serialized, columns)
        problems = validator.problems(definitions=True)
    if problems:
        prefix = f"{source}: " if source else ""
        raise GraphValidationError(f"{prefix}invalid graph: {describe(problems)}")


__all__ = ["MAX_NESTING", "AttrRule", "OpRules", "attr_problem", "nested_too_deep", "op_rules", "validate_graph"]
