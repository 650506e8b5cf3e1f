"""Indexing a rewritten graph from the index of the graph before the rewrite.

A rewrite drops some nodes, changes the inputs (or op) of a few others and puts new nodes
after given ones; every other node is the same message with the same inputs.  Reading names,
ops and inputs out of protobuf again is most of what indexing costs, so here only the changed
and new nodes are read: the rest is taken from the old index, producers renumbered.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, AbstractSet, Mapping, Sequence

from ..errors import GraphValidationError
from .edge_lists import Inputs, parse_inputs, renumbered
from .index import COLOCATE, GraphIndex, _summarise, no_gc, renew_wrappers
from .layout import NodeLayout
from .node_set import member_test

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.node_def_pb2 import NodeDef


def reindex(old: GraphIndex, dropped: AbstractSet[int], changed: set[int],
            inserted: Mapping[int, Sequence["NodeDef"]], *, validate: bool = True,
            layout: NodeLayout | None = None, release_old: bool = False) -> GraphIndex:
    """The index of ``old.graph_def`` after a rewrite that dropped the nodes ``dropped``, changed the
    inputs or op of the nodes ``changed`` and placed ``inserted[i]`` (messages in the graph) right
    after node ``i`` (or where it stood, when it was dropped); the graph's node list must be in that
    order.  The result equals ``GraphIndex(old.graph_def)``; ``validate`` checks the same (duplicate
    names, inputs naming no node, cycles), reading only what changed.  ``layout``: the rewrite's
    own, when it has it (the same as worked out from ``dropped`` and ``inserted``).  ``release_old``:
    the caller is done with ``old``, whose tables built on use (consumers, order) go before the new
    index builds its own (``old`` builds them again if asked)."""
    new = GraphIndex.__new__(GraphIndex)
    new.graph_def = old.graph_def
    if layout is None:
        layout = layout_of(len(old.nodes), dropped, inserted)
    fresh_nodes = [node for nodes in inserted.values() for node in nodes]
    with no_gc():
        new.nodes = layout.gather(old.nodes, fresh_nodes)
        if validate:
            _check_count(old, new)  # before anything reads the graph's node list by position
        new.names = layout.gather(old.names, [node.name for node in fresh_nodes])
        new.ops = rewritten_ops(old, layout, fresh_nodes, changed)
        # the new positions 0, 1, ... as the layout's own int objects, which renumbered edges hold
        new.index = dict(zip(new.names, layout.gather(layout.position, layout.fresh), strict=True))
        if validate and len(new.index) != len(new.names):
            new._raise_duplicates()
        if validate:
            _check_told(old, dropped, changed)
        if release_old:  # before the new edge lists are made: the old consumers and order are no longer read
            old.release_tables()
        new.inputs = _inputs(old, new, layout, changed)
    new._by_op = None
    new._order = None
    new._colocated = _colocated(old, new, layout.position, layout.fresh)
    new.devices_used = old.devices_used  # the new nodes take the devices of nodes the rewrite removed
    if validate:
        new.topological_order()
    return new


def layout_of(count: int, dropped: AbstractSet[int], inserted: Mapping[int, Sequence["NodeDef"]]) -> NodeLayout:
    """The node order after a rewrite that dropped ``dropped`` and put ``inserted[i]`` after node ``i``."""
    return NodeLayout.of(count, dropped, {i: len(nodes) for i, nodes in inserted.items()})


def rewritten_ops(old: GraphIndex, layout: NodeLayout, fresh_nodes: Sequence["NodeDef"],
                  changed: AbstractSet[int]) -> list[str]:
    """Every node's op type after a rewrite: the old ones laid out, the new nodes' and the changed
    nodes' read (an output turned alias has a new op)."""
    ops = layout.gather(old.ops, [sys.intern(node.op) for node in fresh_nodes])
    for i in changed:
        ops[layout.position[i]] = sys.intern(old.nodes[i].op)
    return ops


def _inputs(old: GraphIndex, new: GraphIndex, layout: NodeLayout, changed: set[int]) -> Inputs:
    """Inputs of the rewritten graph: the old ones renumbered, the changed and new nodes' read."""
    placed = layout.gather(old.inputs, [()] * len(layout.fresh))  # the new nodes' are read below
    inputs = renumbered(placed, layout.position)
    dangling: list[str] = []
    read = sorted([*(layout.position[i] for i in changed), *layout.fresh])  # in graph order, as errors list them
    nodes, names = new.nodes, new.names
    parsed = parse_inputs([nodes[k] for k in read], [names[k] for k in read], new.index, dangling)
    for k, ins in zip(read, parsed, strict=True):
        inputs[k] = ins
    renew_wrappers(nodes, new.graph_def.node, [k for k, ins in zip(read, parsed, strict=True) if not ins])
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


def _check_count(old: GraphIndex, new: GraphIndex) -> None:
    """What a rewrite told must describe the graph: as many nodes."""
    if len(new.nodes) != len(old.graph_def.node):
        raise GraphValidationError(f"the rewrite left {len(old.graph_def.node)} nodes, "
                                   f"not the {len(new.nodes)} it told")


def _check_told(old: GraphIndex, dropped: AbstractSet[int], changed: set[int]) -> None:
    """What a rewrite told must describe the graph: every reader of a dropped node dropped or
    changed (an unchanged one would read a node that is gone)."""
    consumers, gone = old.consumers, member_test(dropped)
    stale = [f"{old.names[c]!r} reads {old.names[d]!r}" for d in dropped for c, _, _ in consumers[d]
             if not gone(c) and c not in changed]
    if stale:
        raise GraphValidationError(f"inputs that name no node in the graph: {_summarise(stale)}")
