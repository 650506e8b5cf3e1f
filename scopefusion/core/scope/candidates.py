"""Turning a :class:`FusionScopesResult` into a scope-free :class:`FusionCandidate`.

A scope pass names inner nodes by a suffix of their names relative to the
result's scopes, and maps their input slots and output ports to the fused op's
inputs and outputs.  Here those names are resolved to nodes and the port maps to
tensors; everything else is checked by the shared pipeline.
"""
from __future__ import annotations

from typing import Callable

from ..fusion.candidate import FusionCandidate, Tensor
from ..fusion.refusal import Refused
from ..graph.index import GraphIndex
from ..graph.vocabulary import CONTROL, tensor_name
from .results import FusionScopesResult


def result_members(index: GraphIndex, result: FusionScopesResult) -> frozenset[int]:
    """Every node listed in the result or lying under one of its scopes (only the result's
    part of its scope when it names one)."""
    members: set[int] = set()
    if result.part is not None:
        members.update(result.part.all_node_indices())
    else:
        for scope in result.scopes:
            members.update(scope.all_node_indices())
    for extra in result.extra_nodes:
        i = index.index.get(extra)
        if i is None:
            raise Refused(f"extra node {extra!r} does not exist")
        members.add(i)
    return frozenset(members)


def resolve_key(index: GraphIndex, result: FusionScopesResult, members: frozenset[int], key: str) -> int:
    """The inner node a port-map key names: a suffix relative to one of the result's
    scopes, a full name, or failing those a unique name ending in ``/key``."""
    for scope in result.scopes:
        i = index.index.get(scope.full_name(key))
        if i is not None and i in members:
            return i
    i = index.index.get(key)
    if i is not None and i in members:
        return i
    tail = "/" + key
    hits = [m for m in members if index.names[m].endswith(tail)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise Refused(f"port map names {key!r}, which is no node of the result")
    names = sorted(index.names[h] for h in hits)
    raise Refused(f"port map key {key!r} is ambiguous: {', '.join(names[:3])}")


def to_candidate(index: GraphIndex, result: FusionScopesResult, *, pass_name: str, order: int) -> FusionCandidate:
    """The candidate a scope pass's result describes; raises :class:`Refused`."""
    members = result_members(index, result)
    if not members:
        raise Refused("the result holds no nodes")
    return FusionCandidate(
        name=result.name,
        members=members,
        pass_name=pass_name,
        engine="scope",
        type=result.type,
        attrs=dict(result.attrs),
        inputs=_inputs(index, result, members),
        outputs=_outputs(index, result, members),
        inner_nodes=list(result.inner_nodes),
        inner_outputs=dict(result.inner_outputs),
        where=[s.name for s in result.scopes],
        description=result.description,
        order=order,
        recomputed=_recomputed(index, result),
    )


def _recomputed(index: GraphIndex, result: FusionScopesResult) -> frozenset[Tensor]:
    out = set()
    for name, port in result.recomputed_reads:
        i = index.index.get(name)
        if i is None:
            raise Refused(f"recomputed tensor {name!r} does not exist")
        out.add((i, port))
    return frozenset(out)


def _node_of(index: GraphIndex, result: FusionScopesResult, members: frozenset[int]) -> Callable[[str], int]:
    """:func:`resolve_key` for the keys of one result: a suffix relative to one of its scopes,
    the common case, is looked up at once."""
    get = index.index.get
    prefixes = [scope.full_name("") for scope in result.scopes]

    def node_of(key: str) -> int:
        for prefix in prefixes:
            i = get(prefix + key)
            if i is not None and i in members:
                return i
        return resolve_key(index, result, members, key)

    return node_of


def _inputs(index: GraphIndex, result: FusionScopesResult, members: frozenset[int]) -> dict[int, Tensor]:
    names, inputs = index.names, index.inputs
    node_of = _node_of(index, result, members)
    fed: dict[int, Tensor] = {}
    for key, slots in result.input_map.items():
        node = node_of(key)
        ins = inputs[node]
        for slot, fused in enumerate(slots):
            if fused is None:
                continue
            if fused < 0:
                raise Refused(f"{key!r} slot {slot} maps to fused input {fused}")
            if slot >= len(ins) or ins[slot][1] == CONTROL:
                raise Refused(f"inner node {names[node]!r} has no input slot {slot}")
            tensor = ins[slot]
            previous = fed.setdefault(fused, tensor)
            if previous != tensor:
                raise Refused(
                    f"fused input {fused} is fed by two different tensors: "
                    f"{tensor_name(names[previous[0]], previous[1])} and {tensor_name(names[tensor[0]], tensor[1])}"
                )
    for fused, (name, port) in result.input_tensors.items():
        i = index.index.get(name)
        if i is None:
            raise Refused(f"fused input {fused} names {name!r}, which does not exist")
        if fed.setdefault(fused, (i, port)) != (i, port):
            raise Refused(f"fused input {fused} is fed by two different tensors: {tensor_name(name, port)} and an "
                          "inner node's input")
    return fed


def _outputs(index: GraphIndex, result: FusionScopesResult, members: frozenset[int]) -> dict[Tensor, int]:
    node_of = _node_of(index, result, members)
    outputs: dict[Tensor, int] = {}
    for key, ports in result.output_map.items():
        node = node_of(key)
        for port, fused in enumerate(ports):
            if fused is not None:
                outputs[(node, port)] = fused
    return outputs
