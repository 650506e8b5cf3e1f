"""Functions a fusion left uncalled.

When a pass replaces a loop (``While``) or a call with one fused op, the loop's body and
condition, or the called function, stay in the graph's library although nothing calls them
any more.  :func:`drop_uncalled` removes exactly those: functions some node reached before
fusion (from the graph, through function-valued attributes, also inside functions) and none
reaches after.  Functions nothing called to begin with, and functions with a registered
gradient, are kept as they were.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.attr_value_pb2 import AttrValue
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef


def _named(attr: "AttrValue") -> Iterable[str]:
    kind = attr.WhichOneof("value")
    if kind == "func":
        yield attr.func.name
    elif kind == "list":
        yield from (f.name for f in attr.list.func)


def _called_by(nodes: Iterable["NodeDef"], library: set[str]) -> set[str]:
    out = set()
    for node in nodes:
        if node.op in library:  # a function called as an op
            out.add(node.op)
        for attr in node.attr.values():
            out.update(_named(attr))
    return out


def called_functions(graph_def: "GraphDef") -> set[str]:
    """The library functions the graph reaches, directly or through other functions (nothing to
    look for, and no node read, when the library is empty: most frozen graphs)."""
    if not graph_def.library.function:
        return set()
    bodies = {f.signature.name: f for f in graph_def.library.function}
    names = set(bodies)
    todo = list(_called_by(graph_def.node, names) & names)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend((_called_by(bodies[name].node_def, names) & names) - seen)
    return seen


def drop_uncalled(graph_def: "GraphDef", called_before: set[str]) -> list[str]:
    """Remove the functions called before fusion and no longer called; their names, sorted."""
    if not called_before:
        return []
    kept_for_gradients = {g.function_name for g in graph_def.library.gradient} | {
        g.gradient_func for g in graph_def.library.gradient}
    dead = (called_before - called_functions(graph_def)) - kept_for_gradients
    if not dead:
        return []
    functions = graph_def.library.function
    for i in reversed(range(len(functions))):
        if functions[i].signature.name in dead:
            del functions[i]
    return sorted(dead)
