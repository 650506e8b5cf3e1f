"""Helpers for scope passes that checked a scope's wiring with the op-pattern
language: port maps for the fused inputs, and what the pattern left over."""
from __future__ import annotations

from typing import TYPE_CHECKING, Container, Sequence

from ..graph.vocabulary import CONTROL

if TYPE_CHECKING:  # pragma: no cover
    from .scope_graph import Scope, ScopeGraph

Tensor = tuple[int, int]


def input_slots(graph: "ScopeGraph", inside: Container[int], tensors: Sequence[Tensor]) -> dict[str, list[int | None]]:
    """Port maps for fused inputs ``tensors``: per node in ``inside`` reading any of them (by
    full name), its data input slots, each the index of the fused input it reads or None."""
    index = graph.index
    wanted = {t: k for k, t in reversed(list(enumerate(tensors)))}
    out: dict[str, list[int | None]] = {}
    for node, _ in tensors:
        for consumer, _, _ in index.consumers[node]:
            name = index.names[consumer]
            if consumer not in inside or name in out:
                continue
            ins = [t for t in index.inputs[consumer] if t[1] != CONTROL]
            slots = [wanted.get(t) for t in ins]
            if any(s is not None for s in slots):
                out[name] = slots
    return out


def unmatched_nodes(scope: "Scope", matched: Container[int]) -> list[str]:
    """Nodes of the scope that are neither matched nor constants (or reads of constants)."""
    graph = scope.graph
    names = graph.index.names
    return [names[i] for i in scope.all_node_indices()
            if i not in matched and graph.const_value_of(i) is None]
