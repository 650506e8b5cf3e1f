"""Associative and commutative chains: ``Mul``, ``Add``/``AddV2``, ``Maximum``, ``Minimum``
nested in any grouping are one operation of several operands.

A pattern's op of such a family with three operands or more (its unlabelled nested ops of the
same family inlined, :func:`chain_leaves`) matches a graph's chain by its operands: the
chain is cut into as many operands as the pattern has, every way it can be (:func:`chain_cuts`,
the most expanded cut first), and the pattern's operands are assigned to the cut's in every
order.  A chain splits through the nodes of its family and through spellings of the same
operation (``Square(x)`` and ``Pow(x, k)`` are products of x, ``a / b`` is ``a *
Reciprocal(b)``, ``a - b`` is ``a + (-b)``).  Cutting is bounded: at most
:data:`MAX_CHAIN_LEAVES` operands, :data:`MAX_CUTS` cuts.  A chain member read from outside
the chain is a member like any other: the fusion refuses to remove a node read outside.

:func:`clip_epsilon` reads a square root's argument ``Maximum(v, c)`` (a Maximum chain) as an
epsilon form.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence

from .canonical import (
    NodeView, Term, Virtual, direct_view, power_factors, producer, resolved, rewrites, scalar_constant, usable,
)
from .pattern import Op, as_var
from .vocabulary import CONTROL, FORWARDING_OPS

if TYPE_CHECKING:  # pragma: no cover
    from .matching import PatternMatcher

#: The associative and commutative op families; a chain mixes the types of one family.
FAMILY = {"Mul": "Mul", "Add": "Add", "AddV2": "Add", "Maximum": "Maximum", "Minimum": "Minimum"}
#: A chain is cut into at most this many operands, and at most this many cuts are tried.
MAX_CHAIN_LEAVES = 8
MAX_CUTS = 64
#: ``Maximum(v, c)`` under a square root is an epsilon form for ``0 <= c <=`` this.
MAX_CLIP_EPSILON = 1e-3
#: Per chain family, the op types of nodes a chain may split into operands besides its own.
CHAIN_SPLITS: dict[str, frozenset[str]] = {
    "Mul": frozenset({"Mul", "Square", "Pow", "RealDiv", "Div"}),
    "Add": frozenset({"Add", "AddV2", "Sub"}),
    "Maximum": frozenset({"Maximum"}),
    "Minimum": frozenset({"Minimum"}),
}


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


def _expansion(m: "PatternMatcher", term: Term, family: str) -> tuple[NodeView, list[int]] | None:
    """The operands ``term`` splits into within a chain of ``family`` (its node view and the
    forwarding reads passed), or None when it is an operand itself."""
    if isinstance(term, Virtual):
        return None
    ops = m.index.ops
    if ops[term[0]] not in FORWARDING_OPS and ops[term[0]] not in CHAIN_SPLITS.get(family, ()):
        return None  # most operands: no node the chain splits through, nor a read of one
    node, port, passed = resolved(m, term)  # type: ignore[misc]
    if port != 0 or not usable(m, node):
        return None
    op = ops[node]
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


def chain_cuts(m: "PatternMatcher", root: NodeView, family: str, count: int) -> Iterator[Cut]:
    """The ways to cut the chain at ``root`` into exactly ``count`` operands, made as they are
    asked for: each a list of ``(operand, where it is read)`` and the chain nodes inside the
    cut (most expanded first; at most :data:`MAX_CUTS`).  A chain of ``count`` operands or
    fewer when cut as far as it goes (most chains a pattern meets) has that one cut or none,
    known without a search; others are searched (:func:`searched_cuts`)."""
    whole = _known_whole_cut(m, root, family, count)
    if whole is None:
        return searched_cuts(m, root, family, count)
    return iter([whole] if whole[0] else ())


def node_chain_cuts(m: "PatternMatcher", node: int, family: str, count: int) -> Iterator[Cut]:
    """:func:`chain_cuts` of the chain at node ``node`` as it is (its :func:`.canonical.direct_view`),
    the view made only when the cuts are searched."""
    whole = _known_node_whole_cut(m, node, family, count)
    if whole is None:
        return searched_cuts(m, direct_view(m, node), family, count)
    return iter([whole] if whole[0] else ())


def searched_cuts(m: "PatternMatcher", root: NodeView, family: str, count: int) -> Iterator[Cut]:
    """:func:`chain_cuts` by searching every grouping of the chain's nodes, whatever the chain."""

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

    made = 0
    for leaves, members in children(root, 0, min(count, MAX_CHAIN_LEAVES)):
        if len(leaves) == count:
            yield leaves, members
            made += 1
            if made >= MAX_CUTS:
                return


def _known_whole_cut(m: "PatternMatcher", root: NodeView, family: str, count: int) -> Cut | None:
    """:func:`_whole_cut`, worked out once per node, family and count when the matcher may use
    every node and ``root`` is the node as it is (the patterns of a pass, and the forms of one
    pattern, cut the same nodes)."""
    if m.inside is not None or m.view.node_views.get(root.anchor) is not root:
        return _whole_cut(m, root, family, count)
    return _known_node_whole_cut(m, root.anchor, family, count)


def _known_node_whole_cut(m: "PatternMatcher", node: int, family: str, count: int) -> Cut | None:
    """:func:`_known_whole_cut` of the chain at node ``node`` as it is, read from the index (the
    same cut as from its direct view, whose inputs are the node's data inputs)."""
    known = m.view.whole_cuts if m.inside is None else None
    key = (node, family, count)
    cut = _UNKNOWN if known is None else known.get(key, _UNKNOWN)
    if cut is _UNKNOWN:
        data = [t for t in m.index.inputs[node] if t[1] != CONTROL]
        name = m.index.names[node]
        cut = _whole_cut_of(m, [(data[k], (name, k)) for k in range(len(data) - 1, -1, -1)], family, count)
        if known is not None:
            known[key] = cut
    return cut


#: What a cache holds for a key it has not worked out yet.
_UNKNOWN: Any = object()


def _whole_cut(m: "PatternMatcher", root: NodeView, family: str, count: int) -> Cut | None:
    """The chain at ``root`` cut as far as it goes, when that is all :func:`chain_cuts` needs to
    know: when it has exactly ``count`` operands, that cut (the only one of ``count``: each
    split makes one operand two or more, so any other cut has fewer); when it has fewer, no cut
    (``([], [])``); else, or when a split would not add an operand, None.  The operands and
    nodes are in the order the general search gives them (depth first, inputs in order)."""
    return _whole_cut_of(m, list(zip(reversed(root.inputs), reversed(root.wheres), strict=False)), family, count)


def _whole_cut_of(m: "PatternMatcher", stack: list[tuple[Term, tuple[str, int]]], family: str,
                  count: int) -> Cut | None:
    """:func:`_whole_cut` of the chain whose root's inputs and where each is read are ``stack``
    (the last input first; taken over)."""
    total = len(stack)  # operands and terms left to look at: grows only when a term splits
    if count > MAX_CHAIN_LEAVES or total < 2 or total > count:
        return None
    leaves: list[tuple[Term, tuple[str, int]]] = []
    members: list[int] = []
    ops, names, inputs, splits = m.index.ops, m.index.names, m.index.inputs, CHAIN_SPLITS.get(family, ())
    inside = m.inside
    while stack:
        term, where = stack.pop()
        if isinstance(term, Virtual) or (op := ops[term[0]]) not in splits and op not in FORWARDING_OPS:
            leaves.append((term, where))  # most operands: nothing the chain splits through
        elif term[1] == 0 and FAMILY.get(op) == family and (inside is None or term[0] in inside):
            # a node of the chain's own family read directly: its inputs, without a view of it
            node = term[0]
            data = [t for t in inputs[node] if t[1] != CONTROL]
            if len(data) < 2:
                return None
            members.append(node)
            name = names[node]
            stack.extend([(data[k], (name, k)) for k in range(len(data) - 1, -1, -1)])
            total += len(data) - 1
        elif (expanded := _expansion(m, term, family)) is None:
            leaves.append((term, where))
        else:
            view, passed = expanded
            if len(view.inputs) < 2:
                return None
            members.extend(passed)
            members.extend(view.members)
            stack.extend(zip(reversed(view.inputs), reversed(view.wheres), strict=False))
            total += len(view.inputs) - 1
        if total > count:
            return None
    return (leaves, members) if len(leaves) == count else ([], [])


def clip_epsilon(m: "PatternMatcher", term: Term) -> tuple[Term, tuple[int, int] | None, list[int], float] | None:
    """A square root's argument ``Maximum(v, c)`` - a chain of Maximums, in any grouping, of one
    tensor v and scalar constants, the largest c in ``[0, MAX_CLIP_EPSILON]``: ``(v, the tensor
    of c or None when c = 0, the nodes of the chain, c)``.  Under the root, ``max(v, 0)`` is v
    (a variance is never negative) and ``max(v, tiny)`` an epsilon form."""
    found = producer(m, term, "Maximum")
    if found is None:
        return None
    root = direct_view(m, found[0])
    first = next(chain_cuts(m, root, "Maximum", operand_count(m, root, "Maximum")), None)
    if first is None:
        return None
    operands, members = first
    value: Term | None = None
    best: tuple[tuple[int, int], float] | None = None
    nodes = [*found[1], found[0], *members]
    for operand, _ in operands:
        c = None if isinstance(operand, Virtual) else scalar_constant(m, operand)
        if c is None or isinstance(operand, Virtual):
            if value is not None:
                return None  # two tensors: no clip of one
            value = operand
        elif best is None or c[0] > best[1]:
            best = (operand, c[0])
    if value is None or best is None or not 0.0 <= best[1] <= MAX_CLIP_EPSILON:
        return None
    return value, (best[0] if best[1] > 0 else None), nodes, best[1]
