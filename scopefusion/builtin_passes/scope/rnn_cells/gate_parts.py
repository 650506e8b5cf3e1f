"""A gate as an activated part of a split: the activation on either side of the split.

A cell computes its gates' pre-activations in one sum and cuts it into parts along the columns.
An elementwise op and that cut commute, ``act(split(z)[k]) == split(act(z))[k]``, and libraries
write both: TensorFlow's ``rnn_cell.GRUCell`` applies one Sigmoid to the r and u columns together
and splits the result, tflearn's ``GRUCell`` splits first and applies a Sigmoid to each part;
an LSTM may apply a Sigmoid to all four gates and use three of its parts.  The forms name a gate
with :func:`activated_part`, which matches either order, and :func:`part_of_split` reads a
tensor the same way when a gate order is read off the dataflow.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ....core.graph.pattern import Alt, const, one_of, op
from ....core.graph.vocabulary import CONTROL

if TYPE_CHECKING:  # pragma: no cover
    from ....core.graph.view import GraphView

Tensor = tuple[int, int]

#: the axis a cell splits its gates along: the columns
AXIS_1 = const(where=lambda v: v.size == 1 and int(v.reshape(-1)[0]) in (1, -1), description="axis 1")


def activated_part(act: str | Sequence[str], source: Any, port: int, num_split: int, *,
                   split_label: str | None = None, act_label: str | None = None) -> Alt:
    """``act(split(source)[port])`` or ``split(act(source))[port]`` (``source`` split ``num_split``
    ways along the columns).  ``split_label`` names the split of ``source`` itself (the first
    order), so the gates that share it share one node; ``act_label`` names the activation, in
    either order."""
    return one_of(
        op(act, op("Split", AXIS_1, source, port=port, num_split=num_split, label=split_label), label=act_label),
        op("Split", AXIS_1, op(act, source, label=act_label), port=port, num_split=num_split),
    )


def _data_inputs(view: "GraphView", node: int) -> list[Tensor]:
    return [t for t in view.index.inputs[node] if t[1] != CONTROL]


def _split_value(view: "GraphView", tensor: Tensor) -> Tensor | None:
    """What ``tensor`` is a part of, when it is an output of a Split (None: it is not)."""
    if view.index.ops[tensor[0]] != "Split":
        return None
    ins = _data_inputs(view, tensor[0])
    return ins[1] if len(ins) == 2 else None


def part_of_split(view: "GraphView", tensor: Tensor, acts: Sequence[str]) -> tuple[str, Tensor, int] | None:
    """``(activation, source, port)`` when ``tensor`` is one of ``acts`` applied to part ``port``
    of a split of ``source``, in either order (None: it is not); the gates of one cell have the
    same ``source`` whichever order each is written in."""
    index = view.index
    node, port = tensor
    if index.ops[node] in acts and port == 0:  # act(split(source)[k])
        ins = _data_inputs(view, node)
        if len(ins) != 1:
            return None
        source = _split_value(view, ins[0])
        return None if source is None else (index.ops[node], source, ins[0][1])
    activated = _split_value(view, tensor)  # split(act(source))[k]
    if activated is None or index.ops[activated[0]] not in acts or activated[1] != 0:
        return None
    ins = _data_inputs(view, activated[0])
    return (index.ops[activated[0]], ins[0], port) if len(ins) == 1 else None
