"""Canonical views of graph nodes: what a node computes, whichever way the graph spells it.

A pattern names one spelling of a computation; the matcher finds the others here:

* **equivalent spellings** (:func:`rewrites`): a node of one op type seen as another, its
  inputs possibly *virtual* (a :class:`Virtual` term: an op the graph does not hold as a
  node of its own, such as the ``Neg(b)`` of ``a - b`` read as ``a + (-b)``);
* **associative and commutative chains** (:func:`chain_cuts`): ``Mul``, ``Add``/``AddV2``,
  ``Maximum``, ``Minimum`` nested in any grouping are one operation of several operands,
  each cut of the chain into operands tried in turn (bounded by :data:`MAX_CHAIN_LEAVES`).

The declared equivalences (each both ways where both make sense):

==========================================  ==============================================
graph spelling                              seen as
==========================================  ==============================================
``BiasAdd(x, b)`` (channels last)           ``Add(x, b)``; ``Add(x, b)``, b of rank 1: BiasAdd
``Sub(a, b)``                               ``Add(a, Neg(b))``; ``Add(a, Neg(b))``: ``Sub``
``RealDiv(a, Sqrt(b))``                     ``Mul(a, Rsqrt(b))``; ``Mul(a, Rsqrt(b))``: RealDiv
``RealDiv(a, d)``                           ``Mul(a, Reciprocal(d))`` (in a product)
``Pow(x, 2)``, ``Mul(x, x)``                ``Square(x)``; ``Square(x)``, ``Pow(x, k)``: x*...*x
``Pow(x, 0.5)`` / ``-0.5`` / ``-1``         ``Sqrt(x)`` / ``Rsqrt(x)`` / ``Reciprocal(x)``
``Reciprocal(Sqrt(v))``, ``RealDiv(1, d)``  ``Rsqrt(v)``, ``Reciprocal(d)``
``Sqrt(Maximum(v, c))``, ``0 <= c`` tiny    ``Sqrt(v + c)`` (an epsilon form), ``Sqrt(v)`` for c = 0
``RealDiv(Sum(x, axes), n)``                ``Mean(x, axes)`` when n is the reduced count
``SquaredDifference(a, b)``                 ``Square(Sub(a, b))``, and back
==========================================  ==============================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence, Union

import numpy as np

from .pattern import Op, as_var
from .vocabulary import CONTROL, FLOAT_DTYPES

if TYPE_CHECKING:  # pragma: no cover
    from .matching import PatternMatcher

#: The associative and commutative op families; a chain mixes the types of one family.
FAMILY = {"Mul": "Mul", "Add": "Add", "AddV2": "Add", "Maximum": "Maximum", "Minimum": "Minimum"}
#: A chain is cut into at most this many operands, and at most this many cuts are tried.
MAX_CHAIN_LEAVES = 8
MAX_CUTS = 64
#: ``Maximum(v, c)`` under a square root is an epsilon form for ``0 <= c <=`` this.
MAX_CLIP_EPSILON = 1e-3
#: ``Pow(x, k)`` is a product of k factors x for these k.
POWER_FACTORS = (2, 3, 4)


@dataclass(frozen=True)
class Virtual:
    """An operation a graph computes without a node of its own (the ``Neg(b)`` of ``a - b``
    seen as ``a + (-b)``): its op type, its input terms, the nodes it stands on and the one
    (``anchor``) that labels bind and messages name."""

    op: str
    inputs: tuple[Any, ...]
    members: tuple[int, ...]
    anchor: int


Term = Union[tuple[int, int], Virtual]


@dataclass(frozen=True)
class NodeView:
    """A node (or virtual op) as a pattern sees it: op type, input terms, where each input is
    read (consumer name, slot; for messages), the nodes it covers and the anchor."""

    op: str
    inputs: tuple[Term, ...]
    wheres: tuple[tuple[str, int], ...]
    members: tuple[int, ...]
    anchor: int
    attrs_of: int | None = None  # the node holding the attributes, when not the anchor


#: Per op type, the other op types a node may have and still be seen as that type (the
#: declared equivalences, read backwards).
SPELT_AS: dict[str, frozenset[str]] = {
    "Add": frozenset({"BiasAdd", "Sub"}),
    "AddV2": frozenset({"BiasAdd", "Sub"}),
    "BiasAdd": frozenset({"Add", "AddV2"}),
    "Sub": frozenset({"Add", "AddV2"}),
    "Mul": frozenset({"RealDiv", "Div", "Square", "Pow"}),
    "RealDiv": frozenset({"Mul"}),
    "Div": frozenset({"Mul"}),
    "Square": frozenset({"Pow", "Mul", "SquaredDifference"}),
    "Sqrt": frozenset({"Pow"}),
    "Rsqrt": frozenset({"Pow", "Reciprocal"}),
    "Reciprocal": frozenset({"Pow", "RealDiv", "Div", "Rsqrt"}),
    "SquaredDifference": frozenset({"Square"}),
    "Mean": frozenset({"RealDiv", "Div"}),
}
#: Per chain family, the op types of nodes a chain may split into operands besides its own.
CHAIN_SPLITS: dict[str, frozenset[str]] = {
    "Mul": frozenset({"Mul", "Square", "Pow", "RealDiv", "Div"}),
    "Add": frozenset({"Add", "AddV2", "Sub"}),
    "Maximum": frozenset({"Maximum"}),
    "Minimum": frozenset({"Minimum"}),
}


def spellings(types: Sequence[str] | frozenset[str]) -> frozenset[str]:
    """``types`` and every op type a node may have and be seen as one of them."""
    out = set(types)
    for t in types:
        out |= SPELT_AS.get(t, frozenset())
    return frozenset(out)


def is_family(types: Sequence[str]) -> str | None:
    """The family all of ``types`` belong to, or None."""
    families = {FAMILY.get(t) for t in types}
    return families.pop() if len(families) == 1 and None not in families else None


def chain_leaves(expr: Any) -> tuple[Any, ...] | None:
    """The operands of an associative, commutative op with its unlabelled nested ops of the same
    family inlined (``a * (b * c)`` is ``a * b * c``), when there are three or more."""
    family = is_family(expr.types)
    if family is None or not expr.inputs or expr.extra_inputs or expr.port != 0:
        return None
    out: list[Any] = []

    def inline(e: Any) -> None:
        e = as_var(e)
        if isinstance(e, Op) and e.label is None and not e.attrs and e.dtypes is None and e.port == 0 and \
                e.inputs and not e.extra_inputs and is_family(e.types) == family:
            for sub in e.inputs:
                inline(sub)
        else:
            out.append(e)
    for e in expr.inputs:
        inline(e)
    return tuple(out) if len(out) >= 3 else None


def _data(m: "PatternMatcher", node: int) -> list[tuple[int, int]]:
    return [t for t in m.index.inputs[node] if t[1] != CONTROL]


def _resolved(m: "PatternMatcher", term: Term) -> tuple[int, int, list[int]] | None:
    """A real term followed through forwarding reads: ``(node, port, forwarding nodes)``."""
    if isinstance(term, Virtual):
        return None
    (node, port), passed = m._forward(term)
    return node, port, passed


def _usable(m: "PatternMatcher", node: int) -> bool:
    return m.inside is None or node in m.inside


def _float_node(m: "PatternMatcher", node: int) -> bool:
    attrs = m.index.nodes[node].attr
    return "T" not in attrs or attrs["T"].type in FLOAT_DTYPES


def _scalar(m: "PatternMatcher", tensor: tuple[int, int]) -> tuple[float, tuple[int, ...]] | None:
    """A scalar constant's value and its nodes."""
    if tensor[1] != 0:
        return None
    folded = m.view.folded_constant(tensor[0])
    if folded is None or folded[0].size != 1 or folded[0].dtype.kind not in "fiu" and \
            folded[0].dtype.name != "bfloat16":
        return None
    return float(np.asarray(folded[0], np.float64).reshape(-1)[0]), folded[1]


def direct_view(m: "PatternMatcher", node: int) -> NodeView:
    """Node ``node`` as it is."""
    name = m.index.names[node]
    data = _data(m, node)
    return NodeView(m.index.ops[node], tuple(data), tuple((name, k) for k in range(len(data))), (node,), node)


def virtual_view(m: "PatternMatcher", v: Virtual) -> NodeView:
    name = m.index.names[v.anchor]
    return NodeView(v.op, v.inputs, tuple((name, k) for k in range(len(v.inputs))), v.members, v.anchor)


def _producer(m: "PatternMatcher", term: Term, *types: str) -> tuple[int, list[int]] | None:
    """The node producing real ``term`` (through forwarding reads) when it is one of ``types``."""
    found = _resolved(m, term)
    if found is None:
        return None
    node, port, passed = found
    if port != 0 or m.index.ops[node] not in types or not _usable(m, node):
        return None
    return node, passed


def rewrites(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    """Views of ``node`` as one of ``types``, by the declared equivalences."""
    op = m.index.ops[node]
    name = m.index.names[node]
    data = _data(m, node)
    view = direct_view(m, node)
    if op == "BiasAdd" and types & {"Add", "AddV2"} and len(data) == 2:
        attrs = m.index.nodes[node].attr
        if "data_format" not in attrs or attrs["data_format"].s in (b"NHWC", b"N...C", b""):
            yield NodeView(next(iter(sorted(types & {"Add", "AddV2"}))), view.inputs, view.wheres, (node,), node)
    if op in ("Add", "AddV2") and "BiasAdd" in types and len(data) == 2:
        for k in (1, 0):
            shape = m.view.static_shape(data[k], infer=False)
            if shape is not None and len(shape) == 1:
                order = (data[1 - k], data[k])
                yield NodeView("BiasAdd", order, ((name, 1 - k), (name, k)), (node,), node)
                break
    if op == "Sub" and types & {"Add", "AddV2"} and len(data) == 2:
        neg = Virtual("Neg", (data[1],), (), node)
        yield NodeView(sorted(types & {"Add", "AddV2"})[0], (data[0], neg), ((name, 0), (name, 1)), (node,), node)
    if op in ("Add", "AddV2") and "Sub" in types and len(data) == 2:
        for k in (1, 0):
            neg = _producer(m, data[k], "Neg")
            if neg is not None:
                members = (node, *neg[1], neg[0])
                yield NodeView("Sub", (data[1 - k], _data(m, neg[0])[0]),
                               ((name, 1 - k), (m.index.names[neg[0]], 0)), members, node)
    if op in ("RealDiv", "Div") and len(data) == 2 and _float_node(m, node):
        if "Mul" in types:
            sqrt = _producer(m, data[1], "Sqrt")
            if sqrt is not None:
                inverse = Virtual("Rsqrt", (_data(m, sqrt[0])[0],), (*sqrt[1], sqrt[0]), sqrt[0])
            else:
                inverse = Virtual("Reciprocal", (data[1],), (), node)
            yield NodeView("Mul", (data[0], inverse), view.wheres, (node,), node)
        if "Reciprocal" in types:
            one = _scalar(m, data[0])
            if one is not None and one[0] == 1.0:
                yield NodeView("Reciprocal", (data[1],), ((name, 1),), (node, *one[1]), node)
    if op == "Mul" and len(data) == 2:
        if types & {"RealDiv", "Div"}:
            for k in (1, 0):
                rsqrt = _producer(m, data[k], "Rsqrt")
                if rsqrt is not None:
                    sqrt = Virtual("Sqrt", (_data(m, rsqrt[0])[0],), (*rsqrt[1], rsqrt[0]), rsqrt[0])
                    yield NodeView(sorted(types & {"RealDiv", "Div"})[0], (data[1 - k], sqrt),
                                   ((name, 1 - k), (name, k)), (node,), node)
        if "Square" in types and m._forward(data[0])[0] == m._forward(data[1])[0]:
            yield NodeView("Square", (data[0],), ((name, 0),), (node,), node)
    if op == "Pow" and len(data) == 2:
        exponent = _scalar(m, data[1])
        if exponent is not None:
            wanted = {2.0: "Square", 0.5: "Sqrt", -0.5: "Rsqrt", -1.0: "Reciprocal"}.get(exponent[0])
            if wanted in types:
                yield NodeView(wanted, (data[0],), ((name, 0),), (node, *exponent[1]), node)
    if op in ("Square", "Pow") and "Mul" in types:
        factors = power_factors(m, node)
        if factors is not None and len(factors[0]) == 2:
            yield NodeView("Mul", factors[0], ((name, 0), (name, 0)), factors[1], node)
    if op == "Reciprocal" and "Rsqrt" in types:
        sqrt = _producer(m, data[0], "Sqrt") if data else None
        if sqrt is not None:
            yield NodeView("Rsqrt", (_data(m, sqrt[0])[0],), ((m.index.names[sqrt[0]], 0),),
                           (node, *sqrt[1], sqrt[0]), node)
    if op == "Rsqrt" and "Reciprocal" in types and data:
        yield NodeView("Reciprocal", (Virtual("Sqrt", (data[0],), (), node),), ((name, 0),), (node,), node)
    if op == "SquaredDifference" and "Square" in types and len(data) == 2:
        yield NodeView("Square", (Virtual("Sub", tuple(data), (), node),), ((name, 0),), (node,), node)
    if op == "Square" and "SquaredDifference" in types and data:
        sub = _producer(m, data[0], "Sub")
        if sub is not None:
            inner = _data(m, sub[0])
            if len(inner) == 2:
                sub_name = m.index.names[sub[0]]
                yield NodeView("SquaredDifference", tuple(inner), ((sub_name, 0), (sub_name, 1)),
                               (node, *sub[1], sub[0]), node)
    if op in ("RealDiv", "Div") and "Mean" in types and len(data) == 2:
        mean = _mean_of_sum(m, node, data)
        if mean is not None:
            yield mean


def _mean_of_sum(m: "PatternMatcher", node: int, data: list[tuple[int, int]]) -> NodeView | None:
    """``Sum(x, axes) / n`` as ``Mean(x, axes)`` when n is the number of elements summed (the
    reduced dimensions of x's static shape)."""
    total = _producer(m, data[0], "Sum")
    count = _scalar(m, data[1])
    if total is None or count is None:
        return None
    sum_node = total[0]
    inner = _data(m, sum_node)
    axes = m.view.folded_constant(inner[1][0]) if len(inner) == 2 and inner[1][1] == 0 else None
    shape = m.view.static_shape(inner[0], infer=False) if len(inner) == 2 else None
    if axes is None or shape is None:
        return None
    rank = len(shape)
    dims = [shape[int(a) % rank] if -rank <= int(a) < rank else None for a in np.asarray(axes[0]).reshape(-1)]
    if None in dims or int(np.prod(dims)) != count[0]:
        return None
    sum_name = m.index.names[sum_node]
    return NodeView("Mean", tuple(inner), ((sum_name, 0), (sum_name, 1)), (node, *total[1], sum_node, *count[1]),
                    node, attrs_of=sum_node)


def power_factors(m: "PatternMatcher", node: int) -> tuple[tuple[Term, ...], tuple[int, ...]] | None:
    """``Square(x)`` or ``Pow(x, k)`` (k of :data:`POWER_FACTORS`) as the factors of a
    product, ``(x, x, ...)``, and the nodes that computes them."""
    op = m.index.ops[node]
    data = _data(m, node)
    if op == "Square" and len(data) == 1:
        return (data[0], data[0]), (node,)
    if op == "Pow" and len(data) == 2:
        exponent = _scalar(m, data[1])
        if exponent is not None and exponent[0] in POWER_FACTORS:
            return (data[0],) * int(exponent[0]), (node, *exponent[1])
    return None


def _expansion(m: "PatternMatcher", term: Term, family: str) -> tuple[NodeView, list[int]] | None:
    """The operands ``term`` splits into within a chain of ``family`` (its node view and the
    forwarding reads passed), or None when it is an operand itself."""
    if isinstance(term, Virtual):
        return None
    node, port, passed = _resolved(m, term)  # type: ignore[misc]
    if port != 0 or not _usable(m, node):
        return None
    op = m.index.ops[node]
    if FAMILY.get(op) == family:
        return direct_view(m, node), passed
    if family == "Mul" and op in ("Square", "Pow"):
        factors = power_factors(m, node)
        if factors is not None:
            name = m.index.names[node]
            return NodeView("Mul", factors[0], tuple((name, 0) for _ in factors[0]), factors[1], node), passed
    if family in ("Mul", "Add") and op in ("RealDiv", "Div", "Sub"):
        wanted = frozenset({"Mul"} if family == "Mul" else {"Add"})
        for view in rewrites(m, node, wanted):
            return view, passed
    return None


def operand_count(m: "PatternMatcher", view: NodeView, family: str) -> int:
    """How many operands the chain at ``view`` has when cut as far as it goes (at most
    :data:`MAX_CHAIN_LEAVES` expansions deep)."""
    total, stack = 0, [(t, 0) for t in view.inputs]
    while stack:
        term, depth = stack.pop()
        expanded = _expansion(m, term, family) if depth < MAX_CHAIN_LEAVES else None
        if expanded is None:
            total += 1
        else:
            stack.extend((t, depth + 1) for t in expanded[0].inputs)
    return total


Cut = tuple[list[tuple[Term, tuple[str, int]]], list[int]]


def chain_cuts(m: "PatternMatcher", root: NodeView, family: str, count: int) -> list[Cut]:
    """The ways to cut the chain at ``root`` into exactly ``count`` operands: each a list of
    ``(operand, where it is read)`` and the chain nodes inside the cut (most expanded first)."""
    cuts: list[Cut] = []

    def operands(term: Term, where: tuple[str, int], budget: int) -> Iterator[Cut]:
        expanded = _expansion(m, term, family) if budget > 1 else None
        if expanded is not None:
            view, passed = expanded
            for inner, members in children(view, 0, budget):
                yield inner, [*passed, *view.members, *members]
        yield [(term, where)], []

    def children(view: NodeView, k: int, budget: int) -> Iterator[Cut]:
        if k == len(view.inputs):
            yield [], []
            return
        rest = len(view.inputs) - k - 1  # each later input takes at least one operand
        for first, members in operands(view.inputs[k], view.wheres[k], budget - rest):
            for more, more_members in children(view, k + 1, budget - len(first)):
                yield first + more, members + more_members

    for leaves, members in children(root, 0, min(count, MAX_CHAIN_LEAVES)):
        if len(leaves) == count:
            cuts.append((leaves, members))
            if len(cuts) >= MAX_CUTS:
                break
    return cuts


def clip_epsilon(m: "PatternMatcher", term: Term) -> tuple[Term, tuple[int, int] | None, list[int], float] | None:
    """A square root's argument ``Maximum(v, c)`` - a chain of Maximums, in any grouping, of one
    tensor v and scalar constants, the largest c in ``[0, MAX_CLIP_EPSILON]``: ``(v, the tensor
    of c or None when c = 0, the nodes of the chain, c)``.  Under the root, ``max(v, 0)`` is v
    (a variance is never negative) and ``max(v, tiny)`` an epsilon form."""
    found = _producer(m, term, "Maximum")
    if found is None:
        return None
    root = direct_view(m, found[0])
    cuts = chain_cuts(m, root, "Maximum", operand_count(m, root, "Maximum"))
    if not cuts:
        return None
    operands, members = cuts[0]
    value, best, nodes = None, None, [*found[1], found[0], *members]
    for operand, _ in operands:
        c = None if isinstance(operand, Virtual) else _scalar(m, operand)
        if c is None:
            if value is not None:
                return None  # two tensors: no clip of one
            value = operand
        elif best is None or c[0] > best[1]:
            best = (operand, c[0])
    if value is None or best is None or not 0.0 <= best[1] <= MAX_CLIP_EPSILON:
        return None
    return value, (best[0] if best[1] > 0 else None), nodes, best[1]
