"""The fused result of one loop: its inputs, and an inner graph of one op per layer.

Fused input 0 is the loop's input sequence, then the loop's inputs the layers read (the arguments
their weights come from, then their initial states, then the sequence lengths of a loop with a
``sequence_length``, which every layer reads as its optional ``seq_length``), each once.  A layer
whose cell has optional weights (``GRUCell(reset_after=True)``'s ``candidate_recurrent_bias``)
gives its op the same optional inputs, before ``seq_length``.  The weight preparation of the
body (:mod:`.body`) is copied into the inner graph, so it runs once instead of once per step.
Fused output 0 is the top layer's ``y`` (its last row ``y[-1:]`` when the loop keeps its last output
alone), then each layer's final state (h, c / h) bottom up.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....core.functions.layout import OutputLayouts
from ....core.fusion.fused_ops import OPTIONAL_INPUTS_ATTR
from ..rnn_cells.keras_lstm import DT_INT32, int32_const
from .body import LoopBody

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.results import FusionScopesResult

Tensor = tuple[int, int]
#: fused cell -> the whole-loop op of its layers
LOOP_OPS = {"BasicLSTMCell": "DynamicRNN", "GRUCell": "DynamicGRUV2"}


def fused_inputs(body: LoopBody, ins: list[Tensor], x: Tensor) -> list[Tensor]:
    """The fused op's input tensors in order, each once."""
    args = {name: k for k, name in enumerate(body.args)}
    positions = [args[t] for node in body.preparation for t in body.preparation_inputs[node.name] if t in args]
    positions += [args[t] for layer in body.layers for node in layer.layout for t in node.inputs if t in args]
    positions += [args[w] for layer in body.layers for w in layer.all_weights if w in args]
    positions += [p for layer in body.layers for p in layer.state]
    positions += [body.copy.lengths] if body.copy is not None else []
    tensors = [x]
    for p in positions:
        if ins[p] not in tensors:
            tensors.append(ins[p])
    return tensors


class _Inner:
    """Names of the inner graph: a body tensor (argument or preparation output) -> an inner input."""

    def __init__(self, result: "FusionScopesResult", body: LoopBody, ins: list[Tensor], tensors: list[Tensor]):
        self.result, self.ins, self.tensors = result, ins, tensors
        self.args = {name: k for k, name in enumerate(body.args)}
        self.names = {node.name: f"prepare_{k}" for k, node in enumerate(body.preparation)}
        layouts = OutputLayouts({}, {})
        self.ports = {node.name: {slot: port for port, slot in enumerate(layouts.layout(node))}
                      for node in body.preparation}
        self.layout = {node.name for layer in body.layers for node in layer.layout}

    def tensor(self, ref: str) -> Any:
        if ref in self.args:
            return self.result.fused_input(self.tensors.index(self.ins[self.args[ref]]))
        if ref.partition(":")[0] in self.layout:
            return ref
        node, arg, index = ref.split(":")
        port = self.ports[node][(arg, int(index))]
        return f"{self.names[node]}:{port}" if port else self.names[node]


def write_inner_graph(result: "FusionScopesResult", body: LoopBody, ins: list[Tensor], tensors: list[Tensor],
                      ports: list[int | None], rows: int | None = None) -> None:
    """The preparation (and each layer's weight layout), one op per layer (the first reading
    ``x[:rows]`` when ``rows`` is set), the fused outputs; ``ports[p]`` (the loop's output port
    ``p``) becomes the fused output it is."""
    inner = _Inner(result, body, ins, tensors)
    for node in body.preparation:
        inputs = [inner.tensor(t) for t in body.preparation_inputs[node.name]]
        result.add_inner_node(inner.names[node.name], node.op, inputs, dict(node.attr))
    for layer in body.layers:
        for each in layer.layout:
            result.add_inner_node(each.name, each.op, [inner.tensor(t) for t in each.inputs], each.attrs)
    below: Any = result.fused_input(0)
    if rows is not None:
        below = _rows(result, "first", below, (0, rows), body.layers[0].attrs["T"])
    k = 1
    for n, layer in enumerate(body.layers):
        name = f"layer_{n}"
        weights = [inner.tensor(w) for w in layer.weights]
        states = [result.fused_input(tensors.index(ins[p])) for p in layer.state]
        optional = {key: inner.tensor(w) for key, w in layer.optional.items()}
        if body.copy is not None:
            optional["seq_length"] = result.fused_input(tensors.index(ins[body.copy.lengths]))
        attrs = {**layer.attrs, "time_major": True}
        if optional:
            attrs[OPTIONAL_INPUTS_ATTR] = list(optional)
        result.add_inner_node(name, LOOP_OPS[layer.op], [below, *weights, *states, *optional.values()], attrs)
        for j, p in enumerate(layer.state):
            ports[p] = k
            result.set_inner_output(k, f"{name}:{j + 1}")
            k += 1
        below = f"{name}:0"
    if body.last_only:
        below = _rows(result, "last", below, (-1, 0), body.layers[-1].attrs["T"])
    result.set_inner_output(0, below)


def _rows(result: "FusionScopesResult", name: str, tensor: Any, span: tuple[int, int], T: int) -> str:
    """``tensor[begin:end]`` along its first axis (end 0: to the end), as inner node ``name``: a
    loop's first ``rows`` of x, or ``y[-1:]``, the one-element list a loop keeping its last output
    alone stacks into."""
    begin, end = span
    for suffix, value in (("begin", [begin]), ("end", [end]), ("strides", [1])):
        result.add_inner_node(f"{name}_{suffix}", "Const", [], int32_const(value))
    result.add_inner_node(name, "StridedSlice", [tensor, f"{name}_begin", f"{name}_end", f"{name}_strides"],
                          {"T": T, "Index": DT_INT32, "begin_mask": 0, "end_mask": int(end == 0), "ellipsis_mask": 0,
                           "new_axis_mask": 0, "shrink_axis_mask": 0})
    return f"{name}:0"

