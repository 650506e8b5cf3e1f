"""The order of an LSTM's four gates in its split, read off the dataflow.

An LSTM splits its gates' sum four ways; which quarter is the input gate i, the forget gate f,
the candidate g and the output gate o is a library's convention (Keras and Sonnet: i, f, g, o;
TensorFlow's rnn_cell: i, j, f, o; ONNX: i, o, f, c).  The step itself says which is which:

    h' = sigmoid(o) * act(c')
    c' = sigmoid(f) * c + sigmoid(i) * act(g)

:func:`lstm_gate_orders` reads the split's ports at a candidate output node: o is the port the
output's Sigmoid reads, f the one whose Sigmoid multiplies a tensor from outside the split (the
old state), i and g the two multiplied together (g under the activation; both orders when the
activation is itself a sigmoid), each gate activated before or after the split alike
(:mod:`.gate_parts`).  A form is then matched with those ports; the order is
``(i, f, g, o)`` as ports of the split.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ....core.graph.vocabulary import ADD_OPS as _ADD, CONTROL
from .gate_parts import part_of_split
from .ops import ACTIVATION_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from ....core.graph.view import GraphView

Order = tuple[int, int, int, int]
#: the order Keras writes (and Sonnet): i, f, g, o
KERAS_ORDER: Order = (0, 1, 2, 3)
#: a gate as :func:`.gate_parts.part_of_split` reads it: (activation, split source, port)
Part = tuple[str, tuple[int, int], int]


def _ins(view: "GraphView", node: int) -> list[tuple[int, int]]:
    return [t for t in view.index.inputs[node] if t[1] != CONTROL]


def lstm_gate_orders(view: "GraphView", root: int) -> list[Order]:
    """The gate orders ``(i, f, g, o)`` the step whose output is ``root`` reveals (empty: the node
    is not such an output)."""
    index = view.index
    activations = tuple(ACTIVATION_NAMES)
    ins = _ins(view, root)
    if index.ops[root] != "Mul" or len(ins) != 2:
        return []
    for a, b in (ins, ins[::-1]):
        o = part_of_split(view, a, ("Sigmoid",))
        if o is None or index.ops[b[0]] not in activations or len(_ins(view, b[0])) != 1:
            continue
        c_out = _ins(view, b[0])[0]
        if index.ops[c_out[0]] not in _ADD:
            continue
        orders = _cell_ports(view, c_out[0], o)
        if orders:
            return orders
    return []


def _cell_ports(view: "GraphView", add: int, o: Part) -> list[Order]:
    """The orders c' = sigmoid(f) * c + sigmoid(i) * act(g) gives with the output gate ``o``
    (each gate a part of the same split as ``o``, activated before or after it)."""
    index = view.index
    f: int | None = None
    pairs: list[tuple[int, int]] = []
    for term in _ins(view, add):
        if index.ops[term[0]] != "Mul" or len(_ins(view, term[0])) != 2:
            return []
        x, y = _ins(view, term[0])
        parts = [part_of_split(view, t, tuple(ACTIVATION_NAMES)) for t in (x, y)]
        if any(p is not None and p[1] != o[1] for p in parts):
            return []
        first, second = parts
        if first is not None and second is not None:
            both = (first, second)
            sig = [k for k, p in enumerate(both) if p[0] == "Sigmoid"]
            pairs += [(both[k][2], both[1 - k][2]) for k in sig]  # (i, g)
        elif first is not None or second is not None:
            part = first if first is not None else second
            assert part is not None
            if part[0] != "Sigmoid":
                return []
            f = part[2]
    orders = [(i, f, g, o[2]) for i, g in pairs if f is not None]
    return [order for order in orders if len(set(order)) == 4]
