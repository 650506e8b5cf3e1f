"""``in_out_pair`` ranges: the nodes between given first and last nodes.

Each pair ``[in_nodes, out_nodes]`` spans the nodes that lie on a forward path from one
of its in nodes (heads) to one of its out nodes (tails), both ends included: one forward
sweep from the heads and one backward sweep from the tails over every edge (data,
control and loop back edges), intersected.  Names match nodes exactly, as in the
reference.

With ``in_out_pair_flag`` True the ranges are what the back end runs: every node in them
must be supported (constants are) and everything else stays on the host.  With False the
ranges stay on the host and every other supported node goes to the back end.  Neither
mode spreads along edges or checks resources, as in the reference.

Where the reference logs and skips, or silently falls back to its default placement,
this module raises one :class:`PartitionError` naming the culprit:

* a head or tail that is not in the graph (with close names: a cut-off name such as the
  seed's ``'import/conv2d_1/con'`` lists the names it begins);
* a head that reaches none of its pair's tails, or a tail no head reaches (the pair
  bounds nothing: an empty candidate set would make the reference place the graph
  its own way);
* an unsupported node inside a device range (its name, op and why);
* a range that splits a TF1 while loop (such a loop cannot run).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..graph.index import GraphIndex
from ..options.in_out_pair import InOutPair
from .errors import PartitionError, close_names
from .frames import LoopFrames

_SHOWN = 3


def _check_names(index: GraphIndex, pairs: Sequence[InOutPair]) -> None:
    problems = []
    for number, pair in enumerate(pairs, 1):
        for side, names in (("in_nodes", pair.inputs), ("out_nodes", pair.outputs)):
            for name in names:
                if name in index.index:
                    continue
                close = close_names(name, index.names)
                hint = f" (close: {', '.join(repr(c) for c in close)})" if close else ""
                problems.append(f"pair {number} {side} {name!r} is not in the graph{hint}")
    if problems:
        raise PartitionError("in_out_pair: " + "; ".join(problems) + "; allowed: exact node names of the graph")


def _sweep(starts: Sequence[int], neighbours: Any, mark: bytearray) -> None:
    stack = [s for s in starts if not mark[s]]
    for s in stack:
        mark[s] = 1
    while stack:
        i = stack.pop()
        for edge in neighbours[i]:
            j = edge[0]
            if not mark[j]:
                mark[j] = 1
                stack.append(j)


def pair_range(index: GraphIndex, pair: InOutPair, number: int) -> bytearray:
    """The nodes on a path from a head of ``pair`` to one of its tails (1 per node in range)."""
    heads = [index.index[n] for n in pair.inputs]
    tails = [index.index[n] for n in pair.outputs]
    after = bytearray(len(index))
    before = bytearray(len(index))
    _sweep(heads, index.consumers, after)
    _sweep(tails, index.inputs, before)
    lost = [f"in node {index.names[h]!r} reaches none of the out nodes" for h in heads if not before[h]]
    lost += [f"out node {index.names[t]!r} is reached by none of the in nodes" for t in tails if not after[t]]
    if lost:
        raise PartitionError(f"in_out_pair pair {number}: {'; '.join(lost)}; allowed: in nodes from which a path "
                             "leads to the out nodes")
    return bytearray(a & b for a, b in zip(after, before, strict=True))


def in_out_ranges(index: GraphIndex, pairs: Sequence[InOutPair]) -> list[int]:
    """Per node the number of the first pair whose range holds it (1-based), or 0."""
    _check_names(index, pairs)
    owner = [0] * len(index)
    for number, pair in enumerate(pairs, 1):
        inside = pair_range(index, pair, number)
        for i in range(len(owner)):
            if inside[i] and not owner[i]:
                owner[i] = number
    return owner


def check_loops_whole(index: GraphIndex, frames: LoopFrames, on_device: Sequence[bool],
                      free_const: bytearray) -> None:
    """Raise when a top-level TF1 loop has nodes on both sides."""
    for top in frames.top_levels():
        members = [m for m in frames.members(top) if not free_const[m]]
        inside = [m for m in members if on_device[m]]
        if inside and len(inside) != len(members):
            outside = [index.names[m] for m in members if not on_device[m]][:_SHOWN]
            raise PartitionError(
                f"in_out_pair: the range splits while loop {frames.names[top]!r}: {len(inside)} of its "
                f"{len(members)} nodes go to the back end (e.g. {index.names[inside[0]]!r}), the others stay on "
                f"the host (e.g. {', '.join(repr(o) for o in outside)}); allowed: a range holding all of a loop or "
                "none of it")


def range_error(index: GraphIndex, i: int, number: int, phrase: str) -> PartitionError:
    """The error for an unsupported node inside a device range."""
    return PartitionError(
        f"in_out_pair pair {number}: node {index.names[i]!r} ({index.ops[i]}) lies between the in and out nodes "
        f"but the back end does not run it ({phrase}); allowed: only supported nodes inside a range when "
        "in_out_pair_flag is True")

