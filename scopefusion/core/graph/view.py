"""Node queries by name over an indexed graph: what passes of every engine read."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .constants import tensor_value
from .index import GraphIndex
from .shapes import RankInference
from .vocabulary import CONST_OPS, CONTROL, FORWARDING_OPS

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

#: How many forwarding ops a read is followed through at most.
MAX_FORWARDING = 64


class GraphView:
    """Read-only queries on the nodes of one indexed graph.

    Passes receive the live ``NodeDef`` messages (for speed): they must only
    read them.  Constant values are decoded once per node and shared.
    """

    def __init__(self, graph: "GraphDef | GraphIndex") -> None:
        self.index = graph if isinstance(graph, GraphIndex) else GraphIndex(graph)
        self._ranks: RankInference | None = None
        self._const_values: dict[int, Any] = {}

    @property
    def graph_def(self) -> "GraphDef":
        return self.index.graph_def

    def node(self, name: str) -> "NodeDef":
        return self.index.node(name)

    def has_node(self, name: str) -> bool:
        return name in self.index.index

    def op_of(self, name: str) -> str:
        return self.index.ops[self.index.index[name]]

    def input_names(self, name: str, *, control: bool = False) -> list[str]:
        """Producer tensors of a node, as ``name:port`` strings (port 0 bare)."""
        i = self.index.index[name]
        names = self.index.names
        out = []
        for p, port in self.index.inputs[i]:
            if port == CONTROL:
                if control:
                    out.append("^" + names[p])
            else:
                out.append(names[p] if port == 0 else f"{names[p]}:{port}")
        return out

    def producer(self, name: str, slot: int) -> tuple[str, int]:
        """``(producer_name, port)`` of data input ``slot`` of node ``name``."""
        p, port = self.index.data_input(self.index.index[name], slot)
        return self.index.names[p], port

    def consumer_names(self, name: str) -> list[str]:
        """Names of nodes that read any output of ``name`` (data or control)."""
        i = self.index.index[name]
        names = self.index.names
        return [names[c] for c, _, _ in self.index.consumers[i]]

    def resolve_forwarding(self, name: str) -> str:
        """Follow Identity-like nodes back to the node that really produces a value."""
        i = self.index.index[name]
        return self.index.names[self.forwarded(i)]

    def forwarded(self, i: int) -> int:
        """Index form of :meth:`resolve_forwarding`."""
        ops = self.index.ops
        for _ in range(MAX_FORWARDING):
            if ops[i] not in FORWARDING_OPS:
                break
            data = [t for t in self.index.inputs[i] if t[1] != CONTROL]
            if not data:
                break
            i = data[0][0]
        return i

    def const_value(self, name: str) -> "np.ndarray | None":
        """The value of a Const node (seen through Identity reads), else None."""
        i = self.index.index.get(name)
        return None if i is None else self.const_value_of(i)

    def const_value_of(self, i: int) -> "np.ndarray | None":
        """Index form of :meth:`const_value`; each constant is decoded once."""
        source = self.forwarded(i)
        if source in self._const_values:
            return self._const_values[source]
        node = self.index.nodes[source]
        value = None
        if node.op in CONST_OPS and "value" in node.attr:
            value = tensor_value(node.attr["value"].tensor)
            value.setflags(write=False)  # shared by every reader
        self._const_values[source] = value
        return value

    def rank(self, tensor: str) -> int | None:
        """The rank of a tensor (``name`` or ``name:port``) when it can be told."""
        if self._ranks is None:
            self._ranks = RankInference(self.index)
        return self._ranks.rank(tensor)
