"""A layered layout for small directed graphs (the drawings of ``scopefusion run --html``).

Nodes go into layers by their longest path from a source, so every edge points downward;
within a layer they are ordered by the mean position of their neighbours in the layer
above, then below, a few sweeps each way (the barycentre heuristic), which keeps most
edges short and uncrossed.  An edge that would close a cycle is ignored for layering.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

#: Box size and gaps, in pixels.
NODE_WIDTH = 172
NODE_HEIGHT = 38
GAP_X = 18
GAP_Y = 44
MARGIN = 12
SWEEPS = 4


@dataclass(frozen=True)
class Box:
    """Where a node is drawn: its top-left corner."""

    x: float
    y: float

    @property
    def top(self) -> tuple[float, float]:
        return self.x + NODE_WIDTH / 2, self.y

    @property
    def bottom(self) -> tuple[float, float]:
        return self.x + NODE_WIDTH / 2, self.y + NODE_HEIGHT


@dataclass
class Layout:
    boxes: dict[str, Box]
    width: float
    height: float


def layers(names: Sequence[str], edges: Sequence[tuple[str, str]]) -> list[list[str]]:
    """``names`` in layers (longest path from a source), each in first-seen order."""
    known = set(names)
    succ: dict[str, list[str]] = {n: [] for n in names}
    indegree = dict.fromkeys(names, 0)
    for a, b in edges:
        if a in known and b in known and a != b:
            succ[a].append(b)
            indegree[b] += 1
    level = dict.fromkeys(names, 0)
    ready = [n for n in names if indegree[n] == 0]
    sources = list(ready)
    done: set[str] = set()
    while len(done) < len(names):
        if not ready:  # a cycle: start again from the first node not yet placed
            ready = [next(n for n in names if n not in done)]
        node = ready.pop(0)
        if node in done:
            continue
        done.add(node)
        for s in succ[node]:
            if s not in done:
                level[s] = max(level[s], level[node] + 1)
                indegree[s] -= 1
                if indegree[s] == 0:
                    ready.append(s)
    for n in sources:  # a source sits just above its first reader, not at the top with a long edge
        if succ[n]:
            level[n] = max(min(level[s] for s in succ[n]) - 1, 0)
    out: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for n in names:
        out[level[n]].append(n)
    return out


def _reorder(rows: list[list[str]], neighbours: dict[str, list[str]], downward: bool) -> None:
    """One barycentre sweep: each layer sorted by its neighbours' mean position in the layer before."""
    order = range(1, len(rows)) if downward else range(len(rows) - 2, -1, -1)
    for k in order:
        before = rows[k - 1] if downward else rows[k + 1]
        position = {n: i for i, n in enumerate(before)}

        def centre(node: str, current: int, position: dict[str, int] = position) -> float:
            near = [position[m] for m in neighbours[node] if m in position]
            return sum(near) / len(near) if near else float(current)

        rows[k] = [n for _, _, n in sorted((centre(n, i), i, n) for i, n in enumerate(rows[k]))]


def layout(names: Sequence[str], edges: Sequence[tuple[str, str]]) -> Layout:
    """Positions for ``names`` with ``edges`` (producer, consumer) drawn top to bottom."""
    rows = layers(names, edges)
    neighbours: dict[str, list[str]] = {n: [] for n in names}
    for a, b in edges:
        if a in neighbours and b in neighbours:
            neighbours[a].append(b)
            neighbours[b].append(a)
    for _ in range(SWEEPS):
        _reorder(rows, neighbours, downward=True)
        _reorder(rows, neighbours, downward=False)
    widest = max((len(r) for r in rows), default=0)
    width = 2 * MARGIN + widest * NODE_WIDTH + max(widest - 1, 0) * GAP_X
    boxes = {}
    for k, row in enumerate(rows):
        row_width = len(row) * NODE_WIDTH + max(len(row) - 1, 0) * GAP_X
        left = (width - row_width) / 2
        for i, n in enumerate(row):
            boxes[n] = Box(left + i * (NODE_WIDTH + GAP_X), MARGIN + k * (NODE_HEIGHT + GAP_Y))
    height = 2 * MARGIN + len(rows) * NODE_HEIGHT + max(len(rows) - 1, 0) * GAP_Y
    return Layout(boxes, width, height)
