"""A layer called several times in one scope: each call's gradient and forward told apart by dataflow.

A tf_keras layer called twice from one graph function puts both calls in its one name scope
(``layer_normalization/batchnorm/Rsqrt`` and ``layer_normalization/batchnorm_1/Rsqrt``), and their
gradients in one gradient scope.  Each call's gradient is one piece of that scope's dataflow, holding
its own normaliser gradient (``RsqrtGrad`` or ``FusedBatchNormGradV3``): its nodes are joined by their
data edges and by the tensors from outside they read together (its ``dy``, which the gradients of y's
scale and of its offset read on their own; its forward's tensors), never by a constant (the layer's
gamma, read by every call).  Constants join the piece that reads them.  The forward scope is cut into
its calls the same way (:func:`~scopefusion.core.scope.instances.split_instances`).  When the pieces do
not hold one normaliser gradient each (calls reading the same tensor, calls chained inside the scope),
the gradient is refused with the reason.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Union

from ....core.fusion.refusal import fail
from ....core.graph.vocabulary import CONTROL
from ....core.scope.instances import DisjointSets, ScopePart, constant_nodes, split_instances

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

Home = Union["Scope", ScopePart]


def gradient_call(sg: "ScopeGraph", scope: "Scope", grad: int, grads: list[int]) -> ScopePart:
    """The piece of gradient scope ``scope`` that is the gradient holding ``grad``, one of ``grads``."""
    index = sg.index
    members = scope.all_node_indices()
    inside = set(members)
    constant = constant_nodes(index, members, inside)
    sets = DisjointSets(i for i in members if i not in constant)
    find, join = sets.find, sets.join

    shared: dict[tuple[int, int], list[int]] = {}
    for i in sets:
        for p, port in index.inputs[i]:
            if port == CONTROL:
                continue
            if p in sets:
                join(i, p)
            elif p not in inside and sg.constant_chain(p) is None:  # dy, a forward tensor: not gamma
                shared.setdefault((p, port), []).append(i)
    if len({find(g) for g in grads}) != len(grads):
        fail(f"{scope.name!r} holds the gradients of {len(grads)} calls of a layer joined by their own data "
             "edges (calls chained inside the scope): the dataflow does not separate them")
    for (p, port), readers in shared.items():  # joined through the outside tensors each call reads
        holding = {find(r) for r in readers} & {find(g) for g in grads}
        if len(holding) > 1:
            tensor = index.names[p] + (f":{port}" if port else "")
            fail(f"{scope.name!r} holds the gradients of {len(grads)} calls of a layer that read the same tensor "
                 f"{tensor!r} (one input, or one dy, for both): the dataflow does not separate them")
        for r in readers[1:]:
            join(r, readers[0])
    roots = [find(g) for g in grads]
    stray = sorted((i for i in sets if find(i) not in roots), key=index.position.__getitem__)
    if stray:
        fail(f"{scope.name!r} holds the gradients of {len(grads)} calls of a layer, and {index.names[stray[0]]!r} "
             "belongs to none of them")
    own = find(grad)
    piece = {i for i in sets if find(i) == own}
    for c in sorted(constant, key=index.position.__getitem__, reverse=True):  # readers before producers
        read_by = {r for r, _, _ in index.consumers[c] if r in inside}
        if read_by and read_by <= piece:
            piece.add(c)
    return ScopePart(scope, piece)


def forward_call(sg: "ScopeGraph", scope: "Scope", anchor: str, anchor_ops: frozenset[str]) -> Home:
    """The call of the layer in forward scope ``scope`` that holds ``anchor`` (its Rsqrt or its
    FusedBatchNormV3): the scope itself when it holds one call."""
    index = sg.index
    anchors = [i for i in scope.all_node_indices() if index.ops[i] in anchor_ops]
    if len(anchors) < 2:
        return scope
    parts = split_instances(scope, anchors)
    if parts is None:
        fail(f"{scope.name!r} holds {len(anchors)} calls of a layer whose dataflow does not separate them "
             "(calls chained inside the scope)")
    (part,) = [p for p in parts if index.index[anchor] in p.indices]
    return part
