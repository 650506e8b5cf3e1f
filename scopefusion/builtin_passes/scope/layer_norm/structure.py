"""Analyse each distinct layer-norm structure once.

A model repeats one layer norm many times (every block of a transformer): the analysis
(:mod:`.moments`, :mod:`.fused_batch_norm`) finds the same roles in the same places every
time.  :class:`AnalysisCache` describes a scope by everything the analysis reads - every
node of the scope (its name relative to the scope, op, attributes, inputs, which of its
outputs are read outside and whether anything reads it), the value of every small constant
(the shape and type of larger ones), and for each tensor coming from outside its producer's
op, what that forwards to, the constants that feeds on, and the tensor's static shape and
rank - and analyses a scope only when no scope described alike was analysed before.  An alike
scope's layer norm is the first one's, with its own node and tensor names.  Describing a
scope costs one pass over its nodes: attribute keys are built once per distinct set of
attributes (:mod:`.node_keys`) and ranks are inferred once per tensor of the graph.  A
recalled scope also takes the ranks of its outputs from the first one's when its rank rules
give them alike (:class:`_Ranks`): in a chain of layers, the rank of the next layer's input
is then known without walking back through this one.

The values of large constants other than gamma and beta are compared too (the first scope's
are kept), since an analysis may read them (a batch norm's scale of ones).  A scope the
analysis refuses is not remembered: refusals name the scope's own nodes, so every such scope
is analysed (and they are rare in a model that has its layer norms fused).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, Union

from ....core.graph.vocabulary import CONTROL
from .common import LayerNormMatch, rank_of, static_shape
from .node_keys import AttributeKeys

if TYPE_CHECKING:  # pragma: no cover
    from ....core.graph.index import GraphIndex
    from ....core.scope.instances import ScopePart
    from ....core.scope.scope_graph import Scope, ScopeGraph

    AnyScope = Union[Scope, ScopePart]

#: A tensor of the scope (``("in", position, port)``) or from outside it (``("out", k)``).
Ref = tuple


class _Description:
    """What the analysis of one scope can read, as a hashable ``key``, plus the names
    needed to turn a remembered match into this scope's."""

    def __init__(self, scope: "AnyScope", attributes: AttributeKeys) -> None:
        sg = scope.graph
        index = sg.index
        self.attributes = attributes
        members = self.members = scope.all_node_indices()
        self.position = dict(zip(members, range(len(members)), strict=True))
        self.outside: dict[tuple[int, int], int] = {}
        attrs = attributes.of_all(members)
        # node -> its value's bytes, taken only when asked
        self.large: dict[int, bytes | None] = {i: None for i, (_, large) in zip(members, attrs, strict=True) if large}
        start = len(scope.name) + 1 if scope.name else 0  # every member's name starts with the scope's
        names = tuple([name[start:] for name in map(index.names.__getitem__, members)])
        wiring, reads = self._wiring(index)
        self.reads = reads
        self.key = (bool(getattr(scope, "is_root", False)), names, tuple(map(index.ops.__getitem__, members)),
                    wiring, tuple([key for key, _ in attrs]), reads,
                    tuple([self._outside_key(sg, j, port) for (j, port) in self.outside]))

    def _wiring(self, index: "GraphIndex") -> tuple[Hashable, tuple[int | tuple[int, ...], ...]]:
        """Each member's inputs and its outputs read outside the scope, with whether anything
        reads it at all.  The inputs come as one flat tuple: per member its input count, then
        per input a member's position and the port, or ``-1 - k`` for the ``k``-th tensor from
        outside (by order of first read).  The reads: per member 0 (read by nothing), 1 (read
        by members only, or by control outside) or the sorted ports read outside."""
        position, outside = self.position, self.outside
        inputs, consumers = index.inputs, index.consumers
        member_of, known = position.get, outside.get
        wiring: list[int] = []
        add = wiring.append
        inside = [0] * len(self.members)  # edges from each member to members
        for i in self.members:
            ins = inputs[i]
            add(len(ins))
            for j, port in ins:
                k = member_of(j)
                if k is None:
                    k = known((j, port))
                    if k is None:
                        k = outside[(j, port)] = len(outside)
                    add(-1 - k)
                else:
                    inside[k] += 1
                    add(k)
                    add(port)
        reads: list[int | tuple[int, ...]] = []
        for i, edges in zip(self.members, inside, strict=True):
            readers = consumers[i]
            if len(readers) == edges:
                reads.append(1 if edges else 0)
                continue
            ports = sorted({p for c, p, _ in readers if p != CONTROL and c not in position})
            reads.append(tuple(ports) if ports else 1)
        return tuple(wiring), tuple(reads)

    def _constant_key(self, sg: "ScopeGraph", i: int) -> Hashable:
        """What a constant read from outside holds: the forwarding ops and casts down to it
        (with their attributes) and the constant's own tensor (:func:`.attributes_key`)."""
        chain = sg.constant_chain(i)
        if chain is None:
            return None
        ops = sg.index.ops
        return tuple((ops[k], self._attrs_key(k)) for k in chain)

    def _attrs_key(self, i: int) -> Hashable:
        """Node ``i``'s attributes (:func:`.attributes_key`); a large constant is noted for
        :meth:`large_values`."""
        key, large = self.attributes.of(i)
        if large:
            self.large.setdefault(i, None)
        return key

    def _outside_key(self, sg: "ScopeGraph", j: int, port: int) -> Hashable:
        index = sg.index
        name = index.names[j]
        resolved = sg.forwarded(j)
        resolved_ref = ("in", self.position[resolved]) if resolved in self.position else index.ops[resolved]
        feeds = tuple(self._constant_key(sg, f) if p != CONTROL else None for f, p in index.inputs[resolved])
        shape = static_shape(sg, (name, port))
        return (index.ops[j], port, self._attrs_key(j), self._constant_key(sg, j),
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
class _Ranks:
    """The ranks of a scope's tensors read outside it, as its nodes' rank rules give them from
    the ranks of the tensors it reads (:meth:`.RankInference.closure_ranks`).  The rules of alike
    scopes are alike (their ops, attributes and wiring are), so an alike scope whose tensors from
    outside have the same inferred ranks, and whose inner ranks are not inferred yet, has these
    ranks: they are taken as inferred, and the walk from the next scope's input stops there."""

    boundary: tuple[tuple[int, int | None], ...]  # (k-th tensor from outside, its rank)
    inner: tuple[tuple[int, int], ...]  # (position, port) of the inner tensors they follow from
    ranks: tuple[tuple[tuple[int, int], int | None], ...]  # ((position, port), rank) read outside

    @staticmethod
    def of(sg: "ScopeGraph", described: _Description) -> "_Ranks | None":
        """The ranks of ``described``'s scope; None when they do not follow from it alone."""
        members = described.members
        targets = [(members[k], port) for k, read in enumerate(described.reads) if type(read) is tuple
                   for port in read]
        if not targets:
            return None
        position, outside, attributes = described.position, described.outside, described.attributes
        # a rule reading a constant's value: one the description holds (a small one)
        closure = sg.rank_inference().closure_ranks(targets, position.__contains__,
                                                    lambda i: not attributes.of(i)[1])
        if closure is None or not all(t in outside for t in closure.boundary):
            return None
        return _Ranks(tuple((outside[t], rank) for t, rank in closure.boundary.items()),
                      tuple((position[i], port) for i, port in closure.inner),
                      tuple(((position[i], port), rank) for (i, port), rank in closure.ranks.items()))

    def settle(self, sg: "ScopeGraph", described: _Description) -> None:
        """Take the ranks as inferred for ``described``'s scope, if they hold for it."""
        ranks = sg.rank_inference()
        outside = list(described.outside)
        for k, rank in self.boundary:
            if ranks.inferred(*outside[k]) != (True, rank):
                return
        members = described.members
        if not ranks.none_inferred([(members[k], port) for k, port in self.inner]):
            return
        ranks.settle({(members[k], port): rank for (k, port), rank in self.ranks})


@dataclass(frozen=True)
class _Remembered:
    """A match in terms of a description: tensors and nodes as references."""

    match: LayerNormMatch
    tensors: dict[str, Ref]
    nodes: dict[str, int | None]
    large_values: dict[int, bytes]
    #: the ranks of the tensors read outside the scope, as they follow from the scope
    ranks: "_Ranks | None"
    #: what a caller found of one alike scope and its match that holds for every one (see
    #: :attr:`AnalysisCache.facts`)
    facts: dict[str, Any] = field(default_factory=dict, compare=False)


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
    return _Remembered(match, tensors, nodes, described.large_values(sg, skip), _Ranks.of(sg, described))


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

    fields: dict[str, Any] = dict(vars(remembered.match))  # the remembered values, then this scope's names
    for key, ref in remembered.tensors.items():
        fields[key] = tensor(ref)
    for key, position in remembered.nodes.items():
        fields[key] = None if position is None else names[described.members[position]]
    return LayerNormMatch(**fields)


class AnalysisCache:
    """Layer-norm analyses of one scope graph, remembered by structure."""

    def __init__(self, graph: "ScopeGraph") -> None:
        self.graph = graph
        self._remembered: dict[Hashable, _Remembered | None] = {}
        self.attributes = AttributeKeys(graph.index.nodes)
        self.analysed = 0
        self.recalled = 0
        #: after :meth:`analyse`, a dict shared by every scope described alike whose match was
        #: recalled from one analysis (None if the scope's match is not remembered): facts that
        #: follow from the description and the match's tensors as references (which of the
        #: scope's nodes read x, say) are found once and kept here by the caller
        self.facts: dict[str, Any] | None = None

    def analyse(self, scope: "AnyScope", analyse: Callable[["AnyScope"], LayerNormMatch]) -> LayerNormMatch:
        """``analyse(scope)``, or the match of a scope described alike analysed before."""
        sg = self.graph
        described = _Description(scope, self.attributes)
        remembered = self._remembered.get(described.key)
        if remembered is not None:
            match = _recall(sg, described, remembered)
            if match is not None:
                if remembered.ranks is not None:
                    remembered.ranks.settle(sg, described)
                self.recalled += 1
                self.facts = remembered.facts
                return match
        self.analysed += 1
        self.facts = None
        match = analyse(scope)  # a refusal (Refused) is not remembered
        if described.key not in self._remembered:
            remembered = self._remembered[described.key] = _remember(sg, described, match)
            self.facts = None if remembered is None else remembered.facts
        return match
