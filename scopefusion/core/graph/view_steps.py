"""The steps that match an op expression through a view of a node (:mod:`.canonical`): another
spelling of the node, a virtual op, the operands of an associative chain (:mod:`.chains`) or
a square root's clip; and the small parts every op step shares (:func:`kept_if`,
:func:`at_input`, :func:`orders_of`).  See :mod:`.match_steps` for how steps work."""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from .canonical import NodeView, Virtual, direct_view, rewrites
from .chains import Cut, chain_cuts, clip_epsilon, is_family, node_chain_cuts, operand_count
from .pattern import Alt, Const, Op

if TYPE_CHECKING:  # pragma: no cover
    from .matching import PatternMatcher

Tensor = tuple[int, int]
Then = Callable[[], bool]
Step = Callable[["PatternMatcher", Any, Then], bool]

#: Unordered inputs are tried in every order up to this many orders.
MAX_ORDERS = 720


def kept_if(m: "PatternMatcher", mark: int, matched: bool) -> bool:
    """``matched``; when False, the bindings made since the trail stood at ``mark`` are undone."""
    if not matched:
        m._undo(mark)
    return matched




def orders_of(expr: Op, n: int) -> Callable[[list[Any]], list[list[tuple[int, Any]]]]:
    """The orders in which an op's inputs are tried, as ``(slot, tensor)`` lists."""
    if expr.commutative:
        def either(actual: list[Any]) -> list[list[tuple[int, Any]]]:
            slots = list(enumerate(actual))
            return [slots[:2], slots[1::-1]]
        return either
    if expr.unordered:
        def unordered(actual: list[Any]) -> list[list[tuple[int, Any]]]:
            slots = list(enumerate(actual))
            if n > 1 or len(slots) > n:
                return [list(o) for o in itertools.islice(itertools.permutations(slots, n), MAX_ORDERS)]
            return [slots[:n]]
        return unordered
    return lambda actual: [list(enumerate(actual[:n]))]



ViewInputs = Callable[["PatternMatcher", NodeView, Then], bool]


def rewritten(m: "PatternMatcher", expr: Op, node: int, passed: Sequence[int], inputs: ViewInputs | None,
               then: Then) -> bool:
    """``expr`` against ``node`` spelt another way (:func:`.canonical.rewrites`).  A failure inside
    one is reported only when it got three ops past the node; else the node's own type is what
    departs from the pattern."""
    before, start = m._best, m._progress
    m._best = None
    virtual_ok = takes_virtual(expr)
    for view in rewrites(m, node, frozenset(expr.types)):
        if not virtual_ok and any(isinstance(t, Virtual) for t in view.inputs):
            continue  # only ops match an op the graph has no node for: this view cannot match
        if view_step(m, expr, view, passed, inputs, then):
            return True
    inner, m._best = m._best, before
    if inner is not None and inner.progress >= start + 3 and (before is None or inner.progress > before.progress):
        m._best = inner
    return False


def takes_virtual(expr: Op) -> bool:
    """Whether an input of ``expr`` may match a virtual op (it is an op or alternatives, or a
    constant: a virtual op of a constant is one); kept on the expression."""
    known = expr.__dict__.get("_takes_virtual")
    if known is None:
        known = any(isinstance(e, (Op, Alt, Const)) for e in expr.inputs or ())
        object.__setattr__(expr, "_takes_virtual", known)
    return known


def view_step(m: "PatternMatcher", expr: Op, view: NodeView, passed: Sequence[int], inputs: ViewInputs | None,
               then: Then) -> bool:
    """``expr`` against a node seen through a view (another spelling, a virtual op, a chain):
    the type, port 0, the label (bound to the view's anchor) and the dtype read from the anchor."""
    label, anchor = expr.label, view.anchor
    if expr.types and view.op not in expr.types:
        m._fail(lambda: f"{m.name(anchor)!r} computes {view.op}, expected {expr.describe()}")
        return False
    if expr.port != 0:
        m._fail(lambda: f"{m.name(anchor)!r} computes one output, expected output {expr.port}")
        return False
    bound = m.nodes.get(label) if label is not None else None
    if bound is not None and bound != anchor:
        m._fail(lambda: f"label {label!r} is bound to {m.name(bound)!r}, but here it would be {m.name(anchor)!r}")
        return False
    if expr.attrs or expr.dtypes is not None:
        holder = view.attrs_of if view.attrs_of is not None else anchor
        if expr.attrs and view.attrs_of is None and view.members[:1] != (anchor,):
            m._fail(lambda: f"{m.name(anchor)!r} computes {view.op} without a node holding its attributes")
            return False
        problem = m._attr_problem(holder, expr)
        if problem is not None:
            m._fail(lambda: problem)
            return False
    trail = m._trail
    mark, progress = len(trail), m._progress
    _add_members(m, passed)
    _add_members(m, view.members)
    if label is not None and bound is None:
        m._bind(m.nodes, label, anchor)
        m._bind(m._label_exprs, label, expr)
    m._progress = progress + 1
    if kept_if(m, mark, then() if inputs is None else inputs(m, view, then)):
        return True
    m._progress = progress
    return False


def _add_members(m: "PatternMatcher", nodes: Sequence[int]) -> None:
    """The ``nodes`` the matcher may use become members of the match (on the trail)."""
    inside, members, trail = m.inside, m.members, m._trail
    for i in nodes:
        if i not in members and (inside is None or i in inside):
            members.add(i)
            trail.append((members, i))


def chain_inputs(expr: Op, steps: tuple[Step, ...]) -> ViewInputs:
    """Operands of a chain (``steps``: those of the pattern's operands): every cut of the graph's
    chain into as many operands as the pattern has, and every assignment of the pattern's
    operands to the cut's (each distinct operand tried once per position)."""
    family = is_family(expr.types) or ""
    count = len(steps)

    def inputs(m: "PatternMatcher", view: NodeView, then: Then) -> bool:
        cut = _assigned(m, chain_cuts(m, view, family, count), steps, then)
        if cut is None:
            _no_cut(m, view, family, count)
        return bool(cut)
    return inputs


def chain_node_inputs(expr: Op, steps: tuple[Step, ...]) -> Callable[["PatternMatcher", int, Then], bool]:
    """:func:`chain_inputs` of a node matched as it is (of the chain's own family), its view made
    only when needed (a cut searched, a failure written)."""
    family = is_family(expr.types) or ""
    count = len(steps)

    def inputs(m: "PatternMatcher", node: int, then: Then) -> bool:
        cut = _assigned(m, node_chain_cuts(m, node, family, count), steps, then)
        if cut is None:
            _no_cut(m, direct_view(m, node), family, count)
        return bool(cut)
    return inputs


def _assigned(m: "PatternMatcher", cuts: Iterator[Cut], steps: tuple[Step, ...], then: Then) -> bool | None:
    """Whether some assignment of the pattern's operands to some cut matched; None when there
    was no cut."""
    cut = None
    for operands, members in cuts:
        cut = False
        mark = len(m._trail)
        _add_members(m, members)
        if _assign(m, operands, [False] * len(operands), steps, 0, then):
            return True
        m._undo(mark)
    return cut


def _no_cut(m: "PatternMatcher", view: NodeView, family: str, count: int) -> None:
    m._fail(lambda: f"{m.name(view.anchor)!r} has {len(view.inputs)} inputs, expected {count} (operands "
                    f"of a {family} chain in any grouping; this chain has {operand_count(m, view, family)})")


def _assign(m: "PatternMatcher", operands: list[tuple[Any, tuple[str, int]]], used: list[bool],
            steps: tuple[Step, ...], k: int, then: Then) -> bool:
    if k == len(steps):
        return then()
    rest = then if k + 1 == len(steps) else (lambda: _assign(m, operands, used, steps, k + 1, then))
    step, where = steps[k], m._where
    tried: list[Any] = []
    for j, (term, entry) in enumerate(operands):
        if used[j] or term in tried:
            continue
        tried.append(term)
        used[j] = True
        where.append(entry)  # (at_input, written out)
        if step(m, term, rest):
            return True
        where.pop()
        used[j] = False
    return False


def at_input(m: "PatternMatcher", entry: tuple[str, int], step: Step, term: Any, rest: Then) -> bool:
    """Match ``term`` with ``step`` while the matcher knows where it stands (``entry``: consumer and
    input slot, on top of :attr:`PatternMatcher._where`), then the ``rest`` of the match.

    The entry is taken off when this returns False (every attempt below it failed), not before
    the ``rest`` runs: the rest reads no place before standing at one of its own (the next input
    matched), except a defined variable's step, which keeps its place from the start (see
    :mod:`.match_steps`).  So the place read at any failure is that of the innermost input being
    matched, as if each were taken off when its own match is done, with no closure per input."""
    where = m._where
    where.append(entry)
    if step(m, term, rest):
        return True
    where.pop()
    return False


def view_inputs(expr: Op, steps: tuple[Step, ...]) -> ViewInputs:
    """A view's input terms against the expression's inputs (their ``steps``), in each order the
    expression allows."""
    n = len(steps)
    orders = orders_of(expr, n)

    def inputs(m: "PatternMatcher", view: NodeView, then: Then) -> bool:
        actual = list(view.inputs)
        if len(actual) != n and (len(actual) < n or not expr.extra_inputs):
            m._fail(lambda: f"{m.name(view.anchor)!r} ({view.op}) has {len(actual)} inputs, expected {n}")
            return False
        return any(_view_sequence(m, view, order, steps, 0, then) for order in orders(actual))
    return inputs


def _view_sequence(m: "PatternMatcher", view: NodeView, order: list[tuple[int, Any]], steps: tuple[Step, ...],
                   k: int, then: Then) -> bool:
    if k == len(order):
        return then()
    slot, term = order[k]
    return at_input(m, view.wheres[slot], steps[k], term, lambda: _view_sequence(m, view, order, steps, k + 1, then))


def clip_inputs(expr: Op, step: Step) -> ViewInputs:
    """The input of a square root (``step``: its expression's) that reads ``Maximum(v, c)``, c a
    tiny constant: first as the epsilon form ``v + c`` (``v`` itself for c = 0), then as it is."""
    plain = view_inputs(expr, (step,))

    def inputs(m: "PatternMatcher", view: NodeView, then: Then) -> bool:
        clip = clip_epsilon(m, view.inputs[0]) if len(view.inputs) == 1 else None
        if clip is not None:
            value, epsilon, nodes, _ = clip
            term: Any = value if epsilon is None else Virtual("Add", (value, epsilon), (), nodes[-1])
            mark = len(m._trail)
            _add_members(m, nodes)
            if at_input(m, view.wheres[0], step, term, then):
                return True
            m._undo(mark)
        return plain(m, view, then)
    return inputs


