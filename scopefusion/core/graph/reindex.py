"""Indexing a rewritten graph from the index of the graph before the rewrite.

A rewrite drops some nodes, changes the inputs (or op) of a few others and puts new nodes
after given ones; every other node is the same message with the same inputs.  Reading names,
ops and inputs out of protobuf again is most of what indexing costs, so here only the changed
and new nodes are read: the rest is taken from the old index, producers renumbered.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Mapping, Sequence, Union

from ..errors import GraphValidationError
from .index import COLOCATE, GraphIndex, _summarise, no_gc, parse_node_inputs

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef


def reindex(old: GraphIndex, dropped: set[int], changed: set[int],
            inserted: Mapping[int, Sequence["NodeDef"]], *, validate: bool = True) -> GraphIndex:
    """The index of ``old.graph_def`` after a rewrite that dropped the nodes ``dropped``, changed the
    inputs or op of the nodes ``changed`` and placed ``inserted[i]`` (messages in the graph) right
    after node ``i`` (or where it stood, when it was dropped); the graph's node list must be in that
    order.  The result equals ``GraphIndex(old.graph_def)``; ``validate`` checks the same (duplicate
    names, inputs naming no node, cycles), reading only what changed."""
    new = GraphIndex.__new__(GraphIndex)
    new.graph_def = old.graph_def
    with no_gc():
        position, pieces, fresh = _lay_out(old, new, dropped, changed, inserted)
        new.index = {name: i for i, name in enumerate(new.names)}
        if validate and len(new.index) != len(new.names):
            new._raise_duplicates()
        new.inputs = _inputs(old, new, position, pieces)
    new._by_op = None
    new._order = None
    new._colocated = _colocated(old, new, position, fresh)
    if validate:
        _check_told(old, new, dropped, changed)
        new.topological_order()
    return new


#: A piece of the rewritten node list: a run of untouched old nodes ``(start, end)``, a changed
#: old node ``k`` or a new node (its message).
_Piece = Union[tuple[int, int], int, "NodeDef"]


def _lay_out(old: GraphIndex, new: GraphIndex, dropped: set[int], changed: set[int],
             inserted: Mapping[int, Sequence["NodeDef"]]) -> tuple[list[int], list[_Piece], list[int]]:
    """Fill in ``new``'s nodes, names and ops in the rewritten order; returns every old node's new
    position (-1 when dropped), the pieces the new node list is made of, in order, and the new
    nodes' positions."""
    nodes: list["NodeDef"] = []
    names: list[str] = []
    ops: list[str] = []
    position = [-1] * len(old.nodes)
    pieces: list[_Piece] = []
    fresh: list[int] = []
    start = 0
    for e in [*sorted({*dropped, *changed, *inserted}), len(old.nodes)]:
        if e > start:  # untouched nodes: copied as slices
            position[start:e] = range(len(nodes), len(nodes) + e - start)
            pieces.append((start, e))
            nodes += old.nodes[start:e]
            names += old.names[start:e]
            ops += old.ops[start:e]
        if e == len(old.nodes):
            break
        if e not in dropped:
            position[e] = len(nodes)
            pieces.append(e)
            node = old.nodes[e]
            nodes.append(node)
            names.append(old.names[e])
            ops.append(sys.intern(node.op) if e in changed else old.ops[e])  # an output turned alias has a new op
        for node in inserted.get(e, ()):
            fresh.append(len(nodes))
            pieces.append(node)
            nodes.append(node)
            names.append(node.name)
            ops.append(sys.intern(node.op))
        start = e + 1
    new.nodes, new.names, new.ops = nodes, names, ops
    return position, pieces, fresh


def _inputs(old: GraphIndex, new: GraphIndex, position: list[int],
            pieces: list[_Piece]) -> list[list[tuple[int, int]]]:
    """Inputs of the rewritten graph: the old ones renumbered, the changed and new nodes' read."""
    inputs: list[list[tuple[int, int]]] = []
    dangling: list[str] = []
    index, old_inputs = new.index, old.inputs
    for piece in pieces:
        if isinstance(piece, tuple):
            inputs += [[(position[p], port) for p, port in ins] for ins in old_inputs[piece[0]:piece[1]]]
        elif isinstance(piece, int):
            node = old.nodes[piece]
            inputs.append(parse_node_inputs(node.input, index, old.names[piece], dangling))
        else:
            inputs.append(parse_node_inputs(piece.input, index, piece.name, dangling))
    if dangling:
        raise GraphValidationError(f"inputs that name no node in the graph: {_summarise(dangling)}")
    return inputs


def _colocated(old: GraphIndex, new: GraphIndex, position: list[int], fresh: list[int]) -> list[int] | None:
    """The old index's colocated nodes still there (renumbered; a changed one kept its attributes,
    or became an alias without any), and the new nodes that are."""
    if old._colocated is None:
        return None
    kept = [position[i] for i in old._colocated if position[i] >= 0]
    kept += [i for i in fresh if COLOCATE in new.nodes[i].attr]
    return sorted(kept)


def _check_told(old: GraphIndex, new: GraphIndex, dropped: set[int], changed: set[int]) -> None:
    """What a rewrite told must describe the graph: as many nodes, and every reader of a dropped
    node dropped or changed (an unchanged one would read a node that is gone)."""
    if len(new.nodes) != len(old.graph_def.node):
        raise GraphValidationError(f"the rewrite left {len(old.graph_def.node)} nodes, not the {len(new.nodes)} it told")
    consumers = old.consumers
    stale = [f"{old.names[c]!r} reads {old.names[d]!r}" for d in dropped for c, _, _ in consumers[d]
             if c not in dropped and c not in changed]
    if stale:
        raise GraphValidationError(f"inputs that name no node in the graph: {_summarise(stale)}")
