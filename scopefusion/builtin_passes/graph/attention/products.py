"""The two products of an attention match: which operand is the query, whether k is read
transposed, and the layout of q, k, v and the output (from ``BatchMatMul``/``MatMul``
attributes and ranks, or from ``Einsum`` equations)."""
from __future__ import annotations

from dataclasses import dataclass

from ....core.fusion.refusal import fail
from ....core.graph.matching import PatternMatch
from .dims import rank


@dataclass
class Operands:
    """What the fused op reads: ``q``, ``k``, ``v`` name tensors of the match; ``layout`` their axes."""

    q: str
    k: str
    v: str
    layout: str
    k_scaled_inside: bool = False  # k's scale lies inside the k input (not part of the op's scale)
    transpose_q: bool = False  # q is given as [.., size, seq]
    transpose_k: bool = False


def _flag(match: PatternMatch, label: str, *names: str) -> bool:
    attrs = match.node(label).attr
    return any(attrs[n].b for n in names if n in attrs)


def _is_swap(perm: list[int]) -> bool:
    r = len(perm)
    return r >= 2 and perm == list(range(r - 2)) + [r - 1, r - 2]


def operands(match: PatternMatch) -> Operands:
    """The fused op's q, k, v tensors and their layout; refused (:func:`fail`) otherwise."""
    ops = match.view.index.ops
    transposed = "scores_transpose" in match.nodes
    if transposed and not _is_swap([int(p) for p in match.consts["scores_perm"].reshape(-1)]):
        fail("the scores are transposed other than over their last two axes")
    if ops[match.nodes["scores"]] == "Einsum":
        if transposed:
            fail("the scores of an einsum are transposed")
        q, k, layout, inside = _einsum_scores(match)
        parts = Operands(q, k, "v", layout, inside)
    else:
        parts = _matmul_scores(match, transposed)
    v_layout = _einsum_context(match) if ops[match.nodes["context"]] == "Einsum" else _matmul_context(match)
    if v_layout != parts.layout:
        fail(f"q and k have layout {parts.layout}, v and the output {v_layout}")
    return parts


_RANK_LAYOUTS = {4: "BNSH", 3: "BSH", 2: "SH"}


def _rank_layout(match: PatternMatch, label: str, *operands: str) -> str:
    """The layout of a product's operands by their rank (the larger, as the product broadcasts)."""
    ranks = [r for r in (rank(match.view, match.tensor(ref)) for ref in operands) if r is not None]
    r = max(ranks) if ranks else None
    if r not in _RANK_LAYOUTS:
        fail(f"the operands of {match.name(label)!r} have rank {r}: q, k and v must have rank "
             "2, 3 or 4" if r is not None else f"cannot tell the rank of {match.name(label)!r}")
    return _RANK_LAYOUTS[r]


def _matmul_scores(match: PatternMatch, transposed: bool) -> Operands:
    """The product is ``X' @ Y'`` (``X' = X^T`` when it reads X adjoint); the scores are that or,
    ``transposed``, ``Y'^T @ X'^T``, and must be ``q @ k^T``.  An operand the op must take
    transposed (``[.., size, seq]``) is accepted only from a Transpose of the pattern: a
    product with a plain tensor is no recognisable product of queries with keys."""
    adj_x = _flag(match, "scores", "adj_x", "transpose_a")
    adj_y = _flag(match, "scores", "adj_y", "transpose_b")
    second, inside = "k", False
    if "k_transpose" in match.nodes:
        perm = [int(p) for p in match.consts["k_perm"].reshape(-1)]
        if _is_swap(perm):
            adj_y = not adj_y
        else:  # another transpose (a head split, with or without the swap): the op reads its output
            second, inside = "k_transpose", True
    if transposed:  # q = Y'^T, k^T = X'^T
        q, transpose_q, k, transpose_k = second, adj_y is False, "q", adj_x
    else:  # q = X', k^T = Y'
        q, transpose_q, k, transpose_k = "q", adj_x, second, adj_y is False
    for ref, flag in ((q, transpose_q), (k, transpose_k)):
        if flag and ref != "k_transpose":
            fail("q is multiplied by k without transposing k: not a product of queries with keys")
    layout = _rank_layout(match, "scores", q, k)
    return Operands(q, k, "v", layout, inside, transpose_q, transpose_k)


def _matmul_context(match: PatternMatch) -> str:
    if _flag(match, "context", "adj_x", "transpose_a", "adj_y", "transpose_b"):
        fail("the product with v reads the probabilities or v transposed")
    return _rank_layout(match, "context", "v")


def _equation(match: PatternMatch, label: str) -> tuple[str, str, str]:
    text = match.node(label).attr["equation"].s.decode()
    inputs, _, output = text.replace(" ", "").partition("->")
    parts = inputs.split(",")
    if len(parts) != 2 or "." in text or not output or any(len(set(x)) != len(x) for x in (*parts, output)):
        fail(f"the einsum {text!r} is not a product of two operands without ellipsis")
    return parts[0], parts[1], output


def _einsum_scores(match: PatternMatch) -> tuple[str, str, str, bool]:
    a, b, out = _equation(match, "scores")
    if len(out) != 4 or len(a) != 4 or len(b) != 4:
        fail(f"the scores' einsum {a},{b}->{out} is not over [batch, heads, seq, size] operands")
    batch, heads, rows, cols = out[0], out[1], out[2], out[3]
    # the second operand as the pattern saw it: through a Transpose, the einsum reads that
    # Transpose's output (a head-split transpose), with any scale of k inside it
    inside = "k_transpose" in match.nodes
    second = "k_transpose" if inside else "k"
    if rows in a and rows not in b and cols in b:
        q_labels, k_labels, q, k = a, b, "q", second
    elif rows in b and rows not in a and cols in a:
        q_labels, k_labels, q, k = b, a, second, "q"  # the key is the first operand (Keras)
    else:
        fail(f"the scores' einsum {a},{b}->{out} does not give [.., queries, keys]")
    summed = set(a) & set(b) - set(out)
    if len(summed) != 1:
        fail(f"the scores' einsum {a},{b}->{out} does not sum over one axis")
    size = summed.pop()
    q_layout = _layout(q_labels, {batch: "B", heads: "N", rows: "S", size: "H"})
    k_layout = _layout(k_labels, {batch: "B", heads: "N", cols: "S", size: "H"})
    if q_layout != k_layout or q_layout not in ("BNSH", "BSNH"):
        fail(f"q and k have layouts {q_layout} and {k_layout}: not both BNSH or BSNH")
    return q, k, q_layout, inside


def _einsum_context(match: PatternMatch) -> str:
    p, v_labels, context = _equation(match, "context")
    if len(p) != 4 or len(v_labels) != 4 or len(context) != 4:
        fail(f"the context einsum {p},{v_labels}->{context} is not over rank-4 operands")
    v_size = (set(v_labels) & set(context)) - set(p)
    if len(v_size) != 1 or p[3] in context or p[2] in v_labels:
        fail(f"the context einsum {p},{v_labels}->{context} does not sum the values over the keys")
    roles = {p[0]: "B", p[1]: "N", p[3]: "S", v_size.pop(): "H"}
    v_layout = _layout(v_labels, roles)
    out_layout = _layout(context, {**roles, p[2]: "S"})
    if v_layout != out_layout:
        fail(f"v has layout {v_layout} and the output {out_layout}")
    return v_layout


def _layout(labels: str, roles: dict[str, str]) -> str:
    if any(label not in roles for label in labels):
        fail(f"the einsum operand {labels!r} has an axis that is not batch, head, sequence or size")
    return "".join(roles[label] for label in labels)
