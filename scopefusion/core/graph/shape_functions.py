"""Shapes through function calls, for :mod:`.shape_inference`: a call of a library function
(by name, ``PartitionedCall`` / ``StatefulPartitionedCall``), a functional conditional
(``If`` / ``StatelessIf``, ``Case`` / ``StatelessCase``) or loop (``While`` / ``StatelessWhile``)
has the shapes the called body gives its results, propagated through that body from the
shapes of the call's inputs.

A body is turned into a graph of its own once (each argument a ``Placeholder`` of the given
shape, its ``node:argument:index`` tensor names turned into ports by the producers' op
definitions), and its results' shapes are memoised per (function, input shapes).  A
conditional's outputs relax its branches' (a dimension kept where all agree); a loop's
variables are relaxed with what the body returns until nothing changes (bounded).  A call
that reaches a function already being followed (recursion, which loading refuses anyway), a
body that cannot be turned into a graph exactly, or a loop that does not settle, gives unknown
shapes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from .constant_eval import ConstantFolder
from .constants import tensor_value
from .index import GraphIndex
from .protos import message_class
from .shape_context import Dims
from .tf_ops import tensorflow_op_def

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from .shape_inference import ShapeInference

#: How many times a loop's body is followed before its variables are given up as unknown.
MAX_LOOP_ROUNDS = 6
Shapes = tuple[Optional[tuple[Optional[int], ...]], ...]
#: The shapes a call's outputs have, and the op types outside the table they depend on.
Answer = tuple[list[Dims], frozenset[str]]
_NOTHING: frozenset[str] = frozenset()

CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
IF_OPS = frozenset({"If", "StatelessIf"})
CASE_OPS = frozenset({"Case", "StatelessCase"})
WHILE_OPS = frozenset({"While", "StatelessWhile"})


def relax(a: Dims, b: Dims) -> Dims:
    """What two shapes of one tensor have in common: None unless both have the same rank, a
    dimension kept where both agree."""
    if a is None or b is None or len(a) != len(b):
        return None
    return [x if x == y else None for x, y in zip(a, b, strict=True)]


def _frozen(shapes: Sequence[Dims]) -> Shapes:
    return tuple(None if s is None else tuple(s) for s in shapes)


class _Unresolved(Exception):
    """A body tensor whose port cannot be told exactly."""


class _Body:
    """One function's body as an indexed graph, and where its results are."""

    def __init__(self, function: Any, signatures: dict[str, Any]) -> None:
        self.function = function
        graph = message_class("GraphDef")()
        signature = function.signature
        self.args = [arg.name for arg in signature.input_arg]
        for arg in signature.input_arg:  # shapes given per call (ShapeInference.assume)
            node = graph.node.add(name=arg.name, op="Placeholder")
            node.attr["dtype"].type = int(arg.type)
        layouts = {node.name: _layout(node, signatures) for node in function.node_def}
        for body_node in function.node_def:
            node = graph.node.add()
            node.CopyFrom(body_node)
            del node.input[:]
            node.input.extend(_graph_input(name, layouts) for name in body_node.input)
        self.graph = graph
        self.index = GraphIndex(graph, validate=False)
        positions = self.index.index
        self.results: list[tuple[int, int]] = []
        for arg in signature.output_arg:
            node, _, port = _graph_input(function.ret[arg.name], layouts).partition(":")
            self.results.append((positions[node], int(port or 0)))
        self.folder = ConstantFolder(self.index, self._decode)

    def _decode(self, i: int) -> "np.ndarray | None":
        node = self.index.nodes[i]
        return tensor_value(node.attr["value"].tensor) if "value" in node.attr else None

    def constant(self, i: int) -> "np.ndarray | None":
        folded = self.folder.fold(i)
        return None if folded is None else folded[0]


def _layout(node: Any, signatures: dict[str, Any]) -> dict[tuple[str, int], int] | None:
    """Port per (output argument, index) of a body node; None when not known exactly."""
    signature = signatures.get(node.op)
    if signature is not None:
        args = [(arg.name, 1) for arg in signature.output_arg if not (arg.number_attr or arg.type_list_attr)]
        if len(args) != len(signature.output_arg):
            return None
    else:
        op_def = tensorflow_op_def(node.op)
        if op_def is None:
            return None
        args = []
        for arg in op_def.output_arg:
            length = _list_length(node, op_def, arg.number_attr or arg.type_list_attr, bool(arg.number_attr))
            if length is None:
                return None
            args.append((arg.name, length))
    ports: dict[tuple[str, int], int] = {}
    for name, length in args:
        for k in range(length):
            ports[(name, k)] = len(ports)
    return ports


def _list_length(node: Any, op_def: Any, attr: str, number: bool) -> int | None:
    if not attr:
        return 1
    value = node.attr[attr] if attr in node.attr else next(
        (a.default_value for a in op_def.attr if a.name == attr and a.HasField("default_value")), None)
    if value is None:
        return None
    return int(value.i) if number else len(value.list.type)


def _graph_input(name: str, layouts: dict[str, dict[tuple[str, int], int] | None]) -> str:
    """A body tensor name (``node:argument:index``, an argument, ``^node``) as a graph names it."""
    if name.startswith("^"):
        return name
    parts = name.split(":")
    if len(parts) == 1:
        return name
    if len(parts) != 3:
        raise _Unresolved(name)
    layout = layouts.get(parts[0])
    port = None if layout is None else layout.get((parts[1], int(parts[2])))
    if port is None:
        raise _Unresolved(name)
    return f"{parts[0]}:{port}"


class FunctionShapes:
    """Shapes of calls into one function library, shared by the inference of a graph and of
    every body it follows (see the module's docstring)."""

    def __init__(self, library: Any, make: Callable[[GraphIndex, Any, "FunctionShapes"], "ShapeInference"]) -> None:
        self.functions = {f.signature.name: f for f in library.function}
        self._signatures = {name: f.signature for name, f in self.functions.items()}
        self._make = make  # a ShapeInference over a body's index, with its constants
        self._bodies: dict[str, _Body | None] = {}
        self._memo: dict[tuple[str, Shapes], Answer] = {}
        self._following: set[str] = set()

    def call(self, name: str, inputs: Sequence[Dims]) -> Answer | None:
        """The shapes of the results of function ``name`` called on inputs of these shapes; None
        when its body cannot be followed (not in the library, or not convertible exactly)."""
        key = (name, _frozen(inputs))
        known = self._memo.get(key)
        if known is not None:
            return known
        body = self._body(name)
        if body is None:
            return None
        if name in self._following:  # recursion: loading refuses it, but never loop here
            return [None] * len(body.results), _NOTHING
        self._following.add(name)
        try:
            answer = self._follow(body, inputs)
        finally:
            self._following.discard(name)
        self._memo[key] = answer
        return answer

    def followed(self) -> list[tuple[str, Shapes]]:
        """Each (function, input shapes) followed so far."""
        return list(self._memo)

    def _body(self, name: str) -> _Body | None:
        if name not in self._bodies:
            function = self.functions.get(name)
            try:
                self._bodies[name] = None if function is None else _Body(function, self._signatures)
            except (_Unresolved, KeyError, ValueError):
                self._bodies[name] = None
        return self._bodies[name]

    def body_inference(self, name: str, inputs: Sequence[Dims]) -> "ShapeInference | None":
        """A fresh inference over function ``name``'s body (its index is ``.index``), its
        arguments of these shapes; None when the body cannot be followed."""
        body = self._body(name)
        return None if body is None else self._inference(body, inputs)

    def _inference(self, body: _Body, inputs: Sequence[Dims]) -> "ShapeInference":
        inference = self._make(body.index, body.constant, self)
        for k in range(len(body.args)):  # the arguments' placeholders come first
            inference.assume(k, [inputs[k] if k < len(inputs) else None])
        return inference

    def _follow(self, body: _Body, inputs: Sequence[Dims]) -> Answer:
        inference = self._inference(body, inputs)
        missing: frozenset[str] = _NOTHING
        outputs: list[Dims] = []
        for node, port in body.results:
            outputs.append(inference.shape(node, port))
            missing = missing | inference.missing(node)
        return outputs, missing

    # -- the call ops ---------------------------------------------------------------
    def branches(self, names: Sequence[str], inputs: Sequence[Dims]) -> Answer | None:
        """A conditional's outputs: its branches' relaxed."""
        outputs: list[Dims] | None = None
        missing: frozenset[str] = _NOTHING
        for name in names:
            answer = self.call(name, inputs)
            if answer is None:
                return None
            found, more = answer
            missing = missing | more
            outputs = found if outputs is None else [relax(a, b) for a, b in zip(outputs, found, strict=False)]
        return outputs or [], missing

    def loop(self, body: str, inputs: Sequence[Dims]) -> Answer | None:
        """A functional loop's outputs: its variables' shapes relaxed with what the body returns
        until they settle."""
        shapes = list(inputs)
        missing: frozenset[str] = _NOTHING
        for _ in range(MAX_LOOP_ROUNDS):
            answer = self.call(body, shapes)
            if answer is None:
                return None
            found, missing = answer
            if len(found) != len(shapes):
                return [None] * len(shapes), missing
            relaxed = [relax(a, b) for a, b in zip(shapes, found, strict=True)]
            if relaxed == shapes:
                return shapes, missing
            shapes = relaxed
        return [None] * len(shapes), missing
