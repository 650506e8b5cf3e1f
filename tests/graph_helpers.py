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
