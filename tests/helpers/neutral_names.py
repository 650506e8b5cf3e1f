"""Every scope of a graph renamed to neutral names, its structure kept.

``neutral_names(graph_def)`` gives each path of a node name (``rnn/basic_lstm_cell/MatMul_1``:
``rnn``, ``rnn/basic_lstm_cell``, the node itself) a name of its own made of letters and a number
(``a_3/b_17/c_40``), the same for the same path wherever it is met, in the graph and in each
function of its library (a function's nodes in its own name space; its arguments keep theirs).
A pass that recognises what a subgraph computes finds the same matches in the renamed graph; one
that reads names finds none.
"""
from __future__ import annotations

import string
from typing import Any


class _Names:
    def __init__(self) -> None:
        self.paths: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if name not in self.paths:
            parent, _, _ = name.rpartition("/")
            depth = name.count("/")
            leaf = f"{string.ascii_lowercase[depth % 26]}_{len(self.paths)}"
            self.paths[name] = f"{self(parent)}/{leaf}" if parent else leaf
        return self.paths[name]


def _input(text: str, rename: Any, nodes: set[str]) -> str:
    control = text.startswith("^")
    body = text[1:] if control else text
    node, sep, rest = body.partition(":")
    if node in nodes:
        node = rename(node)
    return ("^" if control else "") + node + sep + rest


def _rename_nodes(nodes: Any, rename: Any) -> None:
    names = {n.name for n in nodes}
    for n in nodes:
        n.name = rename(n.name)
        inputs = [_input(i, rename, names) for i in n.input]
        del n.input[:]
        n.input.extend(inputs)
        if "_class" in n.attr:
            values = [v.decode() for v in n.attr["_class"].list.s]
            located = [f"loc:@{rename(v[5:])}" if v.startswith("loc:@") and v[5:] in names else v for v in values]
            del n.attr["_class"].list.s[:]
            n.attr["_class"].list.s.extend(v.encode() for v in located)


def neutral_names(graph_def: Any) -> tuple[Any, dict[str, str]]:
    """A copy of ``graph_def`` with neutral names, and the renaming of the graph's own nodes."""
    renamed = type(graph_def)()
    renamed.CopyFrom(graph_def)
    rename = _Names()
    _rename_nodes(renamed.node, rename)
    for function in renamed.library.function:
        inner = _Names()
        names = {n.name for n in function.node_def}
        _rename_nodes(function.node_def, inner)
        for key in list(function.ret):
            function.ret[key] = _input(function.ret[key], inner, names)
        for key in list(function.control_ret):
            if function.control_ret[key] in names:
                function.control_ret[key] = inner(function.control_ret[key])
    return renamed, {k: v for k, v in rename.paths.items() if k in {n.name for n in graph_def.node}}


def renamed_tensor(tensor: str, names: dict[str, str]) -> str:
    node, sep, port = tensor.partition(":")
    return names[node] + sep + port
