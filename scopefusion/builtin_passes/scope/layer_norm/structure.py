"""Analyse each distinct layer-norm structure once.

A model repeats one layer norm many times (every block of a transformer): the analysis
(:mod:`.moments`, :mod:`.fused_batch_norm`) finds the same roles in the same places every
time.  :class:`AnalysisCache` describes a scope by everything the analysis reads - every
node of the scope (its name relative to the scope, op, attributes, inputs, which of its
outputs are read outside and whether anything reads it), the value of every small constant
(the shape and type of larger ones), and for each tensor coming from outside its producer's
op, what that forwards to, the constants that feeds on, and the tensor's static shape and
rank - and analyses a scope only when no scope described alike was analysed before.  An alike
scope's layer norm is the first one's, with its own node and tensor names.

The values of large constants other than gamma and beta are compared too (the first scope's
are kept), since an analysis may read them (a batch norm's scale of ones).  A scope the
analysis refuses is not remembered: refusals name the scope's own nodes, so every such scope
is analysed (and they are rare in a model that has its layer norms fused).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Hashable, Union

from ....core.graph.vocabulary import CONTROL
from .common import LayerNormMatch, rank_of, static_shape

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.instances import ScopePart
    from ....core.scope.scope_graph import Scope, ScopeGraph

    AnyScope = Union[Scope, ScopePart]

#: Constants of at most this many elements (scalars, axes, shapes) are described by their values.
SMALL_CONSTANT = 8

#: A tensor of the scope (``("in", position, port)``) or from outside it (``("out", k)``).
Ref = tuple


class _Description:
    """What the analysis of one scope can read, as a hashable ``key``, plus the names
    needed to turn a remembered match into this scope's."""

    def __init__(self, scope: "AnyScope") -> None:
        sg = scope.graph
        index = sg.index
        self.members: list[int] = list(scope.all_node_indices())
        self.position = {i: k for k, i in enumerate(self.members)}
        self.outside: dict[tuple[int, int], int] = {}
        self.large: dict[int, bytes | None] = {}  # node -> its value's bytes, taken only when asked
        consumers = index.consumers
        parts: list[Hashable] = [bool(getattr(scope, "is_root", False))]
        for i in self.members:
            node = index.nodes[i]
            inputs = tuple(self._ref(j, port) for j, port in index.inputs[i])
            read_outside = tuple(sorted({p for c, p, _ in consumers[i] if c not in self.position and p != CONTROL}))
            parts.append((scope.suffix_of(index.names[i]), node.op, inputs, self._attrs_key(i, node), read_outside,
                          bool(consumers[i])))
        parts.append(tuple(self._outside_key(sg, j, port) for (j, port) in self.outside))
        self.key = tuple(parts)

    def _ref(self, j: int, port: int) -> Ref:
        k = self.position.get(j)
        if k is not None:
            return ("in", k, port)
        return ("out", self.outside.setdefault((j, port), len(self.outside)))

    def _constant_key(self, sg: "ScopeGraph", i: int) -> Hashable:
        """What a constant read from outside holds: the forwarding ops and casts down to it
        (with their attributes) and the constant's own tensor (:func:`_attrs_key`)."""
        chain = sg.constant_chain(i)
        if chain is None:
            return None
        nodes = sg.index.nodes
        return tuple((nodes[k].op, self._attrs_key(k, nodes[k])) for k in chain)

    def _attrs_key(self, i: int, node: Any) -> Hashable:
        """A node's attributes; a constant's value as its bytes when it is small, else as its
        type and shape (its bytes are compared only if the first analysis asks)."""
        items = []
        for k, v in sorted(node.attr.items()):
            if k == "_class":
                continue
            if k == "value" and v.WhichOneof("value") == "tensor":
                tensor = v.tensor
                dims = tuple(d.size for d in tensor.tensor_shape.dim)
                if math.prod(dims) > SMALL_CONSTANT:
                    self.large.setdefault(i, None)
                    items.append((k, ("large", tensor.dtype, dims)))
                    continue
            items.append((k, v.SerializeToString(deterministic=True)))
        return tuple(items)

    def _outside_key(self, sg: "ScopeGraph", j: int, port: int) -> Hashable:
        index = sg.index
        name = index.names[j]
        resolved = index.index[sg.resolve_forwarding(name)]
        resolved_ref = ("in", self.position[resolved]) if resolved in self.position else index.ops[resolved]
        feeds = tuple(self._constant_key(sg, f) if p != CONTROL else None for f, p in index.inputs[resolved])
        shape = static_shape(sg, (name, port))
        return (index.ops[j], port, self._attrs_key(j, index.nodes[j]), self._constant_key(sg, j),
                resolved_ref, feeds, None if shape is None else tuple(shape), rank_of(sg, (name, port)))

    def large_values(self, sg: "ScopeGraph", skip: set[int]) -> dict[int, bytes]:
        """The bytes of every large constant read, but those in ``skip``, by position in the
        description's order of discovery."""
        values = {}
        for k, i in enumerate(self.large):
            if i not in skip:
                values[k] = sg.index.nodes[i].attr["value"].tensor.SerializeToString(deterministic=True)
        return values


@dataclass(frozen=True)
class _Remembered:
    """A match in terms of a description: tensors and nodes as references."""

    match: LayerNormMatch
    tensors: dict[str, Ref]
    nodes: dict[str, int | None]
    large_values: dict[int, bytes]


def _remember(sg: "ScopeGraph", described: _Description, match: LayerNormMatch) -> _Remembered | None:
    index = sg.index
    tensors: dict[str, Ref] = {}
    for field_name in ("x", "gamma", "beta"):
        name, port = getattr(match, field_name)
        i = index.index[name]
        if i in described.position:
            tensors[field_name] = ("in", described.position[i], port)
        elif (i, port) in described.outside:
            tensors[field_name] = ("out", described.outside[(i, port)])
        else:
            return None
    nodes: dict[str, int | None] = {}
    for field_name in ("output", "mean", "variance", "output_cast"):
        name = getattr(match, field_name)
        position = None if name is None else described.position.get(index.index[name])
        if name is not None and position is None:
            return None
        nodes[field_name] = position
    skip: set[int] = set()
    for field_name in ("gamma", "beta"):
        chain = sg.constant_chain(index.index[getattr(match, field_name)[0]])
        skip.update(chain or ())
    return _Remembered(match, tensors, nodes, described.large_values(sg, skip))


def _recall(sg: "ScopeGraph", described: _Description, remembered: _Remembered) -> LayerNormMatch | None:
    """The remembered match in this scope's names; None when a large constant differs."""
    large = list(described.large)
    for k, value in remembered.large_values.items():
        if sg.index.nodes[large[k]].attr["value"].tensor.SerializeToString(deterministic=True) != value:
            return None
    names = sg.index.names
    outside = list(described.outside)

    def tensor(ref: Ref) -> tuple[str, int]:
        if ref[0] == "in":
            return names[described.members[ref[1]]], ref[2]
        j, port = outside[ref[1]]
        return names[j], port

    fields: dict[str, Any] = {key: tensor(ref) for key, ref in remembered.tensors.items()}
    for key, position in remembered.nodes.items():
        fields[key] = None if position is None else names[described.members[position]]
    return replace(remembered.match, **fields)


class AnalysisCache:
    """Layer-norm analyses of one scope graph, remembered by structure."""

    def __init__(self, graph: "ScopeGraph") -> None:
        self.graph = graph
        self._remembered: dict[Hashable, _Remembered | None] = {}
        self.analysed = 0
        self.recalled = 0

    def analyse(self, scope: "AnyScope", analyse: Callable[["AnyScope"], LayerNormMatch]) -> LayerNormMatch:
        """``analyse(scope)``, or the match of a scope described alike analysed before."""
        sg = self.graph
        described = _Description(scope)
        remembered = self._remembered.get(described.key)
        if remembered is not None:
            match = _recall(sg, described, remembered)
            if match is not None:
                self.recalled += 1
                return match
        self.analysed += 1
        match = analyse(scope)  # a refusal (NotLayerNorm) is not remembered
        if described.key not in self._remembered:
            self._remembered[described.key] = _remember(sg, described, match)
        return match
