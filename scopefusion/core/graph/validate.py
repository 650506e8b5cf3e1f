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
* an attribute value nested deeper than protobuf reads (:data:`MAX_NESTING`).

Two passes over the nodes (their own fields, then their inputs), each linear: op
definitions are looked up once per op type, output counts once per producer read, and
repeated attribute values judged once.  Most nodes cost less still: in a graph parsed
from bytes, a node holding the same attributes as an earlier clean node of its type (the
same serialized attributes) is clean, and a node whose inputs all plainly name nodes
that have an output needs no look at its inputs one by one.  TensorFlow is imported on
the first call.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import GraphValidationError
from .index import no_gc
from .output_ports import output_count
from .protos import data_type_values, message_class
from .tf_ops import tensorflow_op_def
from .vocabulary import dtype_name, is_valid_node_name, parse_input

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
_MAX_TEXT = 80
_MAX_ELEMENTS = 2**63 - 1  # a tensor holds at most this many elements
_PER_NODE = -1  # an output count that each node's attributes tell
_FIRST_TRIES = 64  # nodes of a type looked up by attribute signature before the hit rate decides

#: How an AttrValue holding each kind is spoken of, by its field name.
_KIND_WORDS = {"s": "a string", "i": "an int", "f": "a float", "b": "a bool", "type": "a dtype",
               "shape": "a shape", "tensor": "a tensor", "func": "a function", "placeholder": "a placeholder"}
_LIST_WORDS = {"s": "strings", "i": "ints", "f": "floats", "b": "bools", "type": "dtypes", "shape": "shapes",
               "tensor": "tensors", "func": "functions"}
_SCALAR_FIELDS = frozenset({"s", "i", "f", "b", "type"})
_NESTING_KINDS = frozenset({"func", "tensor", "list"})
#: The field of an AttrValue (and of its list) holding each declared type.
_FIELD_OF_TYPE = {"string": "s", "int": "i", "float": "f", "bool": "b", "type": "type", "shape": "shape",
                  "tensor": "tensor", "func": "func"}


@dataclass(frozen=True)
class AttrRule:
    """What an op declares for one attribute."""

    declared: str  # the op def's type, e.g. "int" or "list(type)"
    field: str  # the AttrValue (or list) field its values are held in
    is_list: bool
    allowed: frozenset[Any] | None  # allowed dtypes or strings
    minimum: int | None  # of an int's value, or of a list's length


@dataclass
class OpRules:
    """What the checks need to know of one op type, looked up once per type."""

    attrs: dict[str, AttrRule] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    outputs: int | None = None  # the same for every node of the type; None: count per node
    seen: dict[tuple[str, str, Any], str | None] = field(default_factory=dict)  # values judged, by attribute
    clean: set[bytes] = field(default_factory=set)  # attribute signatures found without a problem
    hits: int = 0  # nodes found clean by their signature


#: Tags of a serialized NodeDef's name, op, input and device fields (numbers 1 to 4, length-delimited).
_HEAD_TAGS = frozenset({0x0A, 0x12, 0x1A, 0x22})


def attr_signature(node: "NodeDef") -> bytes:
    """The serialized node without its leading name, op, input and device fields: bytes that hold
    its attributes, so that two nodes with the same signature hold the same attribute values."""
    data = node.SerializeToString()
    pos, end = 0, len(data)
    while pos < end and data[pos] in _HEAD_TAGS:
        length = data[pos + 1]
        pos += 2
        if length >= 0x80:  # a length of more than one byte (a varint)
            length &= 0x7F
            shift = 7
            while True:
                byte = data[pos]
                pos += 1
                length |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
        pos += length
    return data[pos:]


def shorten(text: str) -> str:
    """``text`` quoted for a one-line message, its middle cut when it is long."""
    if len(text) > _MAX_TEXT:
        text = f"{text[:_MAX_TEXT // 2]}...{text[-_MAX_TEXT // 2:]}"
    return repr(text)


def _attr_rule(attr: Any) -> AttrRule:
    declared = attr.type
    is_list = declared.startswith("list(")
    element = declared[5:-1] if is_list else declared
    allowed = None
    if attr.HasField("allowed_values"):
        values = attr.allowed_values.list
        allowed = frozenset(values.type) if element == "type" else frozenset(values.s) if element == "string" else None
    return AttrRule(declared, _FIELD_OF_TYPE.get(element, element), is_list, allowed or None,
                    attr.minimum if attr.has_minimum else None)


def op_rules(op: str, functions: dict[str, int]) -> OpRules:
    """The rules of op type ``op``: its attributes when TensorFlow defines it (and no
    function of the graph's library takes its name), and its output count when
    that is the same for every node."""
    probe = message_class("NodeDef")(op=op)  # no attributes: a count that needs none is the type's
    rules = OpRules(outputs=output_count(probe, functions))
    op_def = None if op in functions else tensorflow_op_def(op)
    if op_def is not None:
        rules.attrs = {a.name: _attr_rule(a) for a in op_def.attr}
        rules.required = tuple(a.name for a in op_def.attr if not a.HasField("default_value"))
    return rules


def _valid_dtypes() -> frozenset[int]:
    return frozenset(v for v in data_type_values() if 0 < v < 100)  # no DT_INVALID, no ref types


def _list_fields(value: Any) -> list[str]:
    return [fd.name for fd, _ in value.list.ListFields()]


def attr_problem(key: str, value: Any, rule: AttrRule, dtypes: frozenset[int]) -> str | None:
    """What is wrong with attribute ``key`` holding ``value`` under ``rule``, or None."""
    kind = value.WhichOneof("value")
    held = _list_fields(value) if kind == "list" else []
    if rule.is_list:
        if kind not in ("list", None):
            return f"attribute {key!r} holds {_KIND_WORDS.get(kind, kind)}, the op declares {rule.declared}"
        if any(f != rule.field for f in held):
            other = next(f for f in held if f != rule.field)
            return f"attribute {key!r} holds a list of {_LIST_WORDS[other]}, the op declares {rule.declared}"
        items = list(getattr(value.list, rule.field)) if held else []
    else:
        if kind == "list" and held:
            return f"attribute {key!r} holds a list of {_LIST_WORDS[held[0]]}, the op declares {rule.declared}"
        if kind in (None, "list"):
            return f"attribute {key!r} holds no value, the op declares {rule.declared}"
        if kind != rule.field:
            return f"attribute {key!r} holds {_KIND_WORDS.get(kind, kind)}, the op declares {rule.declared}"
        items = [getattr(value, kind)]
    return _value_problem(key, items, rule, dtypes)


def _tensor_shape_problem(key: str, tensor: Any) -> str | None:
    """A tensor's shape must be fully defined and hold fewer than 2**63 elements."""
    shape = tensor.tensor_shape
    dims = [d.size for d in shape.dim]
    if shape.unknown_rank or any(d < 0 for d in dims):
        return f"attribute {key!r} holds a tensor of undefined shape {'?' if shape.unknown_rank else dims}"
    elements = 1
    for d in dims:
        elements *= d
    if elements > _MAX_ELEMENTS:
        return f"attribute {key!r} holds a tensor of shape {dims}, more than 2**63 - 1 elements"
    return None


def _value_problem(key: str, items: list[Any], rule: AttrRule, dtypes: frozenset[int]) -> str | None:
    if rule.field == "tensor":
        return next((p for p in (_tensor_shape_problem(key, t) for t in items) if p is not None), None)
    if rule.field == "type":
        bad = [t for t in items if t not in dtypes]
        if bad:
            return f"attribute {key!r} holds dtype enum {bad[0]}, which is no valid dtype"
    if rule.allowed is not None:
        bad = [t for t in items if t not in rule.allowed]
        if bad:
            shown = dtype_name(bad[0]) if rule.field == "type" else shorten(bad[0].decode("utf-8", "replace"))
            return f"attribute {key!r} holds {shown}, which the op does not allow"
    if rule.minimum is not None:
        count = len(items) if rule.is_list else items[0]
        if count < rule.minimum:
            if rule.is_list:
                return f"attribute {key!r} holds {count} value(s), the op wants at least {rule.minimum}"
            return f"attribute {key!r} holds the value {count}, the op's minimum is {rule.minimum}"
    return None


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
                repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
                fields.append((fd.name, repeated, False))
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

    def __init__(self, graph_def: "GraphDef", parsed: bool = False) -> None:
        self.graph_def = graph_def
        self.parsed = parsed  # read from bytes: no deeper than protobuf reads, so each node serializes safely
        self.nodes: list["NodeDef"] = list(graph_def.node)
        self.names: list[str] = [node.name for node in self.nodes]
        self.functions = {f.signature.name: len(f.signature.output_arg) for f in graph_def.library.function}
        self.rules: dict[str, OpRules] = {"": OpRules()}
        self.dtypes = _valid_dtypes()
        self.fields: dict[Any, Any] = {}
        self.found: dict[int, list[str]] = {}  # node position -> its problems

    def problems(self) -> list[tuple[str, list[str]]]:
        """``(node label, problems)`` of every node that has any, in graph order."""
        counts = self.check_nodes()
        self.check_inputs(counts)
        problems = [(f"node {shorten(self.names[i])} ({self.nodes[i].op or 'no op'})", found)
                    for i, found in sorted(self.found.items())]
        for function in self.graph_def.library.function:
            for inner in function.node_def:
                if any(_may_nest(v) and nested_too_deep(v, _LIBRARY_ATTR_LEVEL, self.fields)
                       for v in inner.attr.values()):
                    problems.append((f"node {shorten(inner.name)} of function {shorten(function.signature.name)}",
                                     [f"an attribute is nested more than {MAX_NESTING} levels deep"]))
        return problems

    def report(self, position: int, problem: str) -> None:
        self.found.setdefault(position, []).append(problem)

    def check_nodes(self) -> list[int | None]:
        """Names, op types and attributes; returns every node's output count when its op
        type tells it (``_PER_NODE``: the node's attributes do).  A node's problems come in
        that order: its name, its op type, its attributes."""
        for i, name in enumerate(self.names):
            if not is_valid_node_name(name):
                self.report(i, "its name is not one TensorFlow accepts (letters, digits and . _ - / >, "
                               "starting with a letter, digit or '.', no empty scope)")
        by_op: dict[str, list[int]] = {}
        ops = [node.op for node in self.nodes]
        for i, op in enumerate(ops):
            positions = by_op.get(op)
            if positions is None:
                by_op[op] = [i]
            else:
                positions.append(i)
        for i in by_op.get("", ()):
            self.report(i, "it has no op type")
        rules_of = self.rules
        for op, positions in by_op.items():
            rules = rules_of.get(op)
            if rules is None:
                rules = rules_of[op] = op_rules(op, self.functions)
            self.check_attrs_of_type(positions, rules)
        outputs = {op: _PER_NODE if rules.outputs is None else rules.outputs for op, rules in rules_of.items()}
        return [outputs[op] for op in ops]

    def check_attrs_of_type(self, positions: list[int], rules: OpRules) -> None:
        """The attributes of the nodes of one op type.  Such nodes mostly repeat the same
        attributes: in a parsed graph, a node whose attribute signature was found clean before is
        clean too; while too few nodes are found so, each node's attributes are judged one by one
        (and always in a graph built in memory, which may nest deeper than serializing goes)."""
        nodes, check, clean = self.nodes, self.check_attrs, rules.clean
        for k, i in enumerate(positions):
            if not self.parsed or (k >= _FIRST_TRIES and rules.hits * 4 < k):
                for j in positions[k:]:
                    check(j, nodes[j], rules)
                return
            signature = attr_signature(nodes[i])
            if signature in clean:
                rules.hits += 1
            elif not check(i, nodes[i], rules):
                clean.add(signature)

    def check_attrs(self, position: int, node: "NodeDef", rules: OpRules) -> bool:
        """Report what is wrong with a node's attributes; whether anything is."""
        attrs = node.attr
        found = False
        missing = [key for key in rules.required if key not in attrs]
        if missing:
            found = True
            self.report(position, f"it lacks the required attribute(s) {', '.join(repr(k) for k in missing)} "
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
                    found = True
                    self.report(position, problem)
            if kind in _NESTING_KINDS and _may_nest(value) and nested_too_deep(value, _ATTR_LEVEL, self.fields):
                found = True
                self.report(position, f"attribute {key!r} is nested more than {MAX_NESTING} levels deep")
        return found

    def check_inputs(self, counts: list[int | None]) -> None:
        """Every data input reads a port its producer has, and comes before the control inputs."""
        index = {name: i for i, name in enumerate(self.names)}
        # A node whose inputs all name nodes plainly reads output 0 of each: nothing to check when each
        # producer is known to have an output (or cannot tell).
        has_output = [count is None or count > 0 for count in counts]
        plain = {name for name, i in index.items() if has_output[i]}
        for i, node in enumerate(self.nodes):
            texts = node.input
            if texts and not plain.issuperset(texts):
                self.check_node_inputs(i, texts, index, counts)

    def check_node_inputs(self, i: int, texts: Sequence[str], index: dict[str, int],
                          counts: list[int | None]) -> None:
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
            count = counts[producer]
            if count == _PER_NODE:
                count = counts[producer] = output_count(nodes[producer], self.functions)
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


def validate_graph(graph_def: "GraphDef", source: str = "", *, parsed: bool = False) -> None:
    """Refuse a graph TensorFlow would not accept (see the module's documentation):
    :class:`GraphValidationError` on one line, naming up to five nodes, each with
    what is wrong with it; ``source`` (a file name) starts the message.  ``parsed``: the
    graph was just parsed from bytes, so that nothing in it nests deeper than protobuf
    reads, and nodes repeating the attributes of an earlier one are judged at once."""
    with no_gc():  # many small objects, none of them cyclic
        problems = _Validator(graph_def, parsed).problems()
    if problems:
        prefix = f"{source}: " if source else ""
        raise GraphValidationError(f"{prefix}invalid graph: {describe(problems)}")


__all__ = ["MAX_NESTING", "AttrRule", "OpRules", "attr_problem", "nested_too_deep", "op_rules", "validate_graph"]
