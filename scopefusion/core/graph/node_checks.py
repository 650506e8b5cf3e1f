"""Single nodes against TensorFlow's op definitions: the checks :mod:`.validate` makes of a whole
graph at load, made of the few nodes a rewrite wrote (a pass's fused op when it is a stock
TensorFlow op, the nodes of an inner graph, the readers a rewrite rewired).

A node of a TensorFlow op must hold every attribute the op requires, each of the declared kind
(an ``Identity`` without ``T``, ``transpose_a: "yes"`` are refused), take as many data inputs as
the op does, and each must carry the dtype the op takes there.
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .attr_rules import OpRules, attr_problem, attr_signature, op_rules, shorten, valid_dtypes
from .op_typing import UNKNOWN, NodeTypes, node_types
from .vocabulary import dtype_name, parse_input

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef


@lru_cache(maxsize=1)
def _dtypes() -> frozenset[int]:
    return valid_dtypes()


class NodeJudge:
    """Judges nodes of one graph; ``lookup`` finds a node by name (None: no such node), and
    ``functions`` are the graph's library functions by name."""

    def __init__(self, lookup: Callable[[str], "NodeDef | None"], functions: Mapping[str, Any] | None = None) -> None:
        self.lookup = lookup
        self.signatures = dict(functions or {})
        self.counts = {name: len(s.output_arg) for name, s in self.signatures.items()}
        self.rules: dict[str, OpRules] = {}
        self.dtypes = _dtypes()
        self.types: dict[tuple[str, bytes], NodeTypes] = {}

    def rules_of(self, op: str) -> OpRules:
        rules = self.rules.get(op)
        if rules is None:
            rules = self.rules[op] = op_rules(op, self.counts)
        return rules

    def knows(self, op: str) -> bool:
        """Whether ``op`` is TensorFlow's or a library function's (its nodes can be judged)."""
        return op in self.signatures or self.rules_of(op).op_def is not None

    def types_of(self, node: "NodeDef") -> NodeTypes:
        if node.op not in self.signatures and self.rules_of(node.op).op_def is None:
            return UNKNOWN  # an op neither TensorFlow nor the library knows: taken as it is
        key = (node.op, attr_signature(node, deterministic=True))
        if key not in self.types:
            self.types[key] = node_types(node, self.rules_of(node.op).op_def, self.signatures)
        return self.types[key]

    def attr_problems(self, node: "NodeDef") -> list[str]:
        """Missing required attributes and values of another kind than the op declares."""
        rules = self.rules_of(node.op)
        if rules.op_def is None:
            return []
        found = []
        missing = [key for key in rules.required if key not in node.attr]
        if missing:
            found.append(f"it lacks the required attribute(s) {', '.join(repr(k) for k in missing)} "
                         f"({', '.join(rules.attrs[k].declared for k in missing)})")
        for key, value in node.attr.items():
            rule = rules.attrs.get(key)
            if rule is not None:
                problem = attr_problem(key, value, rule, self.dtypes)
                if problem is not None:
                    found.append(problem)
        return found

    def count_problem(self, node: "NodeDef", data_inputs: int) -> str | None:
        """Another number of data inputs than the node's op takes."""
        wanted = self.types_of(node).inputs
        if wanted is not None and data_inputs != len(wanted):
            return f"it has {data_inputs} data input(s), its op {node.op} takes {len(wanted)}"
        return None

    def input_problems(self, node: "NodeDef") -> list[str]:
        """Its input count, and the dtype each data input carries."""
        data = [text for text in node.input if not text.startswith("^")]
        problem = self.count_problem(node, len(data))
        if problem is not None:
            return [problem]
        wanted = self.types_of(node).inputs
        if wanted is None:
            return []
        found = []
        for slot, text in enumerate(data):
            name, port = parse_input(text)
            producer = self.lookup(name)
            if producer is None or not wanted[slot]:
                continue
            outputs = self.types_of(producer).outputs
            got = outputs[port] if outputs is not None and 0 <= port < len(outputs) else 0
            if got and got != wanted[slot]:
                found.append(f"input {slot} {shorten(text)} carries {dtype_name(got)}, its op {node.op} "
                             f"takes {dtype_name(wanted[slot])} there")
        return found

    def problems(self, node: "NodeDef", *, attrs: bool = True) -> list[str]:
        """What is wrong with ``node`` (``attrs``: its attributes too, not only its inputs)."""
        return (self.attr_problems(node) if attrs else []) + self.input_problems(node)


__all__ = ["NodeJudge"]
