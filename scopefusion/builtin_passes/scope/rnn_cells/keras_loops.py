"""The step of a tf_keras ``LSTM`` / ``GRU`` layer that is not unrolled, in its loop's body.

In TensorFlow 2, tf_keras runs such a layer through ``lstm_with_backend_selection`` /
``gru_with_backend_selection``, whose CPU implementation (``standard_lstm`` / ``standard_gru``)
writes the step of the cell straight into the body of the layer's ``While``, with no cell
scope: the body's ``while`` scope holds the loop's plumbing and one step side by side::

    while/TensorArrayV2Read/TensorListGetItem      x_t, read from the input list at time
    while/MatMul, while/MatMul_1, while/add, ...   the step of Keras's LSTMCell (:mod:`.keras_lstm`)
    while/TensorArrayV2Write/TensorListSetItem     new_h, written to the output list at time
    while/add_2, while/add_3                       time + 1, counter + 1

The step is the one an unrolled Keras ``LSTM`` computes, fused the same way (``BasicLSTMCell``
with the weights put in its layout by an inner graph); the read and the write stay in the body
for the loop pass.  tf_keras takes this path only where cuDNN could run the layer: tanh, sigmoid,
a bias, no recurrent dropout, and for a GRU ``reset_after=True``: ``standard_gru``'s step is
``GRUCell(reset_after=True)`` (:mod:`.keras_gru_reset_after`), its bias's two rows unstacked
before the loop and passed in apart.  With a mask the body also keeps each sequence's state
through its masked steps, which no fused cell expresses: refused with that reason.  Other
options run the generic loop, whose body scopes the cell (``while/lstm_cell``,
``while/gru_cell``), matched by the cell passes' own scope names.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .discovery import scopes_holding
from .keras_gru_reset_after import KERAS_GRU_RESET_AFTER_PAIR_FORM
from .keras_lstm import KERAS_LSTM_FORM

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope, ScopeGraph

#: the body's read of the step's input and write of its output
LOOP_PLUMBING = frozenset({"TensorListGetItem", "TensorListSetItem"})


def _masked(scope: "Scope") -> str | None:
    """With a mask (a ``Masking`` layer, ``mask=``) the body selects, per sequence, the step's
    new state or the old one: what a masked step leaves alone, no fused cell expresses."""
    select = scope.nodes_by_op("SelectV2", direct=True) or scope.nodes_by_op("Select", direct=True)
    if select:
        return (f"the loop body keeps each sequence's state through its masked steps (a mask: {select[0].name!r} "
                f"selects the old state or the new), which the fused cell cannot express")
    return None


KERAS_LSTM_LOOP_FORM = replace(KERAS_LSTM_FORM, library="tf_keras LSTM loop body (standard_lstm)",
                               plumbing=LOOP_PLUMBING,
                               explain=lambda scope: _masked(scope) or KERAS_LSTM_FORM.explain(scope))
KERAS_GRU_LOOP_FORM = replace(KERAS_GRU_RESET_AFTER_PAIR_FORM, library="tf_keras GRU loop body (standard_gru)",
                              plumbing=LOOP_PLUMBING,
                              explain=lambda scope: _masked(scope) or KERAS_GRU_RESET_AFTER_PAIR_FORM.explain(scope))


def _direct(scope: "Scope", op_type: str) -> int:
    return len(scope.nodes_by_op(op_type, direct=True))


def loop_body_scopes(scope_graph: "ScopeGraph", *, has_sub: bool) -> list["Scope"]:
    """The scopes of a loop body holding a step's ops themselves, whatever their names (tf_keras
    calls them ``while``): a read of the input list and a write of the output list (in scopes of
    their own below it), a MatMul and a Split (and a Sub when ``has_sub``, a GRU's ``1 - z``; none
    for an LSTM) directly in the scope, not in a cell scope below it."""
    found = []
    for scope in scopes_holding(scope_graph, ("TensorListGetItem",)):  # a body reads its input list
        if scope.count("MatMul") == 0 or scope.count("TensorListGetItem") == 0 or scope.count("TensorListSetItem") == 0:
            continue
        if _direct(scope, "MatMul") > 0 and _direct(scope, "Split") > 0 and (_direct(scope, "Sub") > 0) == has_sub:
            found.append(scope)
    return found
