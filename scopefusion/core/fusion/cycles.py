"""Cycle checks for fusion plans.

Fusing a result contracts its removed nodes into one node.  That creates a cycle
when the result is not convex (a path leaves it and comes back), or when two
results, each convex, would feed each other once both are contracted.  A loop's
``NextIteration`` back edge is no cycle while the node stays; taken into a result
it becomes an ordinary edge.
"""
from __future__ import annotations

from collections import deque
from typing import Sequence

from ..graph.index import GraphIndex, no_gc
from ..graph.toposort import kahn_order, on_cycles
from ..graph.vocabulary import CONTROL, LOOP_BACK_OPS, LOOP_MERGE_OPS
from .plan import FusionPlan


def find_cycle(index: GraphIndex, plan: FusionPlan) -> str | None:
    """Would fusing ``plan`` alone create a cycle (is its node set not convex)?

    Returns a description of the offending path, or None.  Only nodes ordered
    before the last removed node can lie on such a path, so the search stays
    inside that window of the topological order.
    """
    pos = index.position
    limit = max(map(pos.__getitem__, plan.removed))
    own = plan.removed_set
    consumers = index.consumers
    queue: deque[tuple[int, int]] = deque()
    visited: set[int] = set()
    # a NextIteration among the removed nodes is no back edge any more: the
    # fused node that replaces it is an ordinary op, so its edges count
    for d in plan.border:  # only they have readers outside
        for c, _, _ in consumers[d]:
            if c not in own and c not in visited and pos[c] <= limit:
                visited.add(c)
                queue.append((c, d))
    if not queue:
        return None
    ops = index.ops
    while queue:
        v, origin = queue.popleft()
        back = ops[v] in LOOP_BACK_OPS
        for c, port, _ in consumers[v]:
            if back and port != CONTROL and ops[c] in LOOP_MERGE_OPS:
                continue  # the loop's back edge, as the index orders the graph
            if c in own:
                return (
                    f"not convex: {index.names[origin]!r} reaches {index.names[c]!r} through "
                    f"{index.names[v]!r}, outside the result, so fusing would create a cycle"
                )
            if c not in visited and pos[c] <= limit:
                visited.add(c)
                queue.append((c, origin))
    return None


def plans_on_cycle(index: GraphIndex, plans: Sequence[FusionPlan]) -> list[FusionPlan]:
    """Contract every plan's removed nodes to one node and sort the result
    topologically; returns the plans lying on a cycle (empty when none).

    Each plan is convex on its own (:func:`find_cycle`), yet two can feed each
    other once both are contracted.  Only plans whose spans overlap can (see
    :func:`_no_cycle_possible`), so the whole graph is sorted only when they may.
    """
    if _no_cycle_possible(index, plans):
        return []
    return _plans_on_cycle(index, plans)


def _spans(index: GraphIndex, plans: Sequence[FusionPlan]) -> list[tuple[int, int, int]] | None:
    """Per plan ``(first, last, k)``: the topological positions of its first and last removed node
    read from, or reading, outside; None when a plan takes a loop's back edge (NextIteration or
    Merge), which runs against the order."""
    pos, ops = index.position, index.ops
    spans = []
    for k, plan in enumerate(plans):
        if not _LOOP_OPS.isdisjoint(map(ops.__getitem__, plan.removed)):
            return None
        if plan.border:  # the removed nodes reading from, or read by, the outside
            at = list(map(pos.__getitem__, plan.border))
            spans.append((min(at), max(at), k))
    return sorted(spans)


_LOOP_OPS = LOOP_BACK_OPS | LOOP_MERGE_OPS


def _no_cycle_possible(index: GraphIndex, plans: Sequence[FusionPlan]) -> bool:
    """True when no two plans can feed each other once contracted.

    A path between plans runs forward in the topological order, from a node a plan reads
    into to one it is read from.  So the plans of a cycle come back to where they started
    only through overlapping spans (first to last such node of each plan): their spans form one
    run of overlapping intervals, and every node of the cycle lies in that run's positions.
    Each run holding two plans or more is sorted on its own, over the nodes of its positions.
    """
    spans = _spans(index, plans)
    if spans is None:
        return False
    run: list[int] = []
    lo = hi = -1
    for first, last, k in [*spans, (len(index) + 1, 0, -1)]:
        if first > hi:  # the run so far is closed
            if len(run) > 1 and _sorts(index, [plans[j] for j in run], lo, hi):
                return False
            run, lo, hi = [], first, last
        run.append(k)
        hi = max(hi, last)
    return True


def _sorts(index: GraphIndex, plans: Sequence[FusionPlan], lo: int, hi: int) -> bool:
    """Whether the nodes at topological positions ``lo`` to ``hi``, each plan's removed nodes
    contracted to one, hold a cycle."""
    group: dict[int, int] = {}
    for k, plan in enumerate(plans):
        for d in plan.removed:
            group[d] = -1 - k
    pos, ops = index.position, index.ops
    indegree: dict[int, int] = {}
    succ: dict[int, list[int]] = {}
    for c in index.topological_order()[lo:hi + 1]:
        gc_ = group.get(c, c)
        indegree.setdefault(gc_, 0)
        closes_loop = gc_ == c and ops[c] in LOOP_MERGE_OPS
        for p, port in index.inputs[c]:
            if not lo <= pos[p] <= hi:
                continue
            gp = group.get(p, p)
            if gp == gc_ or (closes_loop and gp == p and port != CONTROL and ops[p] in LOOP_BACK_OPS):
                continue
            indegree[gc_] += 1
            succ.setdefault(gp, []).append(gc_)
    queue = deque(v for v, d in indegree.items() if d == 0)
    seen = 0
    while queue:
        v = queue.popleft()
        seen += 1
        for c in succ.get(v, ()):
            indegree[c] -= 1
            if indegree[c] == 0:
                queue.append(c)
    return seen < len(indegree)


def _plans_on_cycle(index: GraphIndex, plans: Sequence[FusionPlan]) -> list[FusionPlan]:
    """:func:`plans_on_cycle` over the whole graph."""
    n = len(index)
    group = list(range(n))
    for k, plan in enumerate(plans):
        for d in plan.removed:
            group[d] = n + k
    total = n + len(plans)
    indegree = [0] * total
    succ: list[list[int]] = [[] for _ in range(total)]
    ops = index.ops
    with no_gc():
        for c, ins in enumerate(index.inputs):
            gc_ = group[c]
            closes_loop = gc_ == c and ops[c] in LOOP_MERGE_OPS
            for p, port in ins:
                gp = group[p]
                # a back edge (NextIteration -> Merge) is skipped unless fusing took either end
                if gp == gc_ or (closes_loop and gp == p and port != CONTROL and ops[p] in LOOP_BACK_OPS):
                    continue
                indegree[gc_] += 1
                succ[gp].append(gc_)
        for k in range(n):
            if group[k] != k:
                indegree[k] = -1  # merged into its group
        seen = len(kahn_order(indegree, succ))  # merged nodes (-1) are never started nor reached
    if seen == total - sum(len(p.removed) for p in plans):
        return []
    stuck = on_cycles([max(d, 0) for d in indegree], succ)
    return [plans[k - n] for k in stuck if k >= n]
