"""Reading a loop's body and condition functions: the loop of ``dynamic_rnn`` under control
flow v2 once fusion inside the library has fused its step.

The body of such a loop holds nothing but its plumbing and a chain of fused cells::

    x_t  = TensorListGetItem(inputs, time)          the step's input, read from the input list
    h, c = BasicLSTMCell(x_t, h, c, w, b)            one cell per layer (GRUCell: h only), each
    ...                                              layer's input the layer below's output
    out  = TensorListSetItem(outputs, time, h)       the top layer's output, written at time
    time + 1, counter + 1

and returns each state the cell computed in its argument's place, every other argument (the
weights, the input list, the bounds) unchanged.  The condition is ``counter < n and time < m``.
Anything else in the body (a ``sequence_length`` copy-through, a projection, an unfused step)
is a reason to leave the loop alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.function_pb2 import FunctionDef

#: fused cell op -> (its state inputs by position, its weight inputs by position, its outputs)
CELLS: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...]]] = {
    "BasicLSTMCell": ((1, 2), (3, 4), ("h", "c")),
    "GRUCell": ((1,), (2, 3, 4, 5), ("h",)),
}
_PLUMBING = frozenset({"TensorListGetItem", "TensorListSetItem", "AddV2", "Add", "Const"})


class LoopRefused(Exception):
    """The loop is not a recurrence this pass fuses; the message says why."""


@dataclass
class LoopLayer:
    """One fused cell of the body: its op, attributes, and the loop arguments it uses."""

    op: str
    attrs: dict[str, Any]
    weights: list[int]
    #: the loop arguments holding its state (h, c / h), each returned as the cell's new state
    state: list[int]


@dataclass
class LoopBody:
    """Positions of the loop's arguments by role, and its layers bottom up."""

    counter: int
    time: int
    inputs: int
    outputs: int
    layers: list[LoopLayer] = field(default_factory=list)


def _arg_of(ref: str, args: dict[str, int]) -> int | None:
    return args.get(ref) if ":" not in ref else None


def _const_one(node: Any) -> bool:
    from tensorflow.python.framework import tensor_util

    if node is None or node.op != "Const" or "value" not in node.attr:
        return False
    value = tensor_util.MakeNdarray(node.attr["value"].tensor)
    return value.size == 1 and value.reshape(-1)[0] == 1


def _check_ops(function: "FunctionDef") -> None:
    extra = [f"{n.name!r} ({n.op})" for n in function.node_def if n.op not in _PLUMBING and n.op not in CELLS]
    if extra:
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        raise LoopRefused(f"the loop body does more than fused cells and the loop's plumbing: {', '.join(extra[:3])}"
                          f"{more} (a sequence_length, a cell option or a step that did not fuse)")
    if not any(n.op in CELLS for n in function.node_def):
        raise LoopRefused("the loop body holds no fused cell (BasicLSTMCell, GRUCell)")


def _one(function: "FunctionDef", op: str) -> Any:
    found = [n for n in function.node_def if n.op == op]
    if len(found) != 1:
        raise LoopRefused(f"the loop body holds {len(found)} {op} nodes, not one")
    return found[0]


def _increment(function: "FunctionDef", ref: str, args: dict[str, int]) -> int | None:
    """The argument ``ref`` (an ``Add`` output) adds 1 to, or None."""
    name, _, _ = ref.partition(":")
    nodes = {n.name: n for n in function.node_def}
    node = nodes.get(name)
    if node is None or node.op not in ("Add", "AddV2") or len(node.input) != 2:
        return None
    a, b = node.input
    if _arg_of(a, args) is not None and _const_one(nodes.get(b.partition(":")[0])):
        return _arg_of(a, args)
    return None


def _layers(function: "FunctionDef", args: dict[str, int], rets: list[str], start: str) -> tuple[list[LoopLayer], str]:
    """The chain of cells from the step's input ``start``; also the top layer's output."""
    cells = [n for n in function.node_def if n.op in CELLS]
    layers, current = [], start
    while cells:
        cell = next((n for n in cells if n.input and n.input[0] == current), None)
        if cell is None:
            raise LoopRefused(f"the fused cells are no chain from the step's input (e.g. {cells[0].name!r})")
        cells.remove(cell)
        states, weights, outs = CELLS[cell.op]
        used = [_arg_of(cell.input[k], args) if k < len(cell.input) else None for k in states + weights]
        if any(p is None for p in used):
            raise LoopRefused(f"cell {cell.name!r} reads its state or weights from inside the body, not the loop's")
        state = used[:len(states)]
        for position, out in zip(state, outs):
            if rets[position] != f"{cell.name}:{out}:0":
                raise LoopRefused(f"the loop does not carry cell {cell.name!r}'s new {out} into its next step")
        for position in used[len(states):]:
            if rets[position] != function.signature.input_arg[position].name:
                raise LoopRefused(f"cell {cell.name!r}'s weight changes from step to step")
        attrs = {"activation": cell.attr["activation"].s.decode(), "T": cell.attr["T"].type}
        if cell.op == "BasicLSTMCell":
            attrs["forget_bias"] = cell.attr["forget_bias"].f
        layers.append(LoopLayer(cell.op, attrs, used[len(states):], state))
        current = f"{cell.name}:h:0"
    return layers, current


def read_body(function: "FunctionDef") -> LoopBody:
    """The roles of the loop's arguments and its layers; raises :class:`LoopRefused`."""
    signature = function.signature
    names = [a.name for a in signature.input_arg]
    args = {name: k for k, name in enumerate(names)}
    if len(signature.output_arg) != len(names):
        raise LoopRefused("the loop body returns other values than it takes")
    rets = [function.ret.get(a.name, "") for a in signature.output_arg]
    _check_ops(function)
    get, put = _one(function, "TensorListGetItem"), _one(function, "TensorListSetItem")
    inputs, time = _arg_of(get.input[0], args), _arg_of(get.input[1], args)
    outputs = _arg_of(put.input[0], args)
    if inputs is None or time is None or outputs is None or _arg_of(put.input[1], args) != time:
        raise LoopRefused("the step does not read its input list and write its output list at the loop's time")
    if _increment(function, rets[time], args) != time:
        raise LoopRefused("the loop's time does not advance by one per step")
    counters = [k for k in range(len(names)) if k != time and _increment(function, rets[k], args) == k]
    if len(counters) != 1:
        raise LoopRefused("the loop has no counter advancing by one per step")
    layers, top = _layers(function, args, rets, f"{get.name}:item:0")
    if put.input[2] != top or rets[outputs] != f"{put.name}:output_handle:0":
        raise LoopRefused("the loop does not write the top layer's output to its output list at each step")
    body = LoopBody(counters[0], time, inputs, outputs, layers)
    _check_invariants(names, rets, body)
    return body


def _check_invariants(names: list[str], rets: list[str], body: LoopBody) -> None:
    changing = {body.counter, body.time, body.outputs} | {p for layer in body.layers for p in layer.state}
    for k, name in enumerate(names):
        if k not in changing and rets[k] != name:
            raise LoopRefused(f"the loop changes its argument {name!r} from step to step besides the cells' state")


def read_bounds(cond: "FunctionDef", body: LoopBody) -> tuple[int, int]:
    """The arguments ``counter < n and time < m`` compare with: (n, m); raises :class:`LoopRefused`."""
    args = {a.name: k for k, a in enumerate(cond.signature.input_arg)}
    bounds: dict[int, int] = {}
    for node in cond.node_def:
        if node.op == "Less" and len(node.input) == 2:
            a, b = (_arg_of(t, args) for t in node.input)
            if a in (body.counter, body.time) and b is not None:
                bounds[a] = b
                continue
        if node.op not in ("LogicalAnd", "Less", "Identity"):
            raise LoopRefused(f"the loop's condition does more than compare its counter and time: {node.name!r}")
    ands = [n for n in cond.node_def if n.op == "LogicalAnd"]
    rets = list(cond.ret.values())
    if set(bounds) != {body.counter, body.time} or len(ands) != 1 or rets != [f"{ands[0].name}:z:0"]:
        raise LoopRefused("the loop's condition is not counter < n and time < m")
    return bounds[body.counter], bounds[body.time]
