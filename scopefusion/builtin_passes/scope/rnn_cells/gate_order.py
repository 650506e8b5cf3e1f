"""The order of an LSTM's four gates in its split, read off the dataflow.

An LSTM splits its gates' sum four ways; which quarter is the input gate i, the forget gate f,
the candidate g and the output gate o is a library's convention (Keras and Sonnet: i, f, g, o;
TensorFlow's rnn_cell: i, j, f, o; ONNX: i, o, f, c).  The step itself says which is which:

    h' = sigmoid(o) * act(c')
    c' = sigmoid(f) * c + sigmoid(i) * act(g)

:func:`lstm_gate_orders` reads the split's ports at a candidate output node: o is the port the
output's Sigmoid reads, f the one whose Sigmoid multiplies a tensor from outside the split (the
old state), i and g the two multiplied together (g under the activation; both orders when the
activation is itself a sigmoid).  A form is then matched with those ports; the order is
``(i, f, g, o)`` as ports of the split.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ....core.graph.vocabulary import ADD_OPS as _ADD, CONTROL
from .ops import ACTIVATION_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from ....core.graph.view import GraphView

Order = tuple[int, int, int, int]
#: the order Keras writes (and Sonnet): i, f, g, o
KERAS_ORDER: Order = (0, 1, 2, 3)


def _ins(view: "GraphView", node: int) -> list[tuple[int, int]]:
    return [t for t in view.index.inputs[node] if t[1] != CONTROL]


def _split_port(view: "GraphView", tensor: tuple[int, int], ops: tuple[str, ...]) -> tuple[int, int] | None:
    """(split, port) when ``tensor`` is one of ``ops`` applied to a port of a 4-way Split."""
    index = view.index
    if tensor[1] != 0 or index.ops[tensor[0]] not in ops:
        return None
    ins = _ins(view, tensor[0])
    if len(ins) != 1 or index.ops[ins[0][0]] != "Split":
        return None
    return ins[0]


def lstm_gate_orders(view: "GraphView", root: int) -> list[Order]:
    """The gate orders ``(i, f, g, o)`` the step whose output is ``root`` reveals (empty: the node
    is not such an output)."""
    index = view.index
    activations = tuple(ACTIVATION_NAMES)
    ins = _ins(view, root)
    if index.ops[root] != "Mul" or len(ins) != 2:
        return []
    for a, b in (ins, ins[::-1]):
        o = _split_port(view, a, ("Sigmoid",))
        if o is None or index.ops[b[0]] not in activations or len(_ins(view, b[0])) != 1:
            continue
        c_out = _ins(view, b[0])[0]
        if index.ops[c_out[0]] not in _ADD:
            continue
        orders = _cell_ports(view, c_out[0], o)
        if orders:
            return orders
    return []


def _cell_ports(view: "GraphView", add: int, o: tuple[int, int]) -> list[Order]:
    """The orders c' = sigmoid(f) * c + sigmoid(i) * act(g) gives with the output gate ``o``."""
    index = view.index
    f: int | None = None
    pairs: list[tuple[int, int]] = []
    for term in _ins(view, add):
        if index.ops[term[0]] != "Mul" or len(_ins(view, term[0])) != 2:
            return []
        x, y = _ins(view, term[0])
        ports = [_split_port(view, t, tuple(ACTIVATION_NAMES)) for t in (x, y)]
        if any(p is not None and p[0] != o[0] for p in ports):
            return []
        first, second = ports
        if first is not None and second is not None:
            both = (first, second)
            sig = [k for k, t in enumerate((x, y)) if index.ops[t[0]] == "Sigmoid"]
            pairs += [(both[k][1], both[1 - k][1]) for k in sig]  # (i, g)
        elif first is not None or second is not None:
            port = first if first is not None else second
            assert port is not None
            gate = x if ports[0] is not None else y
            if index.ops[gate[0]] != "Sigmoid":
                return []
            f = port[1]
    orders = [(i, f, g, o[1]) for i, g in pairs if f is not None]
    return [order for order in orders if len(set(order)) == 4]
