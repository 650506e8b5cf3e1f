"""Helpers for scope passes that checked a scope's wiring with the op-pattern
language: port maps for the fused inputs, and what the pattern left over."""
from __future__ import annotations

from typing import TYPE_CHECKING, Container, Mapping, Sequence

from ..fusion.refusal import fail
from ..graph.vocabulary import CONTROL, tensor_name

if TYPE_CHECKING:  # pragma: no cover
    from ..graph.index import GraphIndex
    from .scope_graph import Scope, ScopeGraph

Tensor = tuple[int, int]


def input_slots(graph: "ScopeGraph", inside: Container[int], tensors: Sequence[Tensor], *,
                names: Sequence[str] = (), reads: Mapping[Tensor, str] | None = None) -> dict[str, list[int | None]]:
    """Port maps for fused inputs ``tensors``: per node in ``inside`` reading any of them (by
    full name), its data input slots, each the index of the fused input it reads or None.

    A fused op may take one tensor at several inputs (an LSTM step whose initial h and c are one
    ``zeros``): the graph cannot tell which read of it is which input, so ``reads`` does, the pass's
    declared mapping ``(node, slot) -> input name`` (``names``: the fused inputs' names, in order;
    :attr:`PatternMatch.reads` for a pattern's).  Each such input must have reads of its own and
    every read of the tensor a declared input, or the result is refused (``fail``) saying so."""
    index = graph.index
    by_tensor: dict[Tensor, list[int]] = {}
    for k, t in enumerate(tensors):
        by_tensor.setdefault(t, []).append(k)
    label = [*names, *(f"input {k}" for k in range(len(names), len(tensors)))]
    position = {name: k for k, name in enumerate(names)}
    out: dict[str, list[int | None]] = {}
    for node, _ in by_tensor:
        for consumer, _, _ in index.consumers[node]:
            name = index.names[consumer]
            if consumer not in inside or name in out:
                continue
            ins = [t for t in index.inputs[consumer] if t[1] != CONTROL]
            slots = [_which(index, by_tensor.get(t), (consumer, k), reads, position, label, t)
                     for k, t in enumerate(ins)]
            if any(s is not None for s in slots):
                out[name] = slots
    for t, ks in by_tensor.items():
        if len(ks) > 1:
            _check_each_read(index, t, ks, out, label)
    return out


def _which(index: "GraphIndex", ks: list[int] | None, read: Tensor, reads: Mapping[Tensor, str] | None,
           position: Mapping[str, int], label: Sequence[str], tensor: Tensor) -> int | None:
    """The fused input the data slot ``read`` is (``ks``: the inputs its tensor is; None: none)."""
    if not ks:
        return None
    if len(ks) == 1:
        return ks[0]
    declared = None if reads is None else position.get(reads.get(read, ""))
    if declared in ks:
        return declared
    shown = " and ".join(label[k] for k in ks)
    node, slot = read
    fail(f"{shown} are one tensor, {tensor_name(index.names[tensor[0]], tensor[1])}, and which of them "
         f"{index.names[node]!r} reads (input {slot}) is not declared: the fused op cannot be given its inputs",
         index.names[node])


def _check_each_read(index: "GraphIndex", tensor: Tensor, ks: list[int], out: Mapping[str, list[int | None]],
                     label: Sequence[str]) -> None:
    """Every fused input ``ks`` (one ``tensor``) has a read of its own among the port maps."""
    mapped = {k for slots in out.values() for k in slots}
    missing = [label[k] for k in ks if k not in mapped]
    if missing:
        fail(f"{' and '.join(label[k] for k in ks)} are one tensor, "
             f"{tensor_name(index.names[tensor[0]], tensor[1])}, and nothing inside reads it as "
             f"{' or '.join(missing)}: the fused op cannot be given that input")


def unmatched_nodes(scope: "Scope", matched: Container[int]) -> list[str]:
    """Nodes of the scope that are neither matched nor constants (or reads of constants)."""
    graph = scope.graph
    names = graph.index.names
    return [names[i] for i in scope.all_node_indices()
            if i not in matched and graph.const_value_of(i) is None]
