"""LSTM options beyond ``BasicLSTMCell``, seen in what the scope computes rather than in names.

A library may name its peephole weights anything (``w_f_diag``, ``peephole_f``, ``a/b_3``) or
nothing: what gives the option away is the dataflow.

* a peephole: a gate's pre-activation adds the cell state times a weight vector
  (``Sigmoid(... + c * w_diag)``);
* a projection: the step's output ``sigmoid(o) * act(c')`` is multiplied by a matrix;
* clipping: the state or the output goes through ``ClipByValue`` (or ``Minimum`` / ``Maximum``
  with a constant).

Each check reads the scope's own nodes once, by op type.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ....core.graph.vocabulary import ADD_OPS as _ADD, CONTROL
from .gate_parts import part_of_split
from .ops import ACTIVATION_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope



def _readers(scope: "Scope", node: int) -> list[int]:
    index = scope.graph.index
    return [c for c, port, _ in index.consumers[node] if port != CONTROL]


def _is_weight_vector(scope: "Scope", tensor: tuple[int, int]) -> bool:
    shape = scope.graph.static_shape(tensor, infer=False)
    return shape is not None and len(shape) == 1


def _peephole(scope: "Scope") -> str | None:
    """A Mul of a weight vector whose product is added to what a Sigmoid reads."""
    index = scope.graph.index
    for i in scope.all_node_indices():
        if index.ops[i] != "Mul":
            continue
        ins = [t for t in index.inputs[i] if t[1] != CONTROL]
        if len(ins) != 2 or not any(_is_weight_vector(scope, t) for t in ins):
            continue
        if any(index.ops[a] in _ADD and any(index.ops[s] == "Sigmoid" for s in _readers(scope, a))
               for a in _readers(scope, i)):
            return index.names[i]
    return None


def _feeds_gates(scope: "Scope", node: int) -> bool:
    """``node``'s product is summed into gates, which are split apart or activated (a recurrent
    product of the next step, which reads the previous output too; tf_keras ``implementation=1``
    has one per gate), within a few adds."""
    index = scope.graph.index
    current = [node]
    for _ in range(4):
        current = [r for n in current for r in _readers(scope, n)]
        if any(index.ops[r] == "Split" or index.ops[r] in ACTIVATION_NAMES for r in current):
            return True
        current = [r for r in current if index.ops[r] in (*_ADD, "BiasAdd")]
    return False


def _projection(scope: "Scope") -> str | None:
    """A MatMul reading ``sigmoid(o) * act(c')``, the step's output, that is no gate's product
    (the next step's recurrent product reads the output too)."""
    index = scope.graph.index
    for i in scope.all_node_indices():
        if index.ops[i] != "MatMul" or _feeds_gates(scope, i):
            continue
        first = index.inputs[i][0][0]
        if index.ops[first] != "Mul":
            continue
        acts = [_activation(scope, t) for t in index.inputs[first] if t[1] != CONTROL]
        if len(acts) == 2 and "Sigmoid" in acts and None not in acts:
            return index.names[i]
    return None


def _activation(scope: "Scope", tensor: tuple[int, int]) -> str | None:
    """The activation ``tensor`` is the output of: its own op, or the one applied before a split
    it is a part of (:mod:`.gate_parts`); None: no activation."""
    op_type = scope.graph.index.ops[tensor[0]]
    if op_type in ACTIVATION_NAMES:
        return op_type
    part = part_of_split(scope.graph, tensor, tuple(ACTIVATION_NAMES))
    return None if part is None else part[0]


def _clip(scope: "Scope") -> str | None:
    """``ClipByValue``, or the ``Minimum`` and ``Maximum`` ``clip_by_value`` is written as."""
    clips = scope.nodes_by_op("ClipByValue") or (scope.nodes_by_op("Minimum") and scope.nodes_by_op("Maximum"))
    return clips[0].name if clips else None


def explain_by_dataflow(scope: "Scope", carried: tuple[str, ...] = ()) -> str | None:
    """Why the scope's LSTM is beyond the form reading it, from what it computes (None: nothing
    seen); ``carried`` names the options the form reads (``peephole``, ``projection``, ``clip``)."""
    for find, what in ((_peephole, "has peephole connections (a gate reads the cell state through a weight "
                                   "vector)"),
                       (_projection, "projects its output (the step's output is multiplied by a matrix)"),
                       (_clip, "clips its state or output")):
        if find.__name__.strip("_") in carried:
            continue
        node = find(scope)
        if node is not None:
            return f"the cell {what}, and no form of BasicLSTMCell with options reads it (e.g. {node!r})"
    return None


def option_scopes(scopes: "list[Scope]") -> "list[Scope]":
    """Of ``scopes``, those splitting gates four ways (a ``Split`` in 4) whose LSTM has an option
    :func:`explain_by_dataflow` names: a cell the fused op cannot express, to refuse with that
    reason whatever its scope is named."""
    found = []
    for scope in scopes:
        splits = scope.nodes_by_op("Split", direct=True)
        if any(n.attr["num_split"].i == 4 for n in splits) and explain_by_dataflow(scope) is not None:
            found.append(scope)
    return found
