"""The op-pattern language: what a subgraph computes, written as an expression of ops.

Graph passes find their matches with it; scope passes check the wiring of a scope
with it.  An expression is built from these parts:

* :func:`op` - a node of one of some op types (or of any type), whose data inputs
  match sub-expressions by position (``commutative=True``: in either order;
  ``unordered=True``: in any order), with attribute and dtype predicates;
* :func:`const` - a constant, seen through Identity reads and ops that compute it from
  constants, whose value may be checked (floats with a tolerance, or any predicate);
* :func:`var` (or the string ``"$name"``) - a tensor bound the first time it is
  met and required to be the same tensor wherever it is met again;
* :data:`ANY` - any tensor; :func:`one_of` - the first alternative that matches.

A pattern can also be written as the TensorFlow function that computes it:
:func:`scopefusion.core.graph.function_pattern.pattern_from_function` traces the function
once into such an expression.

A ``label`` names a node of the match: a label binds exactly one node, so an
expression that meets the same label twice requires the same node both times.

Matching is canonical (:mod:`.canonical`, :mod:`.chains`, :mod:`.constant_eval`): an op of
``Mul``, ``Add``/``AddV2``, ``Maximum`` or ``Minimum`` with three operands or more matches a
chain of it in any grouping; a node spelt another way (``a - b`` for ``a + (-b)``, ``Pow(x, 2)``
for ``Square(x)`` ...) matches the op it is equivalent to; a constant is seen through whatever
computes it from constants.

:class:`OpPattern` wraps a whole expression with a name, named definitions for
variables and the labels whose outputs the match produces.  Matching is done by
:class:`scopefusion.core.graph.matching.PatternMatcher`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, Union

from .vocabulary import SAME_OP, dtype_enum


class PatternDefinitionError(ValueError):
    """A pattern is defined wrongly (raised when it is defined, not when it is matched)."""


@dataclass(frozen=True)
class Op:
    """A node of one of ``types`` (empty: any type), read at output ``port``."""

    types: tuple[str, ...]
    inputs: tuple[Any, ...] | None = None  # None: the inputs are not looked at
    port: int = 0
    commutative: bool = False  # two inputs, in either order
    unordered: bool = False  # inputs in any order
    extra_inputs: bool = False  # more data inputs than listed are allowed
    attrs: tuple[tuple[str, Any], ...] = ()  # attr name -> expected value or predicate
    dtypes: frozenset[int] | None = None  # allowed values of the node's T (or dtype) attr
    label: str | None = None

    def describe(self) -> str:
        return "/".join(self.types) if self.types else "any op"


@dataclass(frozen=True)
class Const:
    """A constant tensor (seen through Identity reads)."""

    value: Any = None  # expected value; compared with rtol/atol, scalars and [1] alike
    rtol: float | None = None  # None: the precision of the constant's dtype
    atol: float = 0.0
    where: Callable[[Any], bool] | None = None  # a predicate on the numpy value
    label: str | None = None  # binds the constant's node; its value goes to Match.consts
    description: str = ""  # how messages name the expected value, e.g. "1/sqrt(2)"

    def describe(self) -> str:
        if self.description:
            return self.description
        return "a constant" if self.value is None else f"the constant {self.value!r}"


@dataclass(frozen=True)
class Var:
    """A tensor bound the first time it is met; later it must be the same tensor."""

    name: str


@dataclass(frozen=True)
class Alt:
    """The first of several expressions that matches."""

    options: tuple[Any, ...]


@dataclass(frozen=True)
class AnyTensor:
    """Any tensor; binds nothing."""


ANY = AnyTensor()

Expr = Union[Op, Const, Var, Alt, AnyTensor, str]


def same_op_types(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` with every type TensorFlow spells one operation with (``Add`` is also ``AddV2``): a
    pattern names the operation once, whichever op a library's graph holds."""
    out: list[str] = []
    for name in names:
        for same in SAME_OP.get(name, (name,)):
            if same not in out:
                out.append(same)
    return tuple(out)


def op(
    types: str | Sequence[str] = (),
    *inputs: Any,
    port: int = 0,
    commutative: bool | None = None,
    unordered: bool = False,
    extra_inputs: bool = False,
    any_inputs: bool = False,
    label: str | None = None,
    dtype: Any = None,
    **attrs: Any,
) -> Op:
    """An op expression.

    ``types`` is one type or several alternatives (empty: any type).  ``inputs`` are
    sub-expressions for the data inputs in order; the node must have exactly that many
    unless ``extra_inputs`` is set, and ``any_inputs=True`` does not look at them at all.
    ``commutative`` defaults to True for two inputs of Add, AddV2, Mul, Maximum and
    Minimum.  ``dtype`` is one dtype or a set (names like ``"float32"`` or enums) that
    the node's ``T`` (or ``dtype``) attribute must have.  Other keyword arguments are
    attribute predicates: an expected value (floats compared with a tolerance) or a
    callable taking the attribute's Python value.
    """
    names = (types,) if isinstance(types, str) else tuple(types)
    if any(not isinstance(t, str) or not t for t in names):
        raise PatternDefinitionError(f"op types must be non-empty strings, got {types!r}")
    names = same_op_types(names)
    if commutative is None:
        commutative = len(inputs) == 2 and bool(names) and all(t in _COMMUTATIVE for t in names)
    if commutative and len(inputs) != 2:
        raise PatternDefinitionError(f"{'/'.join(names)}: commutative needs exactly two inputs")
    if any_inputs and inputs:
        raise PatternDefinitionError(f"{'/'.join(names)}: any_inputs=True and listed inputs exclude each other")
    if port < 0:
        raise PatternDefinitionError(f"{'/'.join(names)}: port must be >= 0")
    for k, sub in enumerate(inputs):
        _check_expr(sub, f"input {k} of {'/'.join(names) or 'any op'}")
    return Op(
        types=names,
        inputs=None if any_inputs else tuple(as_var(i) for i in inputs),
        port=port,
        commutative=commutative,
        unordered=unordered,
        extra_inputs=extra_inputs,
        attrs=tuple(sorted(attrs.items())),
        dtypes=_dtype_set(dtype),
        label=label,
    )


def const(value: Any = None, *, rtol: float | None = None, atol: float = 0.0,
          where: Callable[[Any], bool] | None = None, label: str | None = None, description: str = "") -> Const:
    """A constant expression; ``value`` (if given) is compared with ``rtol``/``atol``.

    ``rtol=None`` compares at the precision of the constant's own dtype (1e-6 for
    float32 and wider, 1e-3 for float16, 8e-3 for bfloat16), so a constant written
    in half precision still counts as the value it rounds.
    """
    return Const(value, rtol, atol, where, label, description)


def var(name: str) -> Var:
    """A variable: the same tensor wherever it is met."""
    if not name:
        raise PatternDefinitionError("a variable needs a name")
    return Var(name)


def one_of(*options: Any) -> Alt:
    """The first of several expressions that matches."""
    if not options:
        raise PatternDefinitionError("one_of() needs at least one option")
    for k, sub in enumerate(options):
        _check_expr(sub, f"option {k} of one_of()")
    return Alt(tuple(as_var(o) for o in options))


_COMMUTATIVE = frozenset({"Add", "AddV2", "Mul", "Maximum", "Minimum"})


def _dtype_set(dtype: Any) -> frozenset[int] | None:
    if dtype is None:
        return None
    items = dtype if isinstance(dtype, (set, frozenset, list, tuple)) else (dtype,)
    try:
        return frozenset(dtype_enum(d) for d in items)
    except ValueError as exc:
        raise PatternDefinitionError(str(exc)) from None


def _check_expr(expr: Any, where: str) -> None:
    if isinstance(expr, str):
        if not (expr.startswith("$") and len(expr) > 1):
            raise PatternDefinitionError(f"{where}: a string must name a variable as '$name', got {expr!r}")
    elif not isinstance(expr, (Op, Const, Var, Alt, AnyTensor)):
        raise PatternDefinitionError(f"{where}: {expr!r} is not a pattern expression")


def as_var(expr: Any) -> Any:
    """``"$x"`` -> ``Var("x")``; anything else unchanged."""
    return Var(expr[1:]) if isinstance(expr, str) else expr


def walk(expr: Any, defs: Mapping[str, Any] | None = None) -> list[Any]:
    """Every distinct sub-expression of ``expr`` (definitions of variables included), each once:
    a sub-expression shared by several branches is walked once, not once per path to it."""
    out: list[Any] = []
    seen_vars: set[str] = set()
    seen: set[int] = set()
    stack = [expr]
    while stack:
        e = as_var(stack.pop())
        if id(e) in seen:
            continue
        seen.add(id(e))
        out.append(e)
        if isinstance(e, Op) and e.inputs:
            stack.extend(reversed(e.inputs))
        elif isinstance(e, Alt):
            stack.extend(reversed(e.options))
        elif isinstance(e, Var) and defs and e.name in defs and e.name not in seen_vars:
            seen_vars.add(e.name)
            stack.append(defs[e.name])
    return out


@dataclass(frozen=True)
class OpPattern:
    """A whole pattern: its ``root`` expression (an op with named types, or alternatives
    of such ops, where matching starts), definitions of variables, and the labels whose
    nodes' outputs the match produces (``outputs``; the root when empty)."""

    name: str
    root: Op | Alt
    defs: Mapping[str, Any] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name:
            raise PatternDefinitionError("a pattern needs a name")
        roots = _root_ops(self.root)
        if not roots or any(not r.types for r in roots):
            raise PatternDefinitionError(
                f"pattern {self.name}: the root must be an op() with op types (or one_of such ops), so "
                "candidates can be looked up by type")
        if len({r.port for r in roots}) != 1:
            raise PatternDefinitionError(f"pattern {self.name}: the root alternatives read different ports")
        object.__setattr__(self, "_root_port", roots[0].port)  # asked at every match
        for key, expr in self.defs.items():
            _check_expr(expr, f"pattern {self.name}: definition of ${key}")
        labels = self.labels() if self.outputs else set()
        for label in self.outputs:
            if label not in labels:
                raise PatternDefinitionError(
                    f"pattern {self.name}: output {label!r} is no label of the pattern "
                    f"(labels: {', '.join(sorted(labels)) or 'none'})")

    def labels(self) -> set[str]:
        """Every label the pattern gives a node."""
        return {e.label for e in walk(self.root, self.defs) if isinstance(e, (Op, Const)) and e.label}

    @property
    def root_types(self) -> tuple[str, ...]:
        """The op types a root node may have (the index looks candidates up by them)."""
        return tuple(dict.fromkeys(t for r in _root_ops(self.root) for t in r.types))

    @property
    def root_port(self) -> int:
        return self._root_port  # type: ignore[attr-defined]

    @property
    def root_label(self) -> str | None:
        labels = {r.label for r in _root_ops(self.root)}
        return labels.pop() if len(labels) == 1 else None

    def required_types(self) -> list[frozenset[str]]:
        """Groups of op types such that every match holds a node of one type of each group
        (a graph lacking one of them has no match, so nothing need be tried).  Computed once
        per pattern."""
        cached = self.__dict__.get("_required_types")
        if cached is None:
            cached = sorted(_required(self.root, self.defs, set(), {}), key=sorted)
            object.__setattr__(self, "_required_types", cached)
        return list(cached)

    def op_count(self) -> int:
        """How many ops the smallest match of the pattern has (the shortest alternative
        counts): a measure of how far a failed match got.  Computed once per pattern."""
        cached = self.__dict__.get("_op_count")
        if cached is None:
            cached = _min_ops(self.root, self.defs, frozenset(), {}, _Names(self.defs))[0]
            object.__setattr__(self, "_op_count", cached)
        return cached


def _required(expr: Any, defs: Mapping[str, Any], seen: set[str],
              memo: dict[int, set[frozenset[str]]]) -> set[frozenset[str]]:
    """The required groups of ``expr``; ``memo`` keeps them per sub-expression (patterns share
    sub-expressions between alternatives), ``seen`` the variables being expanded."""
    expr = as_var(expr)
    known = memo.get(id(expr))
    if known is not None:
        return set(known)
    if isinstance(expr, Op):
        groups = {frozenset(expr.types)} if expr.types else set()
        for sub in expr.inputs or ():
            groups |= _required(sub, defs, seen, memo)
    elif isinstance(expr, Alt):
        options = [_required(option, defs, seen, memo) for option in expr.options]
        groups = set.intersection(*options)
        rest = [o - groups for o in options]
        if all(rest):  # every option needs one more group: one of those is there in any match
            # the smallest of each option's, the first by name among equals (not as the set
            # happens to list them: the groups, and the roots a report counts as tried, would
            # change from run to run)
            groups.add(frozenset().union(*(min(r, key=_size_then_names) for r in rest)))
    elif isinstance(expr, Var) and expr.name in defs and expr.name not in seen:
        seen.add(expr.name)
        groups = _required(defs[expr.name], defs, seen, memo)
        seen.discard(expr.name)
    else:
        return set()
    memo[id(expr)] = groups
    return set(groups)


def _size_then_names(group: frozenset[str]) -> tuple[int, list[str]]:
    """A group's order among groups: by size, then by its sorted op types."""
    return len(group), sorted(group)


def root_options(expr: Any) -> list[Op]:
    """The op expressions a pattern's root can be: the op itself, or every option of nested one_of()s."""
    return _root_ops(expr)


def _root_ops(expr: Any) -> list[Op]:
    """The op expressions a root can be: the op itself, or every option of nested one_of()s."""
    if isinstance(expr, Op):
        return [expr]
    if isinstance(expr, Alt):
        return [r for option in expr.options for r in _root_ops(option)]
    return []


def _expr_key(expr: Any) -> object:
    """A memo key for a sub-expression: a variable by its name (``"$x"`` makes a new ``Var``
    each time, whose id a later one may reuse), anything else by identity (the pattern holds it)."""
    return ("$", expr.name) if isinstance(expr, Var) else id(expr)


class _Names:
    """The labels and variables (``$name``) an expression can meet, its variables' definitions
    included: all that :func:`_min_ops` reads of ``seen`` below that expression, and all it adds."""

    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs
        self._own: dict[object, tuple[frozenset[str], frozenset[str]]] = {}
        self._of_var: dict[str, frozenset[str]] = {}
        self._within: dict[object, frozenset[str]] = {}

    def within(self, expr: Any) -> frozenset[str]:
        key = _expr_key(expr)
        known = self._within.get(key)
        if known is None:
            labels, names = self._local(expr)
            known = labels.union(*(self._var(n) for n in names if n in self.defs))
            self._within[key] = known
        return known

    def _local(self, expr: Any) -> tuple[frozenset[str], frozenset[str]]:
        """``(labels, variable names)`` an expression names, not looking into the variables."""
        expr = as_var(expr)
        key = _expr_key(expr)
        known = self._own.get(key)
        if known is not None:
            return known
        labels: set[str] = set()
        names: set[str] = set()
        subs: tuple[Any, ...] = ()
        if isinstance(expr, Op):
            if expr.label is not None:
                labels.add(expr.label)
            subs = tuple(expr.inputs or ())
        elif isinstance(expr, Alt):
            subs = tuple(expr.options)
        elif isinstance(expr, Var):
            names.add(expr.name)
        for sub in subs:
            sub_labels, sub_names = self._local(sub)
            labels |= sub_labels
            names |= sub_names
        self._own[key] = result = (frozenset(labels), frozenset(names))
        return result

    def _var(self, name: str) -> frozenset[str]:
        """``$name`` and what its definition can meet, through the variables it names in turn."""
        known = self._of_var.get(name)
        if known is None:
            found: set[str] = set()
            todo = [name]
            while todo:
                var = todo.pop()
                if "$" + var in found:
                    continue
                found.add("$" + var)
                labels, names = self._local(self.defs[var])
                found |= labels
                todo.extend(n for n in names if n in self.defs)
            self._of_var[name] = known = frozenset(found)
        return known


def _min_ops(expr: Any, defs: Mapping[str, Any], seen: frozenset[str],
             memo: dict[tuple[object, frozenset[str]], tuple[int, frozenset[str]]],
             names: _Names) -> tuple[int, frozenset[str]]:
    """``(ops, seen after)``: the ops of the smallest match of ``expr`` not counted yet (a
    labelled op counts once however often the pattern names it, and so does a variable's
    definition; ``seen`` holds those met so far, each option of a ``one_of`` starting from the
    same), memoised per sub-expression and the part of ``seen`` it can meet (the rest changes
    neither the count nor what the expression adds to ``seen``)."""
    expr = as_var(expr)
    key = (_expr_key(expr), seen & names.within(expr))
    known = memo.get(key)
    if known is not None:
        return known[0], seen | known[1]
    result: tuple[int, frozenset[str]] = (0, seen)
    if isinstance(expr, Op) and not (expr.label is not None and expr.label in seen):
        after = seen | {expr.label} if expr.label is not None else seen
        total = 1
        for e in expr.inputs or ():
            count, after = _min_ops(e, defs, after, memo, names)
            total += count
        result = (total, after)
    elif isinstance(expr, Alt):
        result = (min(_min_ops(e, defs, seen, memo, names)[0] for e in expr.options), seen)
    elif isinstance(expr, Var) and expr.name in defs and "$" + expr.name not in seen:
        result = _min_ops(defs[expr.name], defs, seen | {"$" + expr.name}, memo, names)
    memo[key] = (result[0], result[1] - seen)
    return result
