"""What the scale and the masking steps of an attention match amount to: the ``scale``,
the optional ``bias`` and ``mask`` inputs, ``is_causal`` and ``mask_fill``.

The steps between the scaled scores and the softmax, innermost first, are additive terms
(or a subtracted one, keras-self-attention's ``x - 1e4 * (1 - keep)``: the mask, subtracted),
selections ``where(keep, x, fill)`` and GPT-2's ``x * b - c * (1 - b)`` (which is
``where(b, x, -c)`` for a 0/1 band ``b``).  A scalar constant added to every score
changes no softmax (transformers' "stable softmax" adds 1e-9) and is dropped.  A keep
mask computed from constants only whose value is exactly causal becomes ``is_causal``
(its nodes go with the fused op); any other mask stays an input.  The op applies, in
this order, a bias, the causal mask, one mask; the steps of the graph must come in that
order (two additive terms: the first is the bias), or the match is refused.  A term added
to the scores viewed per window (Swin, :mod:`.views`) can only be that mask.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ....core.fusion.refusal import fail
from ....core.graph.matching import PatternMatch
from ....core.graph.constant_eval import NotConstant
from .dims import evaluator, shape
from .patterns import MAX_STEPS
from .views import windows
from ....core.fusion.plan import is_const_like
from ....core.graph.vocabulary import ADD_OPS, CONTROL


@dataclass
class Masking:
    bias: str | None = None  # a variable of the match
    mask: str | None = None
    mask_is_bool: bool = False
    is_causal: bool = False
    fill: float | None = None
    mask_subtracted: bool = False  # the float mask is subtracted from the scores, not added
    zero_dropped: bool = False  # the probabilities of dropped keys are zeroed after the softmax
    windows: int = 0  # the mask is added to the scores viewed per window (Swin)
    view_shapes: set[tuple[int, int]] = field(default_factory=set)  # the shapes of those views
    absorbed: set[int] = field(default_factory=set)
    dropped: list[str] = field(default_factory=list)  # scalar shifts left out


def scale_of(match: PatternMatch, k_scaled_inside: bool) -> float:
    """The product of every scale factor on q, k and the scores; refused (:func:`fail`) otherwise."""
    scale = 1.0
    for where in ("q", "k", "s"):
        if where == "k" and k_scaled_inside:
            continue
        if f"{where}_scale" not in match.nodes:
            continue
        what = {"q": "the query", "k": "the key", "s": "the product"}[where]
        node = match.nodes[f"{where}_scale"]
        if match.view.index.ops[node] == "Mul":
            scale *= _factor_value(match, where, what)
        else:  # a division: by its divisor as the graph computes it (the pattern may have read it as a product)
            scale /= _divisor_value(match, node, where, what)
    return scale


def _divisor_value(match: PatternMatch, node: int, prefix: str, what: str) -> float:
    """What the division ``node`` divides by, folded from the graph's constants; the bound factor when
    the divisor is not one the graph computes from constants alone."""
    index = match.view.index
    divisor = [t for t in index.inputs[node] if t[1] >= 0][1]
    folded = match.view.folded_constant(divisor[0]) if divisor[1] == 0 else None
    if folded is None:
        return _factor_value(match, prefix, what)
    value = folded[0]
    if value.size != 1:
        fail(f"{what} is divided by a constant of shape {list(value.shape)}, not a scalar: "
             "not a scaled dot product")
    factor = float(value.reshape(-1)[0])
    if not math.isfinite(factor) or factor == 0.0:
        fail(f"{what} is divided by {factor}")
    return factor


def _factor_value(match: PatternMatch, prefix: str, what: str) -> float:
    consts = match.consts
    if f"{prefix}_const" in consts:
        value = consts[f"{prefix}_const"]
        if value.size != 1:
            fail(f"{what} is scaled by a constant of shape {list(value.shape)}, not a scalar: "
                 "not a scaled dot product")
        factor = float(value.reshape(-1)[0])
    elif f"{prefix}_sqrt_of" in consts:
        factor = math.sqrt(float(consts[f"{prefix}_sqrt_of"].reshape(-1)[0]))
    else:
        factor = 1.0 / math.sqrt(float(consts[f"{prefix}_rsqrt_of"].reshape(-1)[0]))
    if not math.isfinite(factor) or factor == 0.0:
        fail(f"{what} is scaled by {factor}")
    return factor


def masking(match: PatternMatch) -> Masking:
    """The bias, mask and causality the steps amount to; refused (:func:`fail`) otherwise."""
    out = Masking()
    steps: list[tuple[str, str | None]] = []  # (kind, variable) innermost first
    fills: list[float] = []
    keeps: dict[str, str] = {}  # the keep mask of each select step: "causal" or "mask" -> variable
    ops = match.view.index.ops
    for n in range(1, MAX_STEPS + 1):
        step = ops[match.nodes[f"step{n}"]] if f"step{n}" in match.nodes else None
        if step in ADD_OPS:
            term = match.tensor(f"term{n}")
            value = match.view.const_value_of(term[0]) if term[1] == 0 else None
            if f"window_split{n}" in match.nodes:  # a term added per window
                if out.windows:
                    fail("two windowed masks")
                out.windows, out.view_shapes = windows(match, n)
                steps.append(("window", f"term{n}"))
                continue
            if value is not None and value.size == 1:
                out.dropped.append(match.tensor_name(f"term{n}"))
                continue
            steps.append(("add", f"term{n}"))
        elif step in ("Select", "SelectV2"):
            fills.append(_fill_value(match, n))
            causal = _causal_nodes(match, f"keep{n}")
            if causal is not None:
                out.absorbed |= causal
                steps.append(("causal", None))
                keeps["causal"] = f"keep{n}"
            else:
                steps.append(("select", f"keep{n}"))
                keeps["mask"] = f"keep{n}"
        elif step == "Sub" and f"band_c{n}" not in match.consts:  # x - term
            term = match.tensor(f"term{n}")
            value = match.view.const_value_of(term[0]) if term[1] == 0 else None
            row_max = _row_max(match, n)
            if (value is not None and value.size == 1) or row_max is not None:
                out.dropped.append(match.tensor_name(f"term{n}"))  # no softmax changes
                out.absorbed |= row_max or set()
                continue
            steps.append(("sub", f"term{n}"))
        elif step == "Sub":
            causal = _causal_nodes(match, f"band{n}", why=True)
            fills.append(-float(match.consts[f"band_c{n}"].reshape(-1)[0]))
            out.absorbed |= causal  # type: ignore[arg-type]
            steps.append(("causal", None))
    additive = [name for kind, name in steps if kind == "add" and name is not None]
    if len(steps) == 1 and additive:  # one additive mask and nothing else: is it exactly causal?
        causal_add = _additive_causal(match, additive[0])
        if causal_add is not None:
            out.absorbed |= causal_add[0]
            fills.append(causal_add[1])
            steps = [("causal", None)]
    if len(set(fills)) > 1:
        fail(f"masked scores become different values ({', '.join(map(str, fills))})")
    if fills:
        out.fill = fills[0]
    _assign(steps, out)
    if "zero_dropped" in match.nodes:
        _zeroed_after(match, out, keeps)
    return out


def _fill_value(match: PatternMatch, n: int) -> float:
    """What selection step ``n`` gives the dropped scores: its fill, a scalar or one number over a
    shape that adds no axis to the scores (``tf.ones_like(scores) * c``)."""
    fill = match.consts[f"fill{n}"]
    if fill.size != 1:
        scores = shape(match.view, (match.nodes[f"step{n}"], 0))
        if scores is None or len(scores) < fill.ndim or list(fill.shape) != scores[len(scores) - fill.ndim:]:
            fail(f"the dropped scores are filled from a constant of shape {list(fill.shape)}, the scores are "
                 f"{scores}")
    return float(fill.reshape(-1)[0])


def _row_max(match: PatternMatch, n: int) -> set[int] | None:
    """When step ``n`` is ``x - max(x, axis=-1, keepdims=True)`` (the shift a softmax written by hand
    takes, which changes no softmax): the nodes of the max (only the step reads it), else None."""
    view, index = match.view, match.view.index
    step = match.nodes[f"step{n}"]
    term = match.tensor(f"term{n}")
    node = term[0]
    data = [t for t in index.inputs[node] if t[1] != CONTROL]
    x = [t for t in index.inputs[step] if t[1] != CONTROL][0]
    if term[1] != 0 or index.ops[node] != "Max" or len(data) != 2 or data[0] != x:
        return None
    axes = view.const_value_of(data[1][0])
    rank = len(shape(view, x) or [])
    attrs = index.nodes[node].attr
    if axes is None or axes.size != 1 or int(axes.reshape(-1)[0]) not in (-1, rank - 1) or \
            "keep_dims" not in attrs or not attrs["keep_dims"].b:
        return None
    if any(c != step for c, _, _ in index.consumers[node]):
        return None
    return {node, *(view.constant_chain(data[1][0]) or [data[1][0]])}


def _zeroed_after(match: PatternMatch, out: Masking, keeps: dict[str, str]) -> None:
    """Keras' masked softmax zeroes the dropped keys' probabilities after the softmax,
    ``where(keep, p, 0)``, with the keep mask it selected the scores by: the op zeroes them
    too (a query whose every key is dropped then gets zeros).  After a causal selection it
    changes nothing (every query keeps a key; the dropped ones already weigh 0)."""
    if out.mask_is_bool and _same_value(match, match.tensor("keep_after"), match.tensor(keeps["mask"])):
        out.zero_dropped = True
        return
    causal_kept = (out.is_causal and out.mask is None and "causal" in keeps
                   and (out.fill or 0.0) <= ADDITIVE_CAUSAL_AT_MOST
                   and _same_value(match, match.tensor("keep_after"), match.tensor(keeps["causal"])))
    if causal_kept:
        causal = _causal_nodes(match, "keep_after")
        if causal is not None:
            out.absorbed |= causal
            return
    fail(f"the probabilities are zeroed by a mask ({match.tensor_name('keep_after')!r}) other "
         "than the one that selected the scores")


def _same_value(match: PatternMatch, a: tuple[int, int], b: tuple[int, int], depth: int = 12) -> bool:
    """Whether two tensors hold the same value: the same tensor, equal constants, or the same
    op with the same attributes on inputs that hold the same values (two copies of one
    computation, as Keras makes of a mask)."""
    view = match.view
    a, b = (view.forwarded(a[0]), a[1]), (view.forwarded(b[0]), b[1])
    if a == b:
        return True
    if a[1] != b[1] or depth == 0:
        return False
    va, vb = view.const_value_of(a[0]), view.const_value_of(b[0])
    if va is not None or vb is not None:
        return va is not None and vb is not None and va.dtype == vb.dtype and np.array_equal(va, vb)
    index = view.index
    na, nb = index.nodes[a[0]], index.nodes[b[0]]
    if na.op != nb.op or {k: v for k, v in na.attr.items() if not k.startswith("_")} != {
            k: v for k, v in nb.attr.items() if not k.startswith("_")}:
        return False
    ia = [t for t in index.inputs[a[0]] if t[1] >= 0]
    ib = [t for t in index.inputs[b[0]] if t[1] >= 0]
    return len(ia) == len(ib) and all(_same_value(match, x, y, depth - 1) for x, y in zip(ia, ib, strict=True))


def _assign(steps: list[tuple[str, str | None]], out: Masking) -> None:
    kinds = [k for k, _ in steps]
    order = "bias, causal mask, mask"
    if kinds.count("causal") > 1:
        fail("two causal masks")
    if "causal" in kinds:
        out.is_causal = True
        c = kinds.index("causal")
        before, after = steps[:c], steps[c + 1:]
    elif len(steps) == 2:
        before, after = steps[:1], steps[1:]
    else:
        before, after = [], steps
    if len(before) > 1 or len(after) > 1 or any(k != "add" for k, _ in before):
        fail(f"the scores are masked by {' then '.join(kinds)}: the op applies at most a "
             f"{order}, in this order (a subtracted term only as the mask)")
    if before:
        out.bias = before[0][1]
    if after:
        kind, name = after[0]
        out.mask, out.mask_is_bool, out.mask_subtracted = name, kind == "select", kind == "sub"


def _causal_nodes(match: PatternMatch, name: str, why: bool = False) -> set[int] | None:
    """The nodes computing the keep mask bound to ``name`` when its value is exactly causal
    for these scores (only those no node outside the result reads), else None; with ``why``,
    refused (:func:`fail`) saying why it is not causal instead."""
    sub = evaluator(match.view)
    tensor = match.tensor(name)
    try:
        value = sub.value(tensor)
    except NotConstant as reason:
        if why:
            fail(f"the band {match.tensor_name(name)!r} of x * b - c * (1 - b) is not computed "
                 f"from constants ({reason}): cannot tell it is causal")
        return None
    problem = _not_causal(value, shape(match.view, match.tensor("scores")))
    if problem is not None:
        if why:
            fail(f"the band {match.tensor_name(name)!r} of x * b - c * (1 - b) {problem}")
        return None
    nodes = set() if sub.reads_shapes else _absorbable(match, sub.nodes)
    if nodes is None and why:
        fail(f"the band {match.tensor_name(name)!r} of x * b - c * (1 - b) is causal but computed from a "
             "tensor other nodes read too: it cannot go with the fused op")
    return nodes


#: An additive mask counts as causal when what it adds to a dropped score is at most this:
#: exp of the difference then underflows (float32: below about -104; float16: -17), so the
#: dropped score weighs exactly nothing, as when it is replaced.
ADDITIVE_CAUSAL_AT_MOST = -1e4


def _additive_causal(match: PatternMatch, name: str) -> tuple[set[int], float] | None:
    """The nodes computing the additive term bound to ``name`` and the value it adds to the
    dropped scores, when it is computed from constants and adds exactly 0 to the scores a
    causal mask keeps and one value (at most :data:`ADDITIVE_CAUSAL_AT_MOST`) to the others."""
    sub = evaluator(match.view)
    try:
        value = sub.value(match.tensor(name))
    except NotConstant:
        return None
    if value.dtype.kind != "f" or value.ndim < 2:
        return None
    dropped = value[..., ~_causal_keep(value.shape[-2], value.shape[-1])]
    if dropped.size == 0 or len(np.unique(dropped)) != 1 or float(dropped.reshape(-1)[0]) > ADDITIVE_CAUSAL_AT_MOST:
        return None
    keep = np.where(_causal_keep(value.shape[-2], value.shape[-1]), value != 0, False)
    if keep.any() or _not_causal(value == 0, shape(match.view, match.tensor("scores"))) is not None:
        return None
    nodes = set() if sub.reads_shapes else _absorbable(match, sub.nodes)
    return None if nodes is None else (nodes, float(dropped.reshape(-1)[0]))


def _causal_keep(rows: int, cols: int) -> np.ndarray:
    return np.arange(cols)[None, :] <= np.arange(rows)[:, None] + (cols - rows)


def _not_causal(value: np.ndarray, scores: list[int | None] | None) -> str | None:
    """Why ``value`` is not a causal keep mask for scores of that shape (None when it is)."""
    if value.dtype != np.bool_ and not np.isin(value, (0, 1)).all():
        return "holds values other than 0 and 1"
    if value.ndim < 2 or scores is None or len(scores) < value.ndim:
        return "has no [queries, keys] axes to compare with the scores'"
    rows, cols = value.shape[-2:]
    if [rows, cols] != scores[-2:]:
        return f"is [.., {rows}, {cols}], the scores [.., {scores[-2]}, {scores[-1]}]"
    if not (value.astype(bool) == _causal_keep(rows, cols)).all():
        return "is not the causal triangle (key j seen by query i iff j <= i)"
    return None


def _only_read_inside(match: PatternMatch, nodes: set[int]) -> set[int]:
    """Of ``nodes``, those whose every reader (data or control) is one of them or a member."""
    consumers = match.view.index.consumers
    kept = set(nodes)
    changed = True
    while changed:
        outside = {i for i in kept if any(c not in kept and c not in match.members for c, _, _ in consumers[i])}
        kept -= outside
        changed = bool(outside)
    return kept


def _absorbable(match: PatternMatch, nodes: set[int]) -> set[int] | None:
    """The nodes computing a mask that can go with the fused op (:func:`_only_read_inside`), or
    None when they cannot: one of them reads a tensor computed outside them that another node
    reads too (a causal mask shared by several layers), which the op would have to take."""
    kept = _only_read_inside(match, nodes)
    index = match.view.index
    for i in kept:
        for p, port in index.inputs[i]:
            if port != CONTROL and p not in kept and p not in match.members and not is_const_like(index, p):
                return None
    return kept
