"""The place of a fused op, a refusal or a near miss, as its stage saw the graph: the
nodes of the place with their data inputs, the outside nodes feeding them and the outside
nodes reading them.  Recorded only when a run asks for it (``FusionOptions.keep_places``,
for drawings such as ``scopefusion run --html``), and capped, so a huge scope costs little.

A place is taken before the stage rewrites the graph, so it shows the nodes a fused op
replaced even when a later stage fuses them again.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..graph.index import GraphIndex
from ..graph.vocabulary import CONTROL, tensor_name

#: Nodes of a place kept, at most (in graph order); the count says how many there were.
MEMBERS_KEPT = 40
#: Outside producers and consumers kept per place, at most.
NEIGHBOURS_KEPT = 12
#: How far up from a graph pattern's root a near miss's place reaches (the pattern reads upward).
ROOT_DEPTH = 6
#: A node name quoted in a reason.
_QUOTED = re.compile(r"'([^']+)'")


@dataclass
class PlaceNode:
    """One node: ``inputs`` name the nodes of the drawing it reads (data inputs, once each)."""

    name: str
    op: str
    inputs: list[str] = field(default_factory=list)


@dataclass
class Place:
    """The nodes of a place and their neighbours, capped; the counts are the full numbers."""

    members: list[PlaceNode] = field(default_factory=list)
    member_count: int = 0
    producers: list[PlaceNode] = field(default_factory=list)
    producer_count: int = 0
    consumers: list[PlaceNode] = field(default_factory=list)
    consumer_count: int = 0
    #: a fused op's input tensors, in order (empty for a refusal or a near miss)
    fused_inputs: list[str] = field(default_factory=list)


class PlaceRecorder:
    """Takes places from one stage's index (before its rewrite)."""

    def __init__(self, index: GraphIndex) -> None:
        self.index = index
        self._sorted: list[str] | None = None

    def of_members(self, members: Iterable[int], fused_inputs: Sequence[tuple[int, int]] = ()) -> Place:
        """The place of these nodes (the first :data:`MEMBERS_KEPT` in the order given);
        ``fused_inputs``: the tensors a fused op reads."""
        index = self.index
        every = list(dict.fromkeys(members))
        kept = every[:MEMBERS_KEPT]
        inside = set(kept)
        place = Place(member_count=len(every))
        producers: dict[int, None] = {}
        for m in kept:
            reads = _data_producers(index, m)
            place.members.append(PlaceNode(index.names[m], index.ops[m], [index.names[p] for p in reads]))
            producers.update((p, None) for p in reads if p not in inside)
        place.producer_count = len(producers)
        place.producers = [PlaceNode(index.names[p], index.ops[p]) for p in list(producers)[:NEIGHBOURS_KEPT]]
        readers: dict[int, list[str]] = {}
        for m in kept:
            for c, port, _ in index.consumers[m]:
                if c not in inside and port != CONTROL and index.names[m] not in readers.get(c, []):
                    readers.setdefault(c, []).append(index.names[m])
        place.consumer_count = len(readers)
        place.consumers = [PlaceNode(index.names[c], index.ops[c], names)
                           for c, names in list(readers.items())[:NEIGHBOURS_KEPT]]
        place.fused_inputs = [tensor_name(index.names[n], p) for n, p in fused_inputs]
        return place

    def of_names(self, names: Sequence[str], reason: str = "", nodes: Sequence[str] = ()) -> Place:
        """The place of scopes or nodes by name: a scope and every node under it; a node (a graph
        pattern's root) and what feeds it in its scope, nearest first, up to :data:`ROOT_DEPTH` steps.  The
        ``nodes`` a refusal names and those the ``reason`` quotes by name (where a pattern failed) come first."""
        lookup = self.index.index
        members = [lookup[q] for q in (*nodes, *_QUOTED.findall(reason)) if q in lookup]
        for name in names:
            node = lookup.get(name)
            members += self._upward(node) if node is not None else sorted(self._under(name))
        return self.of_members(members)

    def _upward(self, root: int) -> list[int]:
        """``root`` and the nodes of its own scope feeding it, nearest first (nodes of other
        scopes feeding them are the place's outside producers)."""
        names = self.index.names
        scope = names[root].rsplit("/", 1)[0] + "/" if "/" in names[root] else ""
        found, frontier = {root: None}, [root]
        for _ in range(ROOT_DEPTH):
            frontier = [p for n in frontier for p in _data_producers(self.index, n)
                        if p not in found and names[p].startswith(scope)]
            found.update(dict.fromkeys(frontier))
        return list(found)

    def _under(self, scope: str) -> set[int]:
        if self._sorted is None:
            self._sorted = sorted(self.index.names)
        prefix = scope.rstrip("/") + "/"
        start = bisect.bisect_left(self._sorted, prefix)
        out: set[int] = set()
        for name in self._sorted[start:]:
            if not name.startswith(prefix):
                break
            out.add(self.index.index[name])
        return out


def _data_producers(index: GraphIndex, node: int) -> list[int]:
    """The nodes ``node`` reads data from, once each, in input order."""
    return list(dict.fromkeys(p for p, port in index.inputs[node] if port != CONTROL and p >= 0))
