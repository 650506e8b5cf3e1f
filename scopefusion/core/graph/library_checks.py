"""Checks of a graph's function library that TensorFlow makes when it imports the graph, or
crashes on: made before anything hands the graph to TensorFlow.

* two functions of the same name;
* a function output (``ret``) naming neither a node of the function nor an argument;
* a function calling a function the library does not have (an attribute of kind ``func``
  naming no function of the library and no TensorFlow op);
* a function calling itself, directly or through others (TensorFlow's import recurses
  without end and the process dies).

Calls are read from the op types and the ``func`` attributes of each function's nodes; the
graph's own nodes are checked for missing functions by :mod:`.validate`, which reads their
attributes anyway.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Iterator

from .attr_rules import shorten
from .tf_ops import is_tensorflow_op

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.function_pb2 import FunctionDefLibrary


def called_functions(attr_value: Any) -> Iterator[str]:
    """The function names an attribute value holds (``func`` and lists of them)."""
    kind = attr_value.WhichOneof("value")
    if kind == "func":
        yield attr_value.func.name
    elif kind == "list":
        for f in attr_value.list.func:
            yield f.name


def missing_function(name: str, functions: Any) -> bool:
    """Whether a ``func`` attribute naming ``name`` names nothing TensorFlow can call."""
    return name not in functions and not is_tensorflow_op(name)


def _ret_problem(function: Any) -> str | None:
    signature = function.signature
    nodes = {n.name for n in function.node_def}
    args = {a.name for a in signature.input_arg}
    for key, ret in function.ret.items():
        source = ret.split(":", 1)[0]
        if source not in nodes and source not in args:
            return f"its output {shorten(key)} returns {shorten(ret)}, which names no node or argument of it"
    return None


def _calls(function: Any, library: set[str]) -> tuple[set[str], list[str]]:
    """The library functions ``function`` calls, and the names it calls that nothing defines."""
    calls, missing = set(), []
    for node in function.node_def:
        if node.op in library:
            calls.add(node.op)
        for value in node.attr.values():
            for name in called_functions(value):
                if name in library:
                    calls.add(name)
                elif missing_function(name, library):
                    missing.append(f"node {shorten(node.name)} calls function {shorten(name)}, which the "
                                   "library does not define")
    return calls, missing


def _recursion(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of calls (the functions along it, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            callee = next(stack[-1], None)
            if callee is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(callee) == 1:
                return path[path.index(callee):] + [callee]
            elif not state.get(callee):
                state[callee] = 1
                path.append(callee)
                stack.append(iter(sorted(graph.get(callee, ()))))
    return None


def library_problems(library: "FunctionDefLibrary") -> list[tuple[str, list[str]]]:
    """``(label, problems)`` for each function of ``library`` with problems, and one for the
    library as a whole when its functions call each other in a cycle."""
    functions = library.function
    if not functions:
        return []
    names = [f.signature.name for f in functions]
    out: list[tuple[str, list[str]]] = []
    for name, count in Counter(names).items():
        if count > 1:
            out.append((f"function {shorten(name)}", [f"the library defines it {count} times"]))
    defined = set(names)
    graph: dict[str, set[str]] = {}
    for function in functions:
        found = []
        ret = _ret_problem(function)
        if ret is not None:
            found.append(ret)
        calls, missing = _calls(function, defined)
        found.extend(missing[:3])
        graph.setdefault(function.signature.name, set()).update(calls)
        if found:
            out.append((f"function {shorten(function.signature.name)}", found))
    cycle = _recursion(graph)
    if cycle is not None:
        chain = " -> ".join(shorten(n) for n in cycle)
        what = "calls itself" if len(cycle) == 2 else "calls itself through other functions"
        out.append((f"function {shorten(cycle[0])}", [f"it {what} ({chain}); TensorFlow cannot import a "
                                                      "recursive function"]))
    return out


__all__ = ["called_functions", "library_problems", "missing_function"]
