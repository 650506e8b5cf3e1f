"""Cycle-free clustering of the device nodes into segments, in time linear in the graph.

Every node gets a **stage**: along every edge the stage never decreases, and it grows by
one where a device node feeds a host node (a segment has to finish before the host goes
on).  All device nodes of one stage form one segment:

* no cycle: a path that leaves a segment through a host node ends at a later stage, so it
  cannot come back into the same segment; and a path between two nodes of one stage holds
  only nodes of that stage;
* as few segments as any placement allows: a node of stage k ends a path through k
  device stretches separated by host nodes, each of which needs a segment of its own, and
  the stages run from 0 to the largest k;
* device nodes of one stage that do not reach each other share a segment, as the
  reference's mixed mode merges such clusters (``MergeSubgraphsInNewWay``).

Stages are first computed as early as possible (which gives the largest stage), then
every node is moved as late as its consumers allow: a node that only reads constants
(a frozen weight's ``Identity``) runs in the segment of its readers, not in the first one.

TF1 while loops are placed whole (:mod:`.frames`) and each top-level loop counts as one
node here, so a loop never spans two segments and a host loop's back edges (ignored by
the topological order) cannot hide a dependency between two segments.  Constants without
inputs take no part: every segment that reads one gets its own copy.

As in the reference, when the largest segment has a single node, lone ``NoOp`` and
``Identity`` segments are dropped (they stay on the host).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

from ..errors import GraphValidationError
from ..graph.index import GraphIndex
from ..graph.vocabulary import LOOP_BACK_OPS
from .frames import ROOT, LoopFrames

DROPPABLE_OPS = frozenset({"NoOp", "Identity"})


@dataclass
class Clustering:
    """Per node its segment (``-1``: host or a free constant), and what was dropped."""

    segment_of: list[int]
    count: int
    dropped: list[int] = field(default_factory=list)


def _representatives(index: GraphIndex, frames: LoopFrames) -> list[int]:
    n = len(index)
    return [i if t == ROOT else n + t for i, t in enumerate(frames.top)]


def _quotient(index: GraphIndex, on_device: Sequence[int], free_const: bytearray,
              reps: Sequence[int], size: int) -> tuple[list[list[int]], list[int]]:
    """Successors of every representative (packed ``successor * 2 + weight``) and in-degrees."""
    succ: list[list[int]] = [[] for _ in range(size)]
    indegree = [0] * size
    back = [op in LOOP_BACK_OPS for op in index.ops]
    for c, ins in enumerate(index.inputs):
        if free_const[c]:
            continue
        rc = reps[c]
        leaving = 0 if on_device[c] else 1
        for p, _ in ins:
            if back[p] or free_const[p]:
                continue
            rp = reps[p]
            if rp != rc:
                succ[rp].append(rc * 2 + (leaving if on_device[p] else 0))
                indegree[rc] += 1
    return succ, indegree


def stages(index: GraphIndex, on_device: Sequence[int], free_const: bytearray, frames: LoopFrames,
           reps: Sequence[int]) -> list[int]:
    """The stage of every representative (nodes, then top-level loops): as late as possible."""
    n = len(index)
    size = n + frames.count
    succ, indegree = _quotient(index, on_device, free_const, reps, size)
    early = [0] * size
    active = {r for i, r in enumerate(reps) if not free_const[i]}
    queue = deque(r for r in active if indegree[r] == 0)
    order = []
    while queue:
        r = queue.popleft()
        order.append(r)
        base = early[r]
        for packed in succ[r]:
            q = packed >> 1
            if base + (packed & 1) > early[q]:
                early[q] = base + (packed & 1)
            indegree[q] -= 1
            if indegree[q] == 0:
                queue.append(q)
    if len(order) != len(active):
        stuck = [index.names[i] for i, r in enumerate(reps) if r in active and indegree[r] > 0][:5]
        raise GraphValidationError(f"a while loop feeds its own inputs from outside (through {', '.join(stuck)}): "
                                   "the graph cannot be placed")
    device_rep = bytearray(size)
    for i, r in enumerate(reps):
        if on_device[i]:
            device_rep[r] = 1
    last = max((early[r] for r in order if device_rep[r]), default=0)
    late = early
    for r in reversed(order):
        bound = last if device_rep[r] else last + 1
        for packed in succ[r]:
            value = late[packed >> 1] - (packed & 1)
            if value < bound:
                bound = value
        late[r] = bound
    return late


def cluster(index: GraphIndex, on_device: Sequence[int], free_const: bytearray, frames: LoopFrames) -> Clustering:
    """Group the device nodes (``on_device[i]`` true; free constants excluded) into segments."""
    reps = _representatives(index, frames)
    stage = stages(index, on_device, free_const, frames, reps)
    members: dict[int, list[int]] = {}
    for i, r in enumerate(reps):
        if on_device[i] and not free_const[i]:
            members.setdefault(stage[r], []).append(i)
    groups = [members[s] for s in sorted(members)]
    dropped: list[int] = []
    if groups and max(len(g) for g in groups) == 1:
        dropped = [g[0] for g in groups if index.ops[g[0]] in DROPPABLE_OPS]
        groups = [g for g in groups if index.ops[g[0]] not in DROPPABLE_OPS]
    segment_of = [-1] * len(index)
    for k, group in enumerate(groups):
        for i in group:
            segment_of[i] = k
    return Clustering(segment_of, len(groups), dropped)
