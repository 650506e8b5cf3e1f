"""Grouped-query attention: k and v repeated over the heads before the products
(``repeat_kv``: ``tf.repeat``, Tile, Reshape + broadcast), found by what the repetition
does to a probe, not by how it is spelled.

From the tensor a product reads, the pass follows input 0 through ops that only move or
copy elements (:data:`COPYING_OPS`, their other inputs constants) to a source tensor of
static shape.  It then runs those ops with numpy on a probe (the numbers ``0 .. n-1`` in
the source's shape): when the result equals ``np.repeat(probe, group, axis=heads)``, the
product reads the source repeated ``group`` times per head, and the fused op takes the
source itself, with ``num_kv_heads`` its head count.
"""
from __future__ import annotations

import numpy as np

from ....core.graph.matching import PatternMatch
from ....core.graph.vocabulary import CONTROL, FORWARDING_OPS
from . import dims
from ....core.graph.constant_eval import NotConstant
from .masking import _only_read_inside

#: ops that only move or copy elements of their input 0
COPYING_OPS = frozenset({"Reshape", "Tile", "ExpandDims", "BroadcastTo", "Squeeze"})
#: most ops followed from the product down to the source
MAX_CHAIN = 8


def unrepeated(match: PatternMatch, ref: str, heads_axis: int, heads: int,
               rank: int) -> tuple[tuple[int, int], int, set[int]] | None:
    """``(source tensor, its heads, nodes repeating it)`` when the tensor ``ref`` names (of
    ``rank``) is a source of the same rank repeated over axis ``heads_axis`` (``heads`` in all),
    else None."""
    view = match.view
    index = view.index
    tensor = match.tensor(ref)
    chain: list[int] = []
    while len(chain) < MAX_CHAIN:
        node = view.forwarded(tensor[0]) if index.ops[tensor[0]] in FORWARDING_OPS else tensor[0]
        if index.ops[node] not in COPYING_OPS:
            break
        chain.append(node)
        tensor = next(t for t in index.inputs[node] if t[1] != CONTROL)
    if not chain:
        return None
    source = tensor
    sizes = [dims.dim(view, source, axis - rank) for axis in range(rank)]
    shape = [int(s) for s in sizes if s is not None]
    if len(shape) != rank:
        return None
    kv_heads = int(shape[heads_axis])
    if kv_heads == 0 or kv_heads == heads or heads % kv_heads:
        return None
    probe = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    sub = dims.evaluator(match.view, given={source: probe})
    try:
        repeated = sub.value(match.tensor(ref))
    except NotConstant:
        return None
    expected = np.repeat(probe, heads // kv_heads, axis=heads_axis)
    if repeated.shape != expected.shape or not np.array_equal(repeated, expected):
        return None
    sub.nodes.discard(source[0])
    nodes = set() if sub.reads_shapes else _only_read_inside(match, sub.nodes)
    return source, kv_heads, nodes
