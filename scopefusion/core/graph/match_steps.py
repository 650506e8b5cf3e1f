"""Pattern expressions compiled into step functions, the working parts of a
:class:`~scopefusion.core.graph.matching.PatternMatcher`.

A step ``step(matcher, tensor, then)`` tries, in order, every way its expression
matches ``tensor``: after each it calls ``then()`` (the rest of the match) and stops
at the first way for which that answers True, leaving its bindings in place.  When
no way leads to a whole match it answers False, the matcher's trail as it was.
Backtracking is thus plain calls and returns: a choice (an alternative, an order of
a commutative op's inputs) is left when what came after it answered False.

Each expression is compiled once, when first matched, and keeps its step (patterns
are immutable); the step reads everything that varies (bindings, definitions of
variables, the allowed nodes) from the matcher it is given.  Failures are recorded
through the matcher exactly where and in the order the expression language defines,
so the failure reported is the one that got furthest.
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .canonical import NodeView, Virtual, chain_cuts, chain_leaves, operand_count, clip_epsilon, direct_view, is_family, rewrites, virtual_view
from .const_checks import const_problem
from .match_failure import FurthestFailure
from .pattern import Alt, AnyTensor, Const, Op, Var
from .vocabulary import CONTROL, FORWARDING_OPS

if TYPE_CHECKING:  # pragma: no cover
    from .matching import PatternMatcher

Tensor = tuple[int, int]
Then = Callable[[], bool]
Step = Callable[["PatternMatcher", Tensor, Then], bool]

#: Unordered inputs are tried in every order up to this many orders.
MAX_ORDERS = 720

#: Steps of variables by name (a definition written as ``"$name"`` is such a variable).
_VAR_STEPS: dict[str, Step] = {}


def step_of(expr: Any) -> Step:
    """The step of ``expr``, compiled on first use and kept on the expression.  A string is no
    expression here (callers turn ``"$name"`` into a variable first): its step raises."""
    known = getattr(expr, "__dict__", {}).get("_step") if not isinstance(expr, str) else None
    if known is not None:
        return known  # type: ignore[no-any-return]
    if isinstance(expr, Op):
        step = _op_step(expr)
    elif isinstance(expr, Var):
        step = var_step(expr.name)
    elif isinstance(expr, Const):
        step = _const_step(expr)
    elif isinstance(expr, Alt):
        step = _alt_step(expr)
    elif isinstance(expr, AnyTensor):
        step = _any_step
    else:
        return _not_an_expression(expr)
    object.__setattr__(expr, "_step", step)
    return step


def var_step(name: str) -> Step:
    """The step of the variable ``name``."""
    step = _VAR_STEPS.get(name)
    if step is None:
        step = _VAR_STEPS[name] = _var_step(name)
    return step


def definition_step(definition: Any) -> Step:
    """The step of a variable's definition (``"$name"`` meaning that variable)."""
    return var_step(definition[1:]) if isinstance(definition, str) else step_of(definition)


def _not_an_expression(expr: Any) -> Step:
    def step(m: "PatternMatcher", tensor: Tensor, then: Then) -> bool:
        raise TypeError(f"{expr!r} is not a pattern expression")
    return step


def _any_step(m: "PatternMatcher", tensor: Tensor, then: Then) -> bool:
    if isinstance(tensor, Virtual):  # any tensor: an op the graph computes without one is none
        m._fail(lambda: f"{m.name(tensor.anchor)!r} computes {tensor.op} of a tensor without a tensor of its own")
        return False
    return then()


def _kept_if(m: "PatternMatcher", mark: int, matched: bool) -> bool:
    """``matched``; when False, the bindings made since the trail stood at ``mark`` are undone."""
    if not matched:
        m._undo(mark)
    return matched


def _var_step(name: str) -> Step:
    def step(m: "PatternMatcher", tensor: Tensor, then: Then) -> bool:
        if isinstance(tensor, Virtual):
            m._fail(lambda: f"{m.name(tensor.anchor)!r} computes {tensor.op} of its input without a tensor of "
                            f"its own, expected a tensor ${name}")
            return False
        bound = m.tensors.get(name)
        if bound is not None:
            if m._forward(bound)[0] == m._forward(tensor)[0]:
                return then()
            m._fail(lambda: f"{m._tname(tensor)} is not ${name} ({m._tname(bound)})")
            return False
        definition = m.defs.get(name)
        if definition is None:
            return _bound_then(m, tensor, then)
        return definition_step(definition)(m, tensor, lambda: _bound_then(m, tensor, then))

    def _bound_then(m: "PatternMatcher", tensor: Tensor, then: Then) -> bool:
        trail = m._trail
        mark = len(trail)
        m.tensors[name] = tensor
        trail.append((m.tensors, name))
        return _kept_if(m, mark, then())
    return step


def _alt_step(expr: Alt) -> Step:
    options = tuple(step_of(o) for o in expr.options)

    def step(m: "PatternMatcher", tensor: Tensor, then: Then) -> bool:
        before, start = m._best, m._progress
        m._best = None
        produced = False

        def produce() -> bool:
            nonlocal produced
            produced = True
            return then()
        for option in options:
            if option(m, tensor, produce):
                return True
        inner = m._best
        if not produced and inner is not None and inner.progress <= start:
            # no alternative got anywhere: say so, with the first one's reason
            inner = FurthestFailure(start, inner.where, f"{m._tname(tensor)} matches none of the expected "
                                                        f"forms ({inner.message})")
        m._best = before
        if inner is not None and (before is None or inner.progress > before.progress):
            m._best = inner
        return False
    return step


def _const_step(expr: Const) -> Step:
    label = expr.label

    def step(m: "PatternMatcher", tensor: Tensor, then: Then) -> bool:
        if isinstance(tensor, Virtual):
            m._fail(lambda: f"{m.name(tensor.anchor)!r} computes {tensor.op} of a tensor, expected {expr.describe()}")
            return False
        node, port = tensor
        view = m.view
        value = view.const_value_of(node) if port == 0 else None
        chain = None
        if value is None and port == 0:  # computed from constants (Squeeze of a read, Sqrt(2.0) ...)
            folded = view.folded_constant(node)
            if folded is not None:
                value, chain = folded[0], list(folded[1])
        if value is None:
            m._fail(lambda: f"{m._tname(tensor)} is not a constant, expected {expr.describe()}")
            return False
        checked = m._const_checks.get((id(value), id(expr)))
        if checked is None:  # values are shared by content: each is checked once per expression
            checked = m._const_checks[id(value), id(expr)] = (value, const_problem(value, expr))
        problem = checked[1]
        if problem is not None:
            m._fail(lambda: f"{m._tname(tensor)} {problem()}")
            return False
        mark = len(m._trail)
        if chain is None:
            chain = view.constant_chain(node) or [node]
            holder = chain[-1]  # the Const itself
        else:
            holder = node  # a computed constant: the node that computes it
        inside = m.inside
        for i in chain:
            if inside is None or i in inside:
                m._add_member(i)
        if label:
            bound = m.nodes.get(label)
            if bound is not None and bound != holder:
                m._fail(lambda: f"label {label!r} is bound to {m.name(bound)!r}, but here it would be "
                        f"{m.name(holder)!r}")
                m._undo(mark)
                return False
            if bound is None:
                m._bind(m.nodes, label, holder)
                m._bind(m.consts, label, value)
        return _kept_if(m, mark, then())
    return step


def _op_step(expr: Op) -> Step:
    types, label, wanted_port = frozenset(expr.types), expr.label, expr.port
    plain = expr.dtypes is None and not expr.attrs
    leaves = chain_leaves(expr)
    if leaves is not None:  # an associative chain of three operands or more: matched by cuts
        inputs: Callable[["PatternMatcher", int, Then], bool] | None = None
        view_inputs = _chain_step(expr, leaves)
    else:
        inputs = None if expr.inputs is None else _inputs_step(expr)
        view_inputs = None if expr.inputs is None else _view_inputs_step(expr)
    rooted = _clip_step(expr) if expr.inputs is not None and len(expr.inputs) == 1 and \
        types & {"Sqrt", "Rsqrt"} else None

    def step(m: "PatternMatcher", tensor: Tensor, then: Then) -> bool:
        if isinstance(tensor, Virtual):
            return _view_step(m, expr, virtual_view(m, tensor), (), view_inputs, then)
        node, port = tensor
        ops = m.index.ops
        passed: Sequence[int] = ()
        if ops[node] in FORWARDING_OPS:
            (node, port), passed = m._forward(tensor, expr.types)
        nodes = m.nodes
        bound = None if label is None else nodes.get(label)
        if bound == node and label is not None and port == wanted_port and m._label_exprs.get(label) is expr:
            mark = len(m._trail)
            for i in passed:  # reads forwarded on the way belong to the match too
                m._add_member(i)
            return _kept_if(m, mark, then())  # the same expression met again through another consumer
        inside = m.inside
        if not (plain and port == wanted_port and (bound is None or bound == node) and (
                not types or ops[node] in types) and (inside is None or node in inside)):
            problem = m._op_problem(node, port, expr)
            if problem is not None:
                if types and ops[node] not in types and port == 0 and (inside is None or node in inside):
                    # another spelling of the same computation?
                    if _rewritten(m, expr, node, passed, view_inputs, then):
                        return True
                m._fail(problem)
                return False
        if leaves is not None or (rooted is not None and ops[node] in ("Sqrt", "Rsqrt")):
            view = direct_view(m, node)
            return _view_step(m, expr, view, passed, rooted if leaves is None else view_inputs, then)
        trail = m._trail
        mark, progress = len(trail), m._progress
        for i in passed:
            m._add_member(i)
        if label is not None and bound is None:
            nodes[label] = node
            trail.append((nodes, label))
            m._label_exprs[label] = expr
            trail.append((m._label_exprs, label))
        members = m.members
        if node not in members:
            members.add(node)
            trail.append((members, node))
        m._progress = progress + 1
        if _kept_if(m, mark, then() if inputs is None else inputs(m, node, then)):
            return True
        m._progress = progress
        return False
    return step


ViewInputs = Callable[["PatternMatcher", NodeView, Then], bool]


def _rewritten(m: "PatternMatcher", expr: Op, node: int, passed: Sequence[int], inputs: ViewInputs | None,
               then: Then) -> bool:
    """``expr`` against ``node`` spelt another way (:func:`.canonical.rewrites`).  A failure inside
    one is reported only when it got three ops past the node; else the node's own type is what
    departs from the pattern."""
    before, start = m._best, m._progress
    m._best = None
    for view in rewrites(m, node, frozenset(expr.types)):
        if _view_step(m, expr, view, passed, inputs, then):
            return True
    inner, m._best = m._best, before
    if inner is not None and inner.progress >= start + 3 and (before is None or inner.progress > before.progress):
        m._best = inner
    return False


def _view_step(m: "PatternMatcher", expr: Op, view: NodeView, passed: Sequence[int], inputs: ViewInputs | None,
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
            m._fail(lambda: problem)  # type: ignore[arg-type, return-value]
            return False
    trail = m._trail
    mark, progress = len(trail), m._progress
    for i in (*passed, *view.members):
        if m.inside is None or i in m.inside:
            m._add_member(i)
    if label is not None and bound is None:
        m._bind(m.nodes, label, anchor)
        m._bind(m._label_exprs, label, expr)
    m._progress = progress + 1
    if _kept_if(m, mark, then() if inputs is None else inputs(m, view, then)):
        return True
    m._progress = progress
    return False


def _chain_step(expr: Op, leaves: tuple[Any, ...]) -> ViewInputs:
    """Operands of a chain: every cut of the graph's chain into as many operands as the pattern
    has, and every assignment of the pattern's operands to the cut's (each distinct operand
    tried once per position)."""
    steps = tuple(step_of(e) for e in leaves)
    family = is_family(expr.types) or ""
    count = len(steps)

    def inputs(m: "PatternMatcher", view: NodeView, then: Then) -> bool:
        cuts = chain_cuts(m, view, family, count)
        if not cuts:
            m._fail(lambda: f"{m.name(view.anchor)!r} has {len(view.inputs)} inputs, expected {count} (operands "
                            f"of a {family} chain in any grouping; this chain has {operand_count(m, view, family)})")
            return False
        for operands, members in cuts:
            mark = len(m._trail)
            for i in members:
                if m.inside is None or i in m.inside:
                    m._add_member(i)
            if _assign(m, operands, [False] * len(operands), steps, 0, then):
                return True
            m._undo(mark)
        return False
    return inputs


def _assign(m: "PatternMatcher", operands: list[tuple[Any, tuple[str, int]]], used: list[bool],
            steps: tuple[Step, ...], k: int, then: Then) -> bool:
    if k == len(steps):
        return then()
    tried: list[Any] = []
    where = m._where
    for j, (term, entry) in enumerate(operands):
        if used[j] or term in tried:
            continue
        tried.append(term)
        used[j] = True

        def rest(entry: tuple[str, int] = entry) -> bool:
            where.pop()
            if _assign(m, operands, used, steps, k + 1, then):
                return True
            where.append(entry)
            return False
        where.append(entry)
        if steps[k](m, term, rest):
            return True
        where.pop()
        used[j] = False
    return False


def _view_inputs_step(expr: Op) -> ViewInputs:
    """A view's input terms against the expression's inputs, in each order the expression allows."""
    steps = tuple(step_of(e) for e in expr.inputs or ())
    n = len(steps)
    orders = _orders_of(expr, n)

    def inputs(m: "PatternMatcher", view: NodeView, then: Then) -> bool:
        actual = list(view.inputs)
        if len(actual) != n and (len(actual) < n or not expr.extra_inputs):
            m._fail(lambda: f"{m.name(view.anchor)!r} ({view.op}) has {len(actual)} inputs, expected {n}")
            return False
        for order in orders(actual):
            if _view_sequence(m, view, order, steps, 0, then):
                return True
        return False
    return inputs


def _view_sequence(m: "PatternMatcher", view: NodeView, order: list[tuple[int, Any]], steps: tuple[Step, ...],
                   k: int, then: Then) -> bool:
    if k == len(order):
        return then()
    slot, term = order[k]
    where = m._where
    entry = view.wheres[slot]

    def rest() -> bool:
        where.pop()
        if _view_sequence(m, view, order, steps, k + 1, then):
            return True
        where.append(entry)
        return False
    where.append(entry)
    if steps[k](m, term, rest):
        return True
    where.pop()
    return False


def _clip_step(expr: Op) -> ViewInputs:
    """The input of a square root that reads ``Maximum(v, c)``, c a tiny constant: first as the
    epsilon form ``v + c`` (``v`` itself for c = 0), then as it is."""
    plain = _view_inputs_step(expr)
    step = step_of(expr.inputs[0]) if expr.inputs else None

    def inputs(m: "PatternMatcher", view: NodeView, then: Then) -> bool:
        clip = clip_epsilon(m, view.inputs[0]) if len(view.inputs) == 1 and step is not None else None
        if clip is not None:
            value, epsilon, nodes, _ = clip
            term: Any = value if epsilon is None else Virtual("Add", (value, epsilon), (), nodes[-1])
            mark = len(m._trail)
            for i in nodes:
                if m.inside is None or i in m.inside:
                    m._add_member(i)
            if _single(m, view.wheres[0], term, step, then):  # type: ignore[arg-type]
                return True
            m._undo(mark)
        return plain(m, view, then)
    return inputs


def _inputs_step(expr: Op) -> Callable[["PatternMatcher", int, Then], bool]:
    """How an op's data inputs are matched: each order of them tried in turn (one input, or
    two in their order or both orders, written out)."""
    steps = tuple(step_of(e) for e in expr.inputs or ())
    n, extra = len(steps), expr.extra_inputs
    orders = _orders_of(expr, n)

    def count_problem(m: "PatternMatcher", node: int, actual: list[Tensor]) -> bool:
        if len(actual) != n and (len(actual) < n or not extra):
            m._fail(lambda: f"{m.index.names[node]!r} has {len(actual)} inputs, expected {n}")
            return True
        return False

    if n == 1 and not expr.commutative and not expr.unordered:
        def one(m: "PatternMatcher", node: int, then: Then) -> bool:
            actual = [t for t in m.index.inputs[node] if t[1] != CONTROL]
            if len(actual) != 1 and count_problem(m, node, actual):
                return False
            return _single(m, (m.index.names[node], 0), actual[0], steps[0], then)
        return one
    if n == 2 and (expr.commutative or not expr.unordered):
        first, second = steps
        swapped = expr.commutative

        def two(m: "PatternMatcher", node: int, then: Then) -> bool:
            actual = [t for t in m.index.inputs[node] if t[1] != CONTROL]
            if len(actual) != 2 and count_problem(m, node, actual):
                return False
            at0, at1 = (m.index.names[node], 0), (m.index.names[node], 1)
            return _single(m, at0, actual[0], first, lambda: _single(m, at1, actual[1], second, then)) or (
                swapped and _single(m, at1, actual[1], first, lambda: _single(m, at0, actual[0], second, then)))
        return two

    def inputs(m: "PatternMatcher", node: int, then: Then) -> bool:
        actual = [t for t in m.index.inputs[node] if t[1] != CONTROL]
        if count_problem(m, node, actual):
            return False
        name = m.index.names[node]
        for order in orders(actual):
            if _sequence(m, name, order, steps, 0, then):
                return True
        return False
    return inputs


def _single(m: "PatternMatcher", entry: tuple[str, int], tensor: Tensor, step: Step, then: Then) -> bool:
    """:func:`_sequence` of one input, written out (two inputs are one within the other)."""
    where = m._where

    def last() -> bool:
        where.pop()
        if then():
            return True
        where.append(entry)
        return False
    where.append(entry)
    if step(m, tensor, last):
        return True
    where.pop()
    return False


def _orders_of(expr: Op, n: int) -> Callable[[list[Tensor]], list[list[tuple[int, Tensor]]]]:
    """The orders in which an op's inputs are tried, as ``(slot, tensor)`` lists."""
    if expr.commutative:
        def either(actual: list[Tensor]) -> list[list[tuple[int, Tensor]]]:
            slots = list(enumerate(actual))
            return [slots[:2], slots[1::-1]]
        return either
    if expr.unordered:
        def unordered(actual: list[Tensor]) -> list[list[tuple[int, Tensor]]]:
            slots = list(enumerate(actual))
            if n > 1 or len(slots) > n:
                return [list(o) for o in itertools.islice(itertools.permutations(slots, n), MAX_ORDERS)]
            return [slots[:n]]
        return unordered
    return lambda actual: [list(enumerate(actual[:n]))]


def _sequence(m: "PatternMatcher", name: str, order: list[tuple[int, Tensor]], steps: tuple[Step, ...],
              k: int, then: Then) -> bool:
    """Inputs ``k`` onwards of one order, each tried in every way the ones before matched;
    while one is being matched the matcher knows where it stands (consumer, slot)."""
    if k == len(order):
        return then()
    slot, tensor = order[k]
    where = m._where
    entry = (name, slot)

    def rest() -> bool:
        where.pop()
        if _sequence(m, name, order, steps, k + 1, then):
            return True
        where.append(entry)
        return False
    where.append(entry)
    if steps[k](m, tensor, rest):
        return True
    where.pop()
    return False
