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
from .index import no_gc
from .output_ports import output_count
from .vocabulary import is_valid_node_name, parse_input

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
_PER_NODE = -1  # an output count that each node's attributes tell
_FIRST_TRIES = 64  # nodes of a type looked up by attribute signature before the hit rate decides
_SCALAR_FIELDS = frozenset({"s", "i", "f", "b", "type"})
_NESTING_KINDS = frozenset({"func", "tensor", "list"})


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
        self.dtypes = valid_dtypes()
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
        clean too.  Once fewer than one node in four is found so (counted after the first
        ``_FIRST_TRIES``), the type's remaining nodes are judged attribute by attribute, as every
        node of a graph built in memory is (it may nest deeper than serializing goes)."""
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
