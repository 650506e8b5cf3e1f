"""TF1 while loops: which loop frame every node belongs to.

A TF1 ``while_loop`` is a frame of nodes entered through ``Enter`` (whose ``frame_name``
names the frame) and left through ``Exit``; ``Merge``, ``Switch``, ``LoopCond`` and
``NextIteration`` close the loop.  A node is in the frame of the node it reads: the child
frame named by an ``Enter``, the parent frame after an ``Exit``, else the reader's own
frame.  Frames nest; the **top-level loop** of a node is the outermost frame around it.

In mixed mode a loop is placed whole, with every loop nested in it: a loop split between
the host and a back end cannot run.  Functional loops (``While``, ``StatelessWhile``) are
single nodes whose bodies are library functions; they are placed like any node, by what
their bodies hold (see :mod:`.candidates`).
"""
from __future__ import annotations

from ..graph.index import GraphIndex
from ..graph.vocabulary import LOOP_BACK_OPS

ENTER_OPS = frozenset({"Enter", "RefEnter"})
EXIT_OPS = frozenset({"Exit", "RefExit"})
ROOT = -1


class LoopFrames:
    """The frames of an indexed graph: per node its frame and its top-level loop."""

    def __init__(self, index: GraphIndex) -> None:
        n = len(index)
        self.frame: list[int] = [ROOT] * n
        self.parent: list[int] = []
        self.names: list[str] = []
        self._top_of_frame: list[int] = []
        self.top: list[int] = [ROOT] * n
        self._members: dict[int, list[int]] | None = None
        if any(index.nodes_of_type(op) for op in ENTER_OPS):
            self._assign(index)

    def _new_frame(self, parent: int, name: str, keys: dict[tuple[int, str], int]) -> int:
        frame = keys.get((parent, name))
        if frame is None:
            frame = len(self.names)
            keys[(parent, name)] = frame
            self.names.append(name)
            self.parent.append(parent)
            self._top_of_frame.append(frame if parent == ROOT else self._top_of_frame[parent])
        return frame

    def _assign(self, index: GraphIndex) -> None:
        ops, inputs, frame = index.ops, index.inputs, self.frame
        keys: dict[tuple[int, str], int] = {}
        for i in index.topological_order():
            source = -1
            for p, _ in inputs[i]:
                if ops[p] not in LOOP_BACK_OPS:
                    source = p
                    break
            outer = ROOT if source < 0 else frame[source]
            if source >= 0 and ops[source] in EXIT_OPS and outer != ROOT:
                outer = self.parent[outer]
            if ops[i] in ENTER_OPS:
                attr = index.nodes[i].attr.get("frame_name")
                name = attr.s.decode("utf-8", "replace") if attr is not None else index.names[i]
                outer = self._new_frame(outer, name, keys)
            frame[i] = outer
        top = self._top_of_frame
        self.top = [ROOT if f == ROOT else top[f] for f in frame]

    @property
    def count(self) -> int:
        """How many frames the graph has."""
        return len(self.names)

    def members(self, top: int) -> list[int]:
        """The nodes of top-level loop ``top`` (nested loops included), in graph order."""
        if self._members is None:
            grouped: dict[int, list[int]] = {}
            for i, t in enumerate(self.top):
                if t != ROOT:
                    grouped.setdefault(t, []).append(i)
            self._members = grouped
        return self._members.get(top, [])

    def top_levels(self) -> list[int]:
        """The top-level loops, in order of creation."""
        return [f for f in range(self.count) if self.parent[f] == ROOT]
