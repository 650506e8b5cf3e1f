"""The nodes of a session's graph that fusion must leave exactly as they are.

A graph that still holds its variables also holds what initialises, checks,
saves and restores them: initializer subgraphs, ``Assign`` ops,
``IsVariableInitialized``, ``SaveV2``/``RestoreV2`` and the ``init`` and
``save/restore_all`` ops that group them.  ``tf_slim`` and ``tf.layers`` create
a layer's variables inside the layer's name scope, so a scope pass fusing the
layer would take its variables and their initialisers with it.

:func:`state_nodes` finds those nodes: the variables (and lookup tables)
themselves, and every node that only serves the ops that write, check, save or
restore them.  A node the model's computation needs (the read of a variable
that feeds a ``MatMul``) is not one of them.  :func:`move_out_of_scopes`
renames them out of every scope while the graph is fused, so that a scope pass
sees a layer reading its variables from outside, as in a frozen graph;
:func:`restore_names` gives them their names back afterwards.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..core.errors import ScopeFusionError
from ..core.graph.index import GraphIndex
from ..core.graph.vocabulary import NON_OUTPUT_SINKS, parse_input, tensor_name

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

#: Ops that hold state across runs: variables and lookup tables.
STATE_HOLDERS = frozenset({
    "VariableV2", "Variable", "VarHandleOp", "AutoReloadVariable", "_VarHandlesOp",
    "HashTable", "HashTableV2", "MutableHashTable", "MutableHashTableV2", "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2", "MutableDenseHashTable", "MutableDenseHashTableV2",
})
#: Ops that only look after state: they check, save or restore it.
_STATE_KEEPERS = frozenset({
    "IsVariableInitialized", "VarIsInitializedOp", "SaveV2", "Save", "SaveSlices", "RestoreV2",
    "Restore", "RestoreSlice", "MergeV2Checkpoints", "InitializeTable", "InitializeTableV2",
    "InitializeTableFromTextFile", "InitializeTableFromTextFileV2", "LookupTableImport",
    "LookupTableImportV2", "DestroyResourceOp",
})
#: Op name prefixes of the ops that write state (assignments, scatters, optimizer updates).
_STATE_WRITER_PREFIXES = ("Assign", "Scatter", "ResourceScatter", "Apply", "ResourceApply",
                          "SparseApply", "ResourceSparseApply")
#: The name prefix of nodes moved out of their scopes while the graph is fused.
MOVED_PREFIX = "scopefusion_state_"


def looks_after_state(op: str) -> bool:
    """True for an op that writes, checks, saves or restores state."""
    return op in _STATE_KEEPERS or op.startswith(_STATE_WRITER_PREFIXES)


def _closure(start: Iterable[int], edges: list[list[int]]) -> set[int]:
    seen = set(start)
    stack = list(seen)
    while stack:
        for j in edges[stack.pop()]:
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return seen


def state_nodes(index: GraphIndex) -> set[str]:
    """The names of the state holders and of every node that only serves the
    ops looking after them (feeding them, or running after them)."""
    parents = [[p for p, _ in ins if p >= 0] for ins in index.inputs]
    children: list[list[int]] = [[] for _ in parents]
    for child, ps in enumerate(parents):
        for p in ps:
            children[p].append(child)
    keepers = [i for i, op in enumerate(index.ops) if looks_after_state(op)]
    holders = {i for i, op in enumerate(index.ops) if op in STATE_HOLDERS}
    region = _closure(keepers, parents) | _closure(keepers, children)
    computation = [i for i in range(len(parents)) if i not in region]
    needed = _closure(computation, parents)
    return {index.names[i] for i in (region - needed) | holders}


def sink_outputs(index: GraphIndex, skip: Iterable[str] = ()) -> list[str]:
    """Output 0 of every node nobody reads (not constants, placeholders, no-ops,
    variables or asserts), as the fusion pipeline takes graph outputs by default."""
    skipped = set(skip)
    return [index.names[i] for i in index.sinks()
            if index.ops[i] not in NON_OUTPUT_SINKS and index.names[i] not in skipped]


def _rename(graph_def: "GraphDef", names: Mapping[str, str]) -> None:
    for node in graph_def.node:
        if node.name in names:
            node.name = names[node.name]
        for k, text in enumerate(node.input):
            name, port = parse_input(text)
            if name in names:
                node.input[k] = tensor_name(names[name], port)


def move_out_of_scopes(graph_def: "GraphDef", names: Iterable[str]) -> dict[str, str]:
    """Rename the nodes ``names`` (and every reference to them) to top-level
    names of their own; returns new name -> original name."""
    taken = {node.name for node in graph_def.node}
    prefix = MOVED_PREFIX
    while any(name.startswith(prefix) for name in taken):
        prefix += "x_"
    moved = {name: f"{prefix}{k}" for k, name in enumerate(sorted(names))}
    _rename(graph_def, moved)
    return {new: old for old, new in moved.items()}


def restore_names(graph_def: "GraphDef", originals: Mapping[str, str]) -> None:
    """Give moved nodes their names back (after fusion, which left them as
    they were); a name fusion has given to a new node meanwhile is an error."""
    present = {node.name for node in graph_def.node}
    clashes = sorted(set(originals.values()) & present)
    if clashes:
        raise ScopeFusionError(f"fusion created a node named {clashes[0]!r}, the name of a variable or "
                               "initialiser node it must keep")
    _rename(graph_def, originals)
