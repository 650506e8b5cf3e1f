"""Scope patterns: features that a scope must show to be labelled.

A :class:`ScopePattern` is a conjunction of features.  The three feature kinds
follow the reference semantics:

* :class:`NodeOpTypeFeature` counts descendant nodes of one op type,
* :class:`NodeAttrFeature` looks at an attribute of direct nodes of one type,
* :class:`ScopeFeature` looks at already-labelled descendant scopes and names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet, Any, Sequence, Union

from ..graph.attrs import attr_equals
from ..graph.vocabulary import dtype_name

if TYPE_CHECKING:  # pragma: no cover
    from .scope_graph import Scope



def count_holds(count: int, num: int, step: int) -> bool:
    """The reference counting rule; ``count`` is -1 when nothing was found."""
    if step == 0:
        return count == num
    return count != -1 and count % step == num


def count_requires_presence(num: int, step: int) -> bool:
    """True when the rule cannot hold for an absent (count -1) item."""
    return step != 0 or num != -1


@dataclass(frozen=True)
class NodeOpTypeFeature:
    """``op_type`` occurs ``num`` times among descendants (see :func:`count_holds`).

    ``num=-1`` with ``step=0`` means "absent"; ``(op, 0, 1)`` means "present".
    """

    op_type: str
    num: int
    step: int = 0

    def __post_init__(self) -> None:
        if self.step < 0:
            raise ValueError(f"NodeOpTypeFeature({self.op_type!r}): step must be >= 0")
        if self.step == 0 and self.num < -1:
            raise ValueError(f"NodeOpTypeFeature({self.op_type!r}): num must be >= -1")
        if self.step > 0 and not 0 <= self.num < self.step:
            raise ValueError(
                f"NodeOpTypeFeature({self.op_type!r}): num must be in [0, step) when step is set"
            )

    def match(self, scope: "Scope") -> bool:
        # the count of one op type (Scope.count), not all of them (Scope.op_counts walks the
        # subtree's nodes): explaining near misses asks big scopes too
        return count_holds(scope.count(self.op_type) or -1, self.num, self.step)

    def rules_out_subtree(self, scope: "Scope") -> bool:
        """Descendant counts never exceed this scope's: an op required but
        absent here is absent everywhere below."""
        return count_requires_presence(self.num, self.step) and not scope.count(self.op_type)

    def explain(self, scope: "Scope") -> str:
        want = _count_rule(self.num, self.step)
        return f"{want} {self.op_type} node(s) wanted, {scope.count(self.op_type)} found"


AttrScalar = Union[bool, int, float, str, bytes]


@dataclass(frozen=True)
class NodeAttrFeature:
    """Some direct node of ``op_type`` has attribute ``attr_name`` equal to ``value``.

    Floats compare with a tolerance; ints, strings and bools exactly.  A list
    value compares element-wise with a list attribute.  A set (or frozenset)
    of values holds when the attribute equals any one of them, e.g. every
    float dtype: ``NodeAttrFeature("Rsqrt", "T", {1, 2, 14, 19})``.
    """

    op_type: str
    attr_name: str
    value: Union[AttrScalar, Sequence[AttrScalar], "frozenset[AttrScalar]"]

    def __post_init__(self) -> None:
        if isinstance(self.value, set):  # hashable, like the rest of the feature
            object.__setattr__(self, "value", frozenset(self.value))

    def match(self, scope: "Scope") -> bool:
        return any(map(self.holds_on, scope.nodes_by_op(self.op_type, direct=True)))

    def holds_on(self, node: Any) -> bool:
        """Does ``node`` (of :attr:`op_type`) have the attribute value?"""
        name, value = self.attr_name, self.value
        if name not in node.attr:
            return False
        attr = node.attr[name]
        choices = value if isinstance(value, frozenset) else (value,)
        return any(attr_equals(attr, v) for v in choices)

    def rules_out_subtree(self, scope: "Scope") -> bool:
        return not scope.count(self.op_type)

    def wanted_and_found(self, scope: "Scope") -> tuple[str, str]:
        """``(wanted, found)`` in the graph's terms (dtype names, not numbers)."""
        direct = scope.nodes_by_op(self.op_type, direct=True)
        nodes = direct or scope.nodes_by_op(self.op_type)
        is_type = _is_type_attr(nodes, self.attr_name)
        choices = sorted(self.value, key=lambda v: (type(v).__name__, v)) if isinstance(self.value, frozenset) \
            else [self.value]
        shown = [_shown(v, is_type) for v in choices]
        wanted = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
        want = f"{self.op_type} directly in the scope with {self.attr_name} = {wanted}"
        if not direct:
            return want, "none lies directly in it" + (f" ({len(nodes)} in its sub-scopes)" if nodes else "")
        found = sorted({attr_text(n.attr[self.attr_name], is_type) if self.attr_name in n.attr else "unset"
                        for n in direct})
        return want, f"{self.attr_name} = {', '.join(found)}"

    def explain(self, scope: "Scope") -> str:
        """What was wanted and what the scope has, in the graph's terms (dtype names, not numbers)."""
        wanted, found = self.wanted_and_found(scope)
        return f"{wanted} wanted; {found_text(found)}"


def found_text(found: str) -> str:
    """A feature's ``found`` part as a sentence: ``found T = float32``, or ``none lies directly in it``."""
    return found if found.startswith("none ") else f"found {found}"


def _is_type_attr(nodes: Sequence[Any], attr_name: str) -> bool:
    """Whether ``attr_name`` holds a dtype: as the nodes have it, else by TensorFlow's naming
    (``T``, ``dtype``, ``SrcT``, ``out_type``, ...)."""
    for node in nodes:
        if attr_name in node.attr:
            return node.attr[attr_name].WhichOneof("value") == "type"
    return attr_name in ("T", "dtype") or attr_name.endswith(("T", "type"))


def _shown(value: Any, is_type: bool) -> str:
    if is_type and isinstance(value, int) and not isinstance(value, bool):
        return dtype_name(value)
    return repr(value)


def attr_text(attr: Any, is_type: bool = False) -> str:
    """An attribute's value as a user reads it: a dtype by name, bytes as text."""
    kind = attr.WhichOneof("value")
    if kind == "type":
        return dtype_name(attr.type)
    if kind == "s":
        return repr(attr.s.decode("utf-8", "replace"))
    if kind in ("i", "f", "b"):
        value = getattr(attr, kind)
        return dtype_name(value) if is_type and kind == "i" else repr(value)
    return kind or "unset"


def _count_rule(num: int, step: int, at_least: bool = False) -> str:
    if at_least:
        return f"at least {num}"
    if step == 0:
        return "no" if num == -1 else f"exactly {num}"
    return "some" if (num, step) == (0, 1) else f"a count = {num} mod {step} of"



@dataclass(frozen=True)
class ScopeFeature:
    """Constraints on labels of descendant scopes and on names.

    * ``suffix``: if given, must equal the scope's last name;
    * ``sub_type``: if given, the number of descendant scopes labelled with it
      satisfies ``(num, step)`` by the same rule as op-type counts, with 0
      counted as 0 (so ``num=0`` means "none labelled");
    * ``sub_scope_mask``: if given, a substring of some descendant scope's last name;
    * ``at_least`` (an addition to the reference's rules): the number of labelled
      descendant scopes is ``num`` or more (``step`` is then not used).
    """

    sub_type: str = ""
    num: int = 0
    suffix: str = ""
    sub_scope_mask: str = ""
    step: int = 0
    at_least: bool = False

    def counts(self, count: int) -> bool:
        """Does ``count`` labelled sub-scopes satisfy the feature?"""
        return count >= self.num if self.at_least else count_holds(count, self.num, self.step)

    def match(self, scope: "Scope") -> bool:
        if self.suffix and scope.last_name != self.suffix:
            return False
        if self.sub_type:
            count = scope.tree.count_labelled_below(scope, self.sub_type)
            if not self.counts(count):
                return False
        return not self.sub_scope_mask or any(self.sub_scope_mask in s.last_name for s in scope.all_sub_scopes())

    def rules_out_subtree(self, scope: "Scope") -> bool:
        return False

    def explain(self, scope: "Scope", *, labelled: int | None = None) -> str:
        """Why ``scope`` does not have the feature; ``labelled``: the count of labelled sub-scopes
        to speak of (the one when the scope was tested) instead of the count now."""
        if self.suffix and scope.last_name != self.suffix:
            return f"scope name {scope.last_name!r} is not {self.suffix!r}"
        if self.sub_type:
            found = scope.tree.count_labelled_below(scope, self.sub_type) if labelled is None else labelled
            if not self.counts(found):
                rule = _count_rule(self.num, self.step, self.at_least)
                return f"{rule} '{self.sub_type}' sub-scope(s) wanted, {found} found"
        return f"no sub-scope name contains {self.sub_scope_mask!r}"


Feature = Union[NodeOpTypeFeature, NodeAttrFeature, ScopeFeature]


@dataclass
class ScopePattern:
    """A conjunction of features; a matching scope is labelled ``sub_type``."""

    sub_type: str
    features: list[Feature] = field(default_factory=list)

    def add_node_op_type_feature(self, op_type: str, num: int, step: int = 0) -> "ScopePattern":
        self.features.append(NodeOpTypeFeature(op_type, num, step))
        return self

    def add_node_attr_feature(self, op_type: str, attr_name: str, value: Any) -> "ScopePattern":
        self.features.append(NodeAttrFeature(op_type, attr_name, value))
        return self

    def add_scope_feature(
        self, sub_type: str = "", num: int = 0, suffix: str = "", sub_scope_mask: str = "", step: int = 0,
        *, at_least: bool = False,
    ) -> "ScopePattern":
        self.features.append(ScopeFeature(sub_type, num, suffix, sub_scope_mask, step, at_least))
        return self

    @staticmethod
    def can_match(scope: "Scope") -> bool:
        """The root scope (the whole graph) and a scope holding a return node never match."""
        return not scope.contains_return and scope.parent is not None

    def match(self, scope: "Scope") -> bool:
        """True when the scope can match and every feature holds."""
        return self.can_match(scope) and all(f.match(scope) for f in self.features)

    def rules_out_subtree(self, scope: "Scope") -> bool:
        """True when neither this scope nor any descendant can match."""
        return any(f.rules_out_subtree(scope) for f in self.features)

    def subtree_misses(self, scope: "Scope", limit: int = 2) -> int:
        """How many features no scope in this subtree can have (counting up to ``limit``)."""
        n = 0
        for f in self.features:
            if f.rules_out_subtree(scope):
                n += 1
                if n >= limit:
                    break
        return n

    def required_op_types(self) -> frozenset[str]:
        """Op types without which no scope matches: those an op-type count needs present, and
        those an attribute feature looks for."""
        return frozenset(
            f.op_type for f in self.features
            if isinstance(f, NodeAttrFeature)
            or (isinstance(f, NodeOpTypeFeature) and count_requires_presence(f.num, f.step))
        )

    def failures(self, scope: "Scope", limit: int = 2) -> list[Feature]:
        """Up to ``limit`` features ``scope`` does not have."""
        failed: list[Feature] = []
        for f in self.features:
            if not f.match(scope):
                failed.append(f)
                if len(failed) >= limit:
                    break
        return failed


#: A batch is a list of patterns; a pattern set is an ordered list of batches.
PatternBatch = list[ScopePattern]
PatternSet = list[PatternBatch]


def check_pattern_sets(value: object) -> list[PatternSet]:
    """``value`` as returned by ``define_patterns()``, checked to be a list of pattern
    sets, each a list of batches, each a non-empty list of :class:`ScopePattern`;
    raises ``TypeError`` saying where it is not."""
    shape = ("define_patterns() must return a list of pattern sets, each a list of batches, "
             "each a list of ScopePattern, e.g. [[[pattern]]]")
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{shape}; got {type(value).__name__}")
    for i, pattern_set in enumerate(value):
        if not isinstance(pattern_set, (list, tuple)):
            raise TypeError(f"{shape}; pattern set {i} is a {type(pattern_set).__name__}")
        for j, batch in enumerate(pattern_set):
            if not isinstance(batch, (list, tuple)) or not batch:
                what = "empty" if isinstance(batch, (list, tuple)) else f"a {type(batch).__name__}"
                raise TypeError(f"{shape}; batch {j} of pattern set {i} is {what}")
            for k, pattern in enumerate(batch):
                if not isinstance(pattern, ScopePattern):
                    raise TypeError(f"{shape}; item {k} of batch {j} of pattern set {i} is a "
                                    f"{type(pattern).__name__}")
    return [[list(batch) for batch in pattern_set] for pattern_set in value]


def pattern_sets_may_match(pattern_sets: Sequence[PatternSet], op_types: AbstractSet[str]) -> bool:
    """Whether any pattern set can match in a graph whose nodes have only ``op_types``: a set
    matches only if every batch matches a scope, and a pattern only where the op types it
    requires occur."""
    return any(
        all(any(p.required_op_types() <= op_types for p in batch) for batch in pattern_set)
        for pattern_set in pattern_sets
    )
