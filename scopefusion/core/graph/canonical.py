"""Canonical views of graph nodes: what a node computes, whichever way the graph spells it.

A pattern names one spelling of a computation; the matcher finds the others here:

* **equivalent spellings** (:func:`rewrites`, here): a node of one op type seen as another,
  its inputs possibly *virtual* (a :class:`Virtual` term: an op the graph does not hold as a
  node of its own, such as the ``Neg(b)`` of ``a - b`` read as ``a + (-b)``);
* **associative and commutative chains** (:mod:`.chains`): ``Mul``, ``Add``/``AddV2``,
  ``Maximum``, ``Minimum`` nested in any grouping are one operation of several operands;
* **constants computed from constants** (:mod:`.constant_eval`), seen by their value.

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
                                            (:func:`.chains.clip_epsilon`)
``RealDiv(Sum(x, axes), n)``                ``Mean(x, axes)`` when n is the reduced count
``SquaredDifference(a, b)``                 ``Square(Sub(a, b))`` or ``Square(Sub(b, a))``, and back
==========================================  ==============================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, Union

import numpy as np

from .vocabulary import ADD_OPS, CONTROL, FLOAT_DTYPES

if TYPE_CHECKING:  # pragma: no cover
    from .matching import PatternMatcher

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


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node (or virtual op) as a pattern sees it: op type, input terms, where each input is
    read (consumer name, slot; for messages), the nodes it covers and the anchor."""

    op: str
    inputs: tuple[Term, ...]
    wheres: tuple[tuple[str, int], ...]
    members: tuple[int, ...]
    anchor: int
    attrs_of: int | None = None  # the node holding the attributes, when not the anchor


def spellings(types: Sequence[str] | frozenset[str]) -> frozenset[str]:
    """``types`` and every op type a node may have and be seen as one of them."""
    out = set(types)
    for t in types:
        out |= SPELT_AS.get(t, frozenset())
    return frozenset(out)


def _data(m: "PatternMatcher", node: int) -> list[tuple[int, int]]:
    return [t for t in m.index.inputs[node] if t[1] != CONTROL]


def resolved(m: "PatternMatcher", term: Term) -> tuple[int, int, list[int]] | None:
    """A real term followed through forwarding reads: ``(node, port, forwarding nodes)``."""
    if isinstance(term, Virtual):
        return None
    (node, port), passed = m._forward(term)
    return node, port, passed


def usable(m: "PatternMatcher", node: int) -> bool:
    return m.inside is None or node in m.inside


def _float_node(m: "PatternMatcher", node: int) -> bool:
    attrs = m.index.nodes[node].attr
    return "T" not in attrs or attrs["T"].type in FLOAT_DTYPES


def scalar_constant(m: "PatternMatcher", tensor: tuple[int, int]) -> tuple[float, tuple[int, ...]] | None:
    """A scalar constant's value and its nodes."""
    if tensor[1] != 0:
        return None
    folded = m.view.folded_constant(tensor[0])
    if folded is None or folded[0].size != 1 or folded[0].dtype.kind not in "fiu" and \
            folded[0].dtype.name != "bfloat16":
        return None
    return float(np.asarray(folded[0], np.float64).reshape(-1)[0]), folded[1]


def direct_view(m: "PatternMatcher", node: int) -> NodeView:
    """Node ``node`` as it is (made once per node and graph view: views are immutable)."""
    known = m.view.node_views.get(node)
    if known is None:
        name = m.index.names[node]
        data = _data(m, node)
        known = m.view.node_views[node] = NodeView(m.index.ops[node], tuple(data),
                                                   tuple((name, k) for k in range(len(data))), (node,), node)
    return known


def virtual_view(m: "PatternMatcher", v: Virtual) -> NodeView:
    name = m.index.names[v.anchor]
    return NodeView(v.op, v.inputs, tuple((name, k) for k in range(len(v.inputs))), v.members, v.anchor)


def producer(m: "PatternMatcher", term: Term, *types: str) -> tuple[int, list[int]] | None:
    """The node producing real ``term`` (through forwarding reads) when it is one of ``types``."""
    found = resolved(m, term)
    if found is None:
        return None
    node, port, passed = found
    if port != 0 or m.index.ops[node] not in types or not usable(m, node):
        return None
    return node, passed


def rewrites(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    """Views of ``node`` as one of ``types``, by the declared equivalences (:data:`RULES`); made
    once per node, types and graph view when the matcher may use every node (views are immutable)."""
    rules = RULES.get(m.index.ops[node], ())
    if not rules:
        return iter(())
    if m.inside is not None:
        return (view for targets, rule, _ in rules if targets & types for view in rule(m, node, types))
    key = (node, types)
    known = m.view.rewritten_views.get(key)
    if known is None:
        known = m.view.rewritten_views[key] = tuple(
            view for targets, rule, _ in rules if targets & types for view in rule(m, node, types))
    return iter(known)


Rule = Callable[["PatternMatcher", int, frozenset[str]], Iterator[NodeView]]
ADDS = frozenset(ADD_OPS)
DIVS = frozenset({"RealDiv", "Div"})


def _first(types: frozenset[str], among: frozenset[str]) -> str:
    return sorted(types & among)[0]


def _bias_add_as_add(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    attrs = m.index.nodes[node].attr
    if "data_format" not in attrs or attrs["data_format"].s in (b"NHWC", b"N...C", b""):
        view = direct_view(m, node)
        if len(view.inputs) == 2:
            yield NodeView(_first(types, ADDS), view.inputs, view.wheres, (node,), node)


def _add_as_bias_add(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    data, name = _data(m, node), m.index.names[node]
    for k in (1, 0) if len(data) == 2 else ():
        shape = m.view.static_shape(data[k], infer=False)
        if shape is not None and len(shape) == 1:
            yield NodeView("BiasAdd", (data[1 - k], data[k]), ((name, 1 - k), (name, k)), (node,), node)
            return


def _sub_as_add(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    view = direct_view(m, node)
    if len(view.inputs) == 2:
        neg = Virtual("Neg", (view.inputs[1],), (), node)
        yield NodeView(_first(types, ADDS), (view.inputs[0], neg), view.wheres, (node,), node)


def _add_as_sub(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    data, name = _data(m, node), m.index.names[node]
    for k in (1, 0) if len(data) == 2 else ():
        neg = producer(m, data[k], "Neg")
        if neg is not None:
            yield NodeView("Sub", (data[1 - k], _data(m, neg[0])[0]),
                           ((name, 1 - k), (m.index.names[neg[0]], 0)), (node, *neg[1], neg[0]), node)


def _div_as_mul(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    view = direct_view(m, node)
    if len(view.inputs) != 2 or not _float_node(m, node):
        return
    sqrt = producer(m, view.inputs[1], "Sqrt")
    if sqrt is not None:
        inverse = Virtual("Rsqrt", (_data(m, sqrt[0])[0],), (*sqrt[1], sqrt[0]), sqrt[0])
    else:
        inverse = Virtual("Reciprocal", (view.inputs[1],), (), node)
    yield NodeView("Mul", (view.inputs[0], inverse), view.wheres, (node,), node)


def _div_as_reciprocal(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    data = _data(m, node)
    one = scalar_constant(m, data[0]) if len(data) == 2 and _float_node(m, node) else None
    if one is not None and one[0] == 1.0:
        yield NodeView("Reciprocal", (data[1],), ((m.index.names[node], 1),), (node, *one[1]), node)


def _mul_as_div(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    data, name = _data(m, node), m.index.names[node]
    for k in (1, 0) if len(data) == 2 else ():
        rsqrt = producer(m, data[k], "Rsqrt")
        if rsqrt is not None:
            sqrt = Virtual("Sqrt", (_data(m, rsqrt[0])[0],), (*rsqrt[1], rsqrt[0]), rsqrt[0])
            yield NodeView(_first(types, DIVS), (data[1 - k], sqrt), ((name, 1 - k), (name, k)), (node,), node)


def _mul_as_square(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    data = _data(m, node)
    if len(data) == 2 and m._forward(data[0])[0] == m._forward(data[1])[0]:
        yield NodeView("Square", (data[0],), ((m.index.names[node], 0),), (node,), node)


_POWERS = {2.0: "Square", 0.5: "Sqrt", -0.5: "Rsqrt", -1.0: "Reciprocal"}


def _pow_as_root(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    data = _data(m, node)
    exponent = scalar_constant(m, data[1]) if len(data) == 2 else None
    if exponent is not None and _POWERS.get(exponent[0]) in types:
        yield NodeView(_POWERS[exponent[0]], (data[0],), ((m.index.names[node], 0),), (node, *exponent[1]), node)


def _power_as_mul(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    factors = power_factors(m, node)
    if factors is not None and len(factors[0]) == 2:
        name = m.index.names[node]
        yield NodeView("Mul", factors[0], ((name, 0), (name, 0)), factors[1], node)


def _reciprocal_as_rsqrt(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    data = _data(m, node)
    sqrt = producer(m, data[0], "Sqrt") if data else None
    if sqrt is not None:
        yield NodeView("Rsqrt", (_data(m, sqrt[0])[0],), ((m.index.names[sqrt[0]], 0),), (node, *sqrt[1], sqrt[0]),
                       node)


def _rsqrt_as_reciprocal(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    data = _data(m, node)
    if data:
        yield NodeView("Reciprocal", (Virtual("Sqrt", (data[0],), (), node),), ((m.index.names[node], 0),),
                       (node,), node)


def _squared_difference_as_square(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    """``(a - b)^2``, and ``(b - a)^2``: the same square."""
    data = _data(m, node)
    if len(data) == 2:
        where = ((m.index.names[node], 0),)
        yield NodeView("Square", (Virtual("Sub", (data[0], data[1]), (), node),), where, (node,), node)
        yield NodeView("Square", (Virtual("Sub", (data[1], data[0]), (), node),), where, (node,), node)


def _square_as_squared_difference(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    data = _data(m, node)
    sub = producer(m, data[0], "Sub") if data else None
    inner = _data(m, sub[0]) if sub is not None else []
    if sub is not None and len(inner) == 2:
        sub_name = m.index.names[sub[0]]
        yield NodeView("SquaredDifference", tuple(inner), ((sub_name, 0), (sub_name, 1)), (node, *sub[1], sub[0]),
                       node)


def _div_as_mean(m: "PatternMatcher", node: int, types: frozenset[str]) -> Iterator[NodeView]:
    data = _data(m, node)
    mean = _mean_of_sum(m, node, data) if len(data) == 2 else None
    if mean is not None:
        yield mean


#: Per graph op type, the equivalences that see it as another: ``(op types it can be seen as,
#: the rule giving the views, an op type the graph must hold for the rule to apply or None:
#: the node's own)``.
RULES: dict[str, tuple[tuple[frozenset[str], Rule, str | None], ...]] = {
    "BiasAdd": ((ADDS, _bias_add_as_add, None),),
    "Add": ((frozenset({"BiasAdd"}), _add_as_bias_add, None), (frozenset({"Sub"}), _add_as_sub, "Neg")),
    "AddV2": ((frozenset({"BiasAdd"}), _add_as_bias_add, None), (frozenset({"Sub"}), _add_as_sub, "Neg")),
    "Sub": ((ADDS, _sub_as_add, None),),
    "RealDiv": ((frozenset({"Mul"}), _div_as_mul, None), (frozenset({"Reciprocal"}), _div_as_reciprocal, None),
                (frozenset({"Mean"}), _div_as_mean, "Sum")),
    "Div": ((frozenset({"Mul"}), _div_as_mul, None), (frozenset({"Reciprocal"}), _div_as_reciprocal, None),
            (frozenset({"Mean"}), _div_as_mean, "Sum")),
    "Mul": ((DIVS, _mul_as_div, "Rsqrt"), (frozenset({"Square"}), _mul_as_square, None)),
    "Pow": ((frozenset(_POWERS.values()), _pow_as_root, None), (frozenset({"Mul"}), _power_as_mul, None)),
    "Square": ((frozenset({"Mul"}), _power_as_mul, None),
               (frozenset({"SquaredDifference"}), _square_as_squared_difference, "Sub")),
    "Reciprocal": ((frozenset({"Rsqrt"}), _reciprocal_as_rsqrt, "Sqrt"),),
    "Rsqrt": ((frozenset({"Reciprocal"}), _rsqrt_as_reciprocal, None),),
    "SquaredDifference": ((frozenset({"Square"}), _squared_difference_as_square, None),),
}

#: Per op type, the other op types a node may have and still be seen as that type; and the op
#: types of which a graph holds one when it holds such a node (the rule's witness).
SPELT_AS: dict[str, frozenset[str]] = {}
WITNESSES: dict[str, frozenset[str]] = {}
for _source, _rules in RULES.items():
    for _targets, _, _witness in _rules:
        for _target in _targets:
            SPELT_AS[_target] = SPELT_AS.get(_target, frozenset()) | {_source}
            WITNESSES[_target] = WITNESSES.get(_target, frozenset()) | {_witness or _source}
for _add in ADDS:  # v + epsilon under a square root may be spelt Maximum(v, tiny) (.chains.clip_epsilon)
    WITNESSES[_add] = WITNESSES[_add] | {"Maximum"}


def witnesses(types: Sequence[str] | frozenset[str]) -> frozenset[str]:
    """``types`` and the op types one of which a graph holds when it holds a node that can be
    seen as one of ``types`` (a Mean spelt ``Sum / n`` needs a Sum)."""
    out = set(types)
    for t in types:
        out |= WITNESSES.get(t, frozenset())
    return frozenset(out)


def seen_as(m: "PatternMatcher", node: int) -> frozenset[str]:
    """The op types node ``node`` can be seen as by the equivalences (asked once per node and
    view: every pattern of every pass looks its roots up here)."""
    cache = m.view.spelt_as
    known = cache.get(node)
    if known is None:
        found: set[str] = set()
        for targets, rule, _ in RULES.get(m.index.ops[node], ()):
            for view in rule(m, node, targets):  # an Add is seen as Add or AddV2 alike (RealDiv, Div too)
                found.update(ADDS if view.op in ADDS else DIVS if view.op in DIVS else (view.op,))
        known = cache[node] = frozenset(found)
    return known


def _mean_of_sum(m: "PatternMatcher", node: int, data: list[tuple[int, int]]) -> NodeView | None:
    """``Sum(x, axes) / n`` as ``Mean(x, axes)`` when n is the number of elements summed (the
    reduced dimensions of x's static shape)."""
    total = producer(m, data[0], "Sum")
    count = scalar_constant(m, data[1])
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
    known = [d for d in dims if d is not None]
    if len(known) != len(dims) or int(np.prod(known)) != count[0]:
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
        exponent = scalar_constant(m, data[1])
        if exponent is not None and exponent[0] in POWER_FACTORS:
            return (data[0],) * int(exponent[0]), (node, *exponent[1])
    return None
