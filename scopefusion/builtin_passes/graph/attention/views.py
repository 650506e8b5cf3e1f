"""Views of the scores an attention match holds, each a pair of ``Reshape`` nodes the pass
checks by the graph's shapes before the op takes what they mean as an attribute:

* a term added to the scores viewed per window (Swin's shifted-window mask): the scores
  ``[batch, ..]`` viewed ``[batch / windows, windows, ..]``, the term added, viewed back.  The
  views only split the batch axis and merge it again, every other axis kept; then the term is
  the op's mask added to the scores of window ``b % windows`` (attribute ``mask_windows``);
* query groups (Keras' grouped-query einsum ``btkgh,bskh->bkgts`` computed as a batch matmul):
  the query heads of each key/value head stacked along the rows of q, ``[batch, kv_heads,
  groups * q_len, size]``, the scores viewed ``[batch, kv_heads, groups, q_len, k_len]`` for the
  masks and the softmax and the probabilities viewed back (attribute ``query_groups``).

Told from the graph's own shapes (:mod:`.dims`), and where those do not tell them (Swin
computes every view's shape from ``Shape`` ops, through convolutions), from the value of a
tensor computed from constants or TensorFlow's shape inference, asked only then
(``GraphView.static_shape``); never guessed: a view that changes another axis, or sizes no
shape tells, is refused with the reason.
"""
from __future__ import annotations

from ....core.fusion.refusal import fail
from ....core.graph.constant_eval import NotConstant
from ....core.graph.matching import PatternMatch
from ....core.graph.vocabulary import CONTROL
from ....core.graph.view import GraphView
from .dims import Tensor, evaluator, shape


def windows(match: PatternMatch, n: int) -> tuple[int, set[Tensor]]:
    """The number of windows of the windowed step ``n`` and the shape operands of its two
    views (the fused op need not take them: what they do is checked here); refused
    (:func:`fail`) otherwise."""
    view = match.view
    split, merge = match.nodes[f"window_split{n}"], match.nodes[f"window_merge{n}"]
    scores = next(t for t in view.index.inputs[split] if t[1] != CONTROL)
    before, grouped, after = (_shape(view, t) for t in (scores, (split, 0), (merge, 0)))
    term = _shape(view, match.tensor(f"term{n}"))
    name = match.name(f"window_split{n}")
    if before is None or grouped is None or after is None or term is None:
        fail(f"cannot tell the shapes around the windowed view {name!r}")
    if len(grouped) != len(before) + 1 or len(after) != len(before):
        fail(f"{name!r} views the scores of rank {len(before)} with rank {len(grouped)}, and back with "
             f"rank {len(after)}: not the batch split into windows")
    rest = before[1:]
    if None in rest or None in grouped[2:] or None in after[1:]:
        fail(f"cannot tell that the windowed view {name!r} splits only the batch: the shapes "
             f"{before} -> {grouped} -> {after} are not all known")
    if grouped[2:] != rest or after[1:] != rest:
        fail(f"the windowed view {name!r} changes other axes than the batch ({before} -> {grouped} -> {after})")
    count = grouped[1]
    if count is None or count < 1:
        fail(f"cannot tell the number of windows of {name!r} ({grouped})")
    known = [d for d in (before[0], after[0]) if d is not None]
    if grouped[0] is not None and any(d != grouped[0] * count for d in known):
        fail(f"{name!r} splits a batch of {known[0]} into {grouped[0]} x {count}")
    if len(term) > len(grouped) or any(t not in (1, g) for t, g in zip(reversed(term), reversed(grouped),
                                                                          strict=False)):
        fail(f"the term {match.tensor_name(f'term{n}')!r} of shape {term} does not broadcast to the windowed "
             f"scores {grouped}")
    shapes = {[t for t in view.index.inputs[node] if t[1] != CONTROL][1] for node in (split, merge)}
    return count, shapes


def _shape(view: GraphView, tensor: Tensor) -> list[int | None] | None:
    """The shape by the local rules, or of the value when the tensor is computed from constants,
    completed by TensorFlow's shape inference when those leave an axis unknown."""
    local = shape(view, tensor)
    if local is not None and None not in local:
        return local
    try:  # a term computed from constants (Swin's mask): the shape of its value
        return list(evaluator(view).value(tensor).shape)
    except NotConstant:
        pass
    inferred = view.static_shape(tensor)
    if inferred is None or (local is not None and len(local) != len(inferred)):
        return local
    if local is None:
        return inferred
    return [a if a is not None else b for a, b in zip(local, inferred, strict=True)]


def query_groups(match: PatternMatch) -> tuple[int, set[Tensor]]:
    """``(groups, the views' shape operands)`` when the scores are viewed per query group
    (``rows_split`` ... ``rows_merge``), ``(0, set())`` when not; refused (:func:`fail`) otherwise."""
    split, merge = ("rows_split" in match.nodes), ("rows_merge" in match.nodes)
    if not split and not merge:
        return 0, set()
    if not (split and merge):
        fail("the scores are viewed in another shape for the softmax but the probabilities not viewed "
             "back, or the other way")
    view = match.view
    nodes = [match.nodes["rows_split"], match.nodes["rows_merge"]]
    scores = next(t for t in view.index.inputs[nodes[0]] if t[1] != CONTROL)
    before, grouped, after = (_shape(view, t) for t in (scores, (nodes[0], 0), (nodes[1], 0)))
    name = match.name("rows_split")
    if before is None or grouped is None or after is None or len(before) != 4 or len(grouped) != 5:
        fail(f"{name!r} does not view [batch, heads, rows, keys] scores as [batch, heads, groups, "
             f"queries, keys] ({before} -> {grouped})")
    if None in before[1:] or None in grouped[1:] or None in after[1:]:
        fail(f"cannot tell the shapes around the view {name!r}: {before} -> {grouped} -> {after}")
    heads, rows, keys = before[1:]
    _, kv_heads, groups, queries, columns = grouped
    if kv_heads != heads or columns != keys or (groups or 0) * (queries or 0) != rows or after[1:] != before[1:] or \
            (None not in (before[0], grouped[0]) and before[0] != grouped[0]):
        fail(f"the view {name!r} does not split the rows of the scores into query groups "
             f"({before} -> {grouped} -> {after})")
    shapes = {[t for t in view.index.inputs[node] if t[1] != CONTROL][1] for node in nodes}
    return int(groups or 0), shapes
