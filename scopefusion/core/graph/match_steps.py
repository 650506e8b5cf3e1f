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

from typing import TYPE_CHECKING, Any, Callable, Sequence

from .canonical import Virtual, direct_view, spellings, virtual_view
from .chains import chain_leaves
from .const_checks import const_problem
from .constant_eval import virtual_value
from .match_failure import FurthestFailure
from .pattern import Alt, AnyTensor, Const, Op, Var
from .view_steps import (
    ViewInputs, at_input, chain_inputs, chain_node_inputs, clip_inputs, kept_if, orders_of, rewritten,
    view_inputs as view_inputs_of,
    view_step,
)
from .vocabulary import CONST_OPS, CONTROL, FORWARDING_OPS

if TYPE_CHECKING:  # pragma: no cover
    from .matching import PatternMatcher

Tensor = tuple[int, int]
Then = Callable[[], bool]
Step = Callable[["PatternMatcher", Tensor, Then], bool]

#: Steps of variables by name (a definition written as ``"$name"`` is such a variable).
_VAR_STEPS: dict[str, Step] = {}


def step_of(expr: Any) -> Step:
    """The step of ``expr``, compiled on first use and kept on the expression.  A string is no
    expression here (callers turn ``"$name"`` into a variable first): its step raises."""
    known = getattr(expr, "__dict__", {}).get("_step") if not isinstance(expr, str) else None
    if known is not None:
        return known
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


def _var_step(name: str) -> Step:
    def step(m: "PatternMatcher", tensor: Tensor, then: Then) -> bool:
        if isinstance(tensor, Virtual):
            m._fail(lambda: f"{m.name(tensor.anchor)!r} computes {tensor.op} of its input without a tensor of "
                            f"its own, expected a tensor ${name}")
            return False
        bound = m.tensors.get(name)
        if bound is not None:
            if bound == tensor or m._forward(bound)[0] == m._forward(tensor)[0]:
                where, read_at = m._where, m._read_at
                if not where or where[-1] in read_at:
                    return then()
                mark = len(m._trail)
                m._bind(read_at, where[-1], name)  # the pattern's word on what this slot reads
                return kept_if(m, mark, then())
            m._fail(lambda: f"{m._tname(tensor)} is not ${name} ({m._tname(bound)})")
            return False
        where = m._where
        entry = where[-1] if where else None  # where the variable is read (the definition's inputs stand on it)
        definition = m.defs.get(name)
        if definition is None:
            return _bound_then(m, tensor, entry, then)
        return definition_step(definition)(m, tensor, lambda: _bound_then(m, tensor, entry, then))

    def _bound_then(m: "PatternMatcher", tensor: Tensor, entry: tuple[str, int] | None, then: Then) -> bool:
        trail, tensors = m._trail, m.tensors
        mark = len(trail)
        tensors[name] = tensor
        trail.append((tensors, name))
        if entry is not None:
            read_at = m._read_at
            if entry not in read_at:  # the pattern's word on what this slot reads
                read_at[entry] = name
                trail.append((read_at, entry))
        if then():
            return True
        m._undo(mark)
        return False
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
            first = inner
            inner = FurthestFailure(start, inner.where, lambda: f"{m._tname(tensor)} matches none of the expected "
                                                                f"forms ({first.message})")
        m._best = before
        if inner is not None and (before is None or inner.progress > before.progress):
            m._best = inner
        return False
    return step


def _const_step(expr: Const) -> Step:
    label, expr_id = expr.label, id(expr)

    def step(m: "PatternMatcher", tensor: Tensor | Virtual, then: Then) -> bool:
        view = m.view
        value, chain = None, None
        if isinstance(tensor, Virtual):  # an op of a constant without a node of its own (the 1/2 of x / 2)
            virtual = _virtual_constant(m, tensor)
            if virtual is None:
                m._fail(lambda: f"{m.name(tensor.anchor)!r} computes {tensor.op} of a tensor, "
                                f"expected {expr.describe()}")
                return False
            (value, chain), node = virtual, virtual[1][0]
        else:
            node, port = tensor
            value = view.const_value_of(node) if port == 0 else None
            if value is None and port == 0:  # computed from constants (Squeeze of a read, Sqrt(2.0) ...)
                folded = view.folded_constant(node)
                if folded is not None:
                    value, chain = folded[0], list(folded[1])
        if value is None:
            m._fail(lambda: f"{_const_name(m, tensor)} is not a constant, expected {expr.describe()}")
            return False
        key = (id(value), expr_id)
        checked = m._const_checks.get(key)
        if checked is None:  # values are shared by content: each is checked once per expression
            checked = m._const_checks[key] = (value, const_problem(value, expr))
        problem = checked[1]
        if problem is not None:
            m._fail(lambda: f"{_const_name(m, tensor)} {problem()}")
            return False
        trail = m._trail
        mark = len(trail)
        if chain is None:
            # the Const itself (most constants), or what it is read through
            chain = [node] if m.index.ops[node] in CONST_OPS else (view.constant_chain(node) or [node])
            holder = chain[-1]  # the Const itself
        else:
            holder = node  # a computed constant: the node that computes it
        inside, members = m.inside, m.members
        for i in chain:
            if (inside is None or i in inside) and i not in members:
                members.add(i)
                trail.append((members, i))
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
        return kept_if(m, mark, then())
    return step


def _const_name(m: "PatternMatcher", tensor: Tensor | Virtual) -> str:
    if isinstance(tensor, Virtual):
        return f"{tensor.op} of {m._tname(tensor.inputs[0])} (at {m.name(tensor.anchor)!r})"
    return m._tname(tensor)


def _virtual_constant(m: "PatternMatcher", tensor: Virtual) -> tuple[Any, list[int]] | None:
    """The value of a one-input ``Virtual`` op of a constant (``Reciprocal(2.0)``, ``Neg(eps)``)
    and the nodes it is computed from (its constant's first), or None."""
    if len(tensor.inputs) != 1 or isinstance(tensor.inputs[0], Virtual) or tensor.inputs[0][1] != 0:
        return None
    folded = m.view.folded_constant(tensor.inputs[0][0])
    value = None if folded is None else virtual_value(tensor.op, folded[0])
    if folded is None or value is None:
        return None
    value.setflags(write=False)
    return value, [*folded[1], *tensor.members]


def _op_step(expr: Op) -> Step:
    types, label, wanted_port = frozenset(expr.types), expr.label, expr.port
    plain = expr.dtypes is None and not expr.attrs
    leaves = chain_leaves(expr)
    view_inputs: ViewInputs | None
    inputs: Callable[["PatternMatcher", int, Then], bool] | None
    if leaves is not None:  # an associative chain of three operands or more: matched by cuts
        leaf_steps = tuple(step_of(e) for e in leaves)
        inputs = chain_node_inputs(expr, leaf_steps)  # (a node of the chain's family, as it is)
        view_inputs = chain_inputs(expr, leaf_steps)
    else:
        inputs = None if expr.inputs is None else _inputs_step(expr)
        view_inputs = None if expr.inputs is None else view_inputs_of(expr, tuple(step_of(e) for e in expr.inputs))
    rooted = clip_inputs(expr, step_of(expr.inputs[0])) if expr.inputs is not None and len(expr.inputs) == 1 and \
        types & {"Sqrt", "Rsqrt"} else None
    spelt = spellings(types) - types  # the op types of nodes that may be seen as one of types

    def step(m: "PatternMatcher", tensor: Tensor, then: Then) -> bool:
        if isinstance(tensor, Virtual):
            return view_step(m, expr, virtual_view(m, tensor), (), view_inputs, then)
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
            return kept_if(m, mark, then())  # the same expression met again through another consumer
        inside = m.inside
        if not (plain and port == wanted_port and (bound is None or bound == node) and (
                not types or ops[node] in types) and (inside is None or node in inside)):
            problem = m._op_problem(node, port, expr)
            if problem is not None:
                # another spelling of the same computation?
                if ops[node] in spelt and port == 0 and (inside is None or node in inside) \
                        and rewritten(m, expr, node, passed, rooted or view_inputs, then):
                    return True
                m._fail(problem)
                return False
        if rooted is not None and ops[node] in ("Sqrt", "Rsqrt"):
            return view_step(m, expr, direct_view(m, node), passed, rooted, then)
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
        if then() if inputs is None else inputs(m, node, then):
            return True
        m._undo(mark)
        m._progress = progress
        return False
    return step


def _inputs_step(expr: Op) -> Callable[["PatternMatcher", int, Then], bool]:
    """How an op's data inputs are matched: each order of them tried in turn (one input, or
    two in their order or both orders, written out)."""
    steps = tuple(step_of(e) for e in expr.inputs or ())
    n, extra = len(steps), expr.extra_inputs
    orders = orders_of(expr, n)

    def count_problem(m: "PatternMatcher", node: int, actual: Sequence[Tensor]) -> bool:
        if len(actual) != n and (len(actual) < n or not extra):
            m._fail(lambda: f"{m.index.names[node]!r} has {len(actual)} inputs, expected {n}")
            return True
        return False

    if n == 1 and not expr.commutative and not expr.unordered:
        only = steps[0]

        def one(m: "PatternMatcher", node: int, then: Then) -> bool:
            index = m.index
            actual: Sequence[Tensor] = index.inputs[node]
            if len(actual) != 1 or actual[0][1] == CONTROL:  # (most nodes: the one data input alone)
                actual = [t for t in actual if t[1] != CONTROL]
                if len(actual) != 1 and count_problem(m, node, actual):
                    return False
            where = m._where  # (at_input, written out)
            where.append((index.names[node], 0))
            if only(m, actual[0], then):
                return True
            where.pop()
            return False
        return one
    if n == 2 and (expr.commutative or not expr.unordered):
        first, second = steps
        swapped = expr.commutative

        def two(m: "PatternMatcher", node: int, then: Then) -> bool:
            index = m.index
            actual: Sequence[Tensor] = index.inputs[node]
            if len(actual) != 2 or actual[0][1] == CONTROL or actual[1][1] == CONTROL:  # (most: the two alone)
                actual = [t for t in actual if t[1] != CONTROL]
                if len(actual) != 2 and count_problem(m, node, actual):
                    return False
            name = index.names[node]
            at0, at1 = (name, 0), (name, 1)
            return at_input(m, at0, first, actual[0], lambda: at_input(m, at1, second, actual[1], then)) or (
                swapped and at_input(m, at1, first, actual[1], lambda: at_input(m, at0, second, actual[0], then)))
        return two

    if not expr.commutative and not expr.unordered:  # one order: the inputs as they are
        def ordered(m: "PatternMatcher", node: int, then: Then) -> bool:
            actual = [t for t in m.index.inputs[node] if t[1] != CONTROL]
            if count_problem(m, node, actual):
                return False
            return _sequence(m, m.index.names[node], list(enumerate(actual[:n])), steps, 0, then)
        return ordered

    def inputs(m: "PatternMatcher", node: int, then: Then) -> bool:
        actual = [t for t in m.index.inputs[node] if t[1] != CONTROL]
        if count_problem(m, node, actual):
            return False
        name = m.index.names[node]
        return any(_sequence(m, name, order, steps, 0, then) for order in orders(actual))
    return inputs


def _sequence(m: "PatternMatcher", name: str, order: list[tuple[int, Tensor]], steps: tuple[Step, ...],
              k: int, then: Then) -> bool:
    """Inputs ``k`` onwards of one order, each tried in every way the ones before matched;
    while one is being matched the matcher knows where it stands (consumer, slot)."""
    if k == len(order):
        return then()
    slot, tensor = order[k]
    return at_input(m, (name, slot), steps[k], tensor, lambda: _sequence(m, name, order, steps, k + 1, then))
