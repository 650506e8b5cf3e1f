"""Small hand-made GraphDefs for rule-level tests."""
from __future__ import annotations

from typing import Iterable, Sequence


def make_graph(nodes: Iterable[Sequence]) -> object:
    """``nodes``: ``(name, op, [inputs])`` or ``(name, op, [inputs], {attr: AttrValue-kwargs})``."""
    from tensorflow.core.framework import graph_pb2

    graph = graph_pb2.GraphDef()
    for entry in nodes:
        name, op, inputs = entry[0], entry[1], entry[2]
        node = graph.node.add(name=name, op=op)
        node.input.extend(inputs)
        if len(entry) > 3:
            for key, value in entry[3].items():
                node.attr[key].CopyFrom(value)
        if op not in ("NoOp",) and "T" not in node.attr and op not in ("Const", "Placeholder"):
            node.attr["T"].type = 1
    return graph


def side_by_side(graph, n: int):
    """``n`` copies of ``graph`` side by side, copy ``k`` under the scope ``c<k>`` (its function
    library kept once)."""
    from tensorflow.core.framework import graph_pb2

    big = graph_pb2.GraphDef()
    big.library.CopyFrom(graph.library)
    for k in range(n):
        for node in graph.node:
            copy = big.node.add()
            copy.CopyFrom(node)
            copy.name = f"c{k}/{node.name}"
            copy.input[:] = [("^" if t[0] == "^" else "") + f"c{k}/{t.lstrip('^')}" for t in node.input]
    return big
