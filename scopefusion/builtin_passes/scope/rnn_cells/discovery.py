"""Cell scopes found by what their nodes compute, whatever the scopes are named.

A library may call its cell's scope ``basic_lstm_cell``, ``lstm_cell_3``, ``lstm``, ``gru`` or
anything else: the name says nothing the dataflow does not.  :func:`step_scopes` matches each
form's step expression at every node of the form's root op types in the whole graph (candidates
by op type, each tried once) and gives, for each step found, the innermost scope holding every
node the step computes with (constants and weight reads left aside, as they may sit anywhere).
The cell passes then read those scopes exactly as they read a scope named like the cell: every
step in it, what else it computes, the options the fused op cannot express.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ....core.graph.matching import MatchFailure, PatternMatcher
from .prefilter import first_look
from .steps import STORAGE_OPS, CellForm, form_for_root

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph


def _common_scope(sg: "ScopeGraph", nodes: Iterable[int]) -> "Scope | None":
    """The innermost scope holding every one of ``nodes`` (None: none but the root)."""
    node_scope = sg.tree.node_scope
    common: "Scope | None" = None
    for i in nodes:
        scope = node_scope[i]
        if common is None:
            common = scope
            continue
        while common is not None and not (common is scope or common.is_ancestor_of(scope)):
            common = common.parent
        if common is None:
            return None
    return None if common is None or common.parent is None else common


def step_scopes(sg: "ScopeGraph", forms: Iterable[CellForm]) -> list["Scope"]:
    """The scopes holding a step of any of ``forms``, in the order first found (a form whose gate
    order the step reveals is matched in that order)."""
    index = sg.index
    found: dict[str, "Scope"] = {}
    for form in forms:
        matchers: dict[object, PatternMatcher] = {}
        look = first_look(form)
        if not look.graph_may_hold(index):  # a graph without a Split, a Sigmoid ... holds no step
            continue
        for root_type in form.roots:
            for i in index.nodes_of_type(root_type):
                if not look.could_match(index, i):
                    continue
                for variant in form_for_root(form, sg, i):
                    matcher = matchers.get(variant.order)
                    if matcher is None:
                        matcher = matchers[variant.order] = PatternMatcher(sg, defs=variant.defs())
                    scope = _step_scope(sg, matcher, i)
                    if scope is not None:
                        found.setdefault(scope.name, scope)
    return list(found.values())


def _step_scope(sg: "ScopeGraph", matcher: PatternMatcher, root: int) -> "Scope | None":
    """The scope of the step whose output is ``root``, or None (no step there, or only the root
    scope holds it)."""
    index = sg.index
    matcher.reset()
    try:
        matcher.match((root, 0), "$out")
    except MatchFailure:
        return None
    computing = [j for j in matcher.members if index.ops[j] not in STORAGE_OPS and sg.const_value_of(j) is None]
    return _common_scope(sg, computing)


def unrelated(scopes: Iterable["Scope"], taken: Iterable["Scope"]) -> list["Scope"]:
    """``scopes`` that are none of ``taken``, nor inside or around one of them."""
    taken = list(taken)
    kept: list["Scope"] = []
    for s in scopes:
        if not any(t.name == s.name or t.is_ancestor_of(s) or s.is_ancestor_of(t) for t in taken + kept):
            kept.append(s)
    return kept


def split_scopes(sg: "ScopeGraph") -> list["Scope"]:
    """The scopes directly holding a ``Split`` (where a cell cuts its gates apart), each once."""
    node_scope = sg.tree.node_scope
    found: dict[str, "Scope"] = {}
    for i in sg.index.nodes_of_type("Split"):
        scope = node_scope[i]
        if scope.parent is not None:
            found.setdefault(scope.name, scope)
    return list(found.values())


def scopes_holding(sg: "ScopeGraph", op_types: Iterable[str]) -> list["Scope"]:
    """The scopes (the root aside) holding a node of one of ``op_types``, directly or below, in the
    graph's order of scopes: found from those nodes up, so a graph holding none gives none without
    a look at any scope."""
    node_scope = sg.tree.node_scope
    names: set[str] = set()
    for op_type in op_types:
        for i in sg.index.nodes_of_type(op_type):
            scope: "Scope | None" = node_scope[i]
            while scope is not None and scope.parent is not None and scope.name not in names:
                names.add(scope.name)
                scope = scope.parent
    return [s for s in sg.scopes() if s.name in names] if names else []
