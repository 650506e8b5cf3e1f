"""The edges that cross a segment's border: what it reads, what it hands back, what it waits for.

Computed in one pass over the graph's inputs.  Constants without inputs are not
crossings: each segment that reads one holds its own copy.  A segment hands back every
tensor of its nodes that a node outside reads and every graph output among them (so an
output stays fetchable under its name).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..graph.index import GraphIndex
from ..graph.vocabulary import CONTROL

Tensor = tuple[int, int]


@dataclass
class SegmentBoundary:
    """One segment: its nodes (graph order), the constants copied into it, its arguments and
    results (tensors, in first-use order) and the outside nodes it waits for."""

    members: list[int] = field(default_factory=list)
    consts: list[int] = field(default_factory=list)
    args: list[Tensor] = field(default_factory=list)
    rets: list[Tensor] = field(default_factory=list)
    control_in: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.arg_index: dict[Tensor, int] = {}
        self.ret_index: dict[Tensor, int] = {}
        self._consts: set[int] = set()
        self._controls: set[int] = set()

    def add_arg(self, tensor: Tensor) -> None:
        if tensor not in self.arg_index:
            self.arg_index[tensor] = len(self.args)
            self.args.append(tensor)

    def add_ret(self, tensor: Tensor) -> None:
        if tensor not in self.ret_index:
            self.ret_index[tensor] = len(self.rets)
            self.rets.append(tensor)

    def add_const(self, node: int) -> None:
        if node not in self._consts:
            self._consts.add(node)
            self.consts.append(node)

    def add_control(self, node: int) -> None:
        if node not in self._controls:
            self._controls.add(node)
            self.control_in.append(node)


def boundaries(index: GraphIndex, segment_of: Sequence[int], count: int, free_const: bytearray,
               graph_outputs: Sequence[Tensor]) -> list[SegmentBoundary]:
    """The boundary of every segment ``0 .. count - 1``."""
    result = [SegmentBoundary() for _ in range(count)]
    for c, ins in enumerate(index.inputs):
        sc = segment_of[c]
        if sc >= 0:
            result[sc].members.append(c)
        for p, port in ins:
            sp = segment_of[p]
            if sp == sc and sc >= 0:
                continue
            if free_const[p]:
                if sc >= 0:
                    result[sc].add_const(p)
                continue
            if sc >= 0:
                if port == CONTROL:
                    result[sc].add_control(p)
                else:
                    result[sc].add_arg((p, port))
            if sp >= 0 and port != CONTROL:
                result[sp].add_ret((p, port))
    for p, port in graph_outputs:
        if segment_of[p] >= 0:
            result[segment_of[p]].add_ret((p, port))
    return result


def default_graph_outputs(index: GraphIndex, non_outputs: frozenset[str]) -> list[Tensor]:
    """Port 0 of every sink whose op is not in ``non_outputs``."""
    return [(i, 0) for i in index.sinks() if index.ops[i] not in non_outputs]
