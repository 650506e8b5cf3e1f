"""Argument shapes a function's callers fix: the constants they pass.

A frozen graph passes its weights to the functions it calls as constants (the variables a
called function read became ``Const`` nodes feeding the call).  Inside the function those
arguments have no shape of their own unless the function records one, yet a pass may need it
(how many axes a layer norm's gamma spans).  When every node calling a function passes a
``Const`` at an argument, and all of them have the same shape, that shape is the argument's.
A loop body's argument counts only when the body hands it on unchanged (a loop invariant), so
its value is the constant's on every iteration.  Callers are looked for in the graph and in
every function body: one caller passing anything else leaves the argument's shape as recorded.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

#: the attributes naming a called function, and how many leading data inputs are not its arguments
_CALL_ATTRS = {"f": 0, "body": 0, "then_branch": 1, "else_branch": 1, "branches": 1}
_LOOPS = frozenset({"While", "StatelessWhile"})
_UNKNOWN = object()  # an argument some caller passes something else at


def _called(node: "NodeDef", functions: Mapping[str, Any]) -> Iterator[tuple[str, int]]:
    """``(function, leading data inputs that are no arguments)`` per function ``node`` calls."""
    if node.op in functions:
        yield node.op, 0
    for attr, skip in _CALL_ATTRS.items():
        if attr in node.attr:
            value = node.attr[attr]
            for name in ([f.name for f in value.list.func] if attr == "branches" else [value.func.name]):
                if name in functions:
                    yield name, skip
    cond = node.attr.get("cond") if node.op in _LOOPS else None
    if cond is not None and cond.func.name in functions:
        yield cond.func.name, 0


def _invariants(function: Any) -> set[int]:
    """Positions of the arguments a loop body returns unchanged."""
    args = [a.name for a in function.signature.input_arg]
    outs = [a.name for a in function.signature.output_arg]
    # the graph's own function: a body whose outputs do not match its arguments is TensorFlow's to refuse
    return {k for k, (arg, out) in enumerate(zip(args, outs, strict=False)) if function.ret.get(out) == arg}


def _const_shape(producer: "NodeDef | None") -> Any:
    if producer is None or producer.op != "Const" or "value" not in producer.attr:
        return _UNKNOWN
    return producer.attr["value"].tensor.tensor_shape


def _callers(graph_def: "GraphDef") -> Iterable[tuple["NodeDef", dict[str, "NodeDef"]]]:
    nodes = {n.name: n for n in graph_def.node}
    for node in graph_def.node:
        yield node, nodes
    for function in graph_def.library.function:
        inner = {n.name: n for n in function.node_def}
        for node in function.node_def:
            yield node, inner


def constant_arg_shapes(graph_def: "GraphDef") -> dict[str, dict[int, Any]]:
    """Per function, the ``TensorShapeProto`` of each argument every caller passes a constant of
    one shape at (loop bodies and conditions: the loop's invariants only)."""
    functions = {f.signature.name: f for f in graph_def.library.function}
    seen: dict[str, dict[int, Any]] = {}
    for node, scope in _callers(graph_def):
        invariant = None
        if node.op in _LOOPS:
            called = node.attr.get("body")
            body = functions.get(called.func.name) if called is not None else None
            invariant = _invariants(body) if body is not None else set()
        for name, skip in _called(node, functions):
            data = [t for t in node.input if not t.startswith("^")][skip:]
            shapes = seen.setdefault(name, {})
            for k, tensor in enumerate(data):
                shape = _const_shape(scope.get(tensor.split(":")[0]))
                if invariant is not None and k not in invariant:
                    shape = _UNKNOWN
                previous = shapes.get(k)
                if previous is None:
                    shapes[k] = shape
                elif previous is not _UNKNOWN and (shape is _UNKNOWN or previous != shape):
                    shapes[k] = _UNKNOWN
    return {name: {k: s for k, s in shapes.items() if s is not _UNKNOWN} for name, shapes in seen.items()}
