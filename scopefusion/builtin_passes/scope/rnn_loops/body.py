"""Reading a loop's body and condition functions: the loop of ``dynamic_rnn`` under control
flow v2 once fusion inside the library has fused its step.

The body of such a loop holds nothing but its plumbing and a chain of fused cells::

    x_t  = TensorListGetItem(inputs, time)          the step's input, read from the input list
    h, c = BasicLSTMCell(x_t, h, c, w, b)            one cell per layer (GRUCell: h only), each
    ...                                              layer's input the layer below's output
    out  = TensorListSetItem(outputs, time, h)       the top layer's output, written at time (at 0
                                                     when the layer keeps its last output alone)
    time + 1, counter + 1

and returns each state the cell computed in its argument's place, every other argument (the
weights, the input list, the bounds) unchanged.  With ``sequence_length`` the state returned and
the output written go through ``Select(time >= lengths, ...)`` (:mod:`.copy_through`).
``Identity`` nodes are looked through; nodes computing only from unchanged arguments and
constants (a Keras cell's weights put in the fused cell's layout each step) are the loop's
*weight preparation*, which the fused op runs once.
The condition is ``counter < n and time < m`` (each bound an argument or a constant).
Anything else in the body (a projection, an unfused step, a ``Select`` doing something else)
is a reason to leave the loop alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ....core.fusion.fused_ops import listed_optional_inputs
from ....core.fusion.refusal import fail
from ....core.graph.tf_ops import tensorflow_op_def
from .copy_through import COPY_OPS, CopyThrough, one_compare, select_nodes
from ....core.graph.vocabulary import ADD_OPS

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.function_pb2 import FunctionDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

#: fused cell op -> (its state inputs by position, its weight inputs by position, its outputs)
CELLS: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...]]] = {
    "BasicLSTMCell": ((1, 2), (3, 4), ("h", "c")),
    "GRUCell": ((1,), (2, 3, 4, 5), ("h",)),
}
#: fused cell op -> its optional inputs, all weights (LSTMCell's peepholes and projection,
#: GRUCell(reset_after=True)'s recurrent bias),
#: found after its required inputs when the node's ``optional_inputs`` lists them; the whole-loop
#: op takes each under the same name
OPTIONAL_WEIGHTS: dict[str, tuple[str, ...]] = {"BasicLSTMCell": ("w_i_diag", "w_f_diag", "w_o_diag", "proj"),
                                                "GRUCell": ("candidate_recurrent_bias",)}
#: fused cell op -> its attributes the whole-loop op carries over, with their value when unset
CELL_ATTRS: dict[str, dict[str, Any]] = {
    "BasicLSTMCell": {"forget_bias": 1.0, "cell_clip": 0.0, "proj_clip": 0.0},
    "GRUCell": {"reset_after": False},
}
_PLUMBING = frozenset({"TensorListGetItem", "TensorListSetItem", "AddV2", "Add", "Const", "Identity", "NoOp"})
_NOT_PREPARATION = frozenset({"TensorListGetItem", "TensorListSetItem", "Identity", "NoOp"}) | frozenset(CELLS)


@dataclass
class LayoutNode:
    """A node of a layer's weight layout (a TF1 loop's Keras cell: its kernels put in the fused
    cell's layout), written into the fused result's inner graph: inputs are the loop op's inputs
    by name (``weight_k``) or other layout nodes' outputs."""

    name: str
    op: str
    inputs: list[str]
    attrs: dict[str, Any]


@dataclass
class LoopLayer:
    """One fused cell of the body: its op, attributes, and what it reads."""

    op: str
    attrs: dict[str, Any]
    #: its weights: an unchanged argument's name, or an output (``node:arg:index``) of the preparation
    weights: list[str]
    #: the loop arguments holding its state (h, c / h), each returned as the cell's new state
    state: list[int]
    #: the optional weight inputs the cell has (name -> an argument's name or a preparation output)
    optional: dict[str, str] = field(default_factory=dict)
    #: the nodes putting its weights in the fused cell's layout (its weights then name their outputs)
    layout: list[LayoutNode] = field(default_factory=list)

    @property
    def all_weights(self) -> list[str]:
        """Its required weights, then its optional ones."""
        return self.weights + list(self.optional.values())


@dataclass
class LoopBody:
    """Positions of the loop's arguments by role, its layers bottom up and its weight preparation."""

    counter: int
    time: int
    inputs: int
    outputs: int
    args: list[str]
    layers: list[LoopLayer] = field(default_factory=list)
    #: the nodes preparing the weights, in an order that runs (inputs first)
    preparation: list["NodeDef"] = field(default_factory=list)
    #: their data inputs, Identity nodes looked through
    preparation_inputs: dict[str, list[str]] = field(default_factory=dict)
    #: dynamic_rnn's sequence_length copy-through, when the loop has one
    copy: CopyThrough[Any] | None = None
    #: each step writes its output at index 0 of a one-element list, not at ``time`` (a Keras layer
    #: with ``return_sequences=False``): after the loop the list holds the last step's output alone
    last_only: bool = False


class _Reader:
    """Names in one function: arguments by position, nodes by name, Identity nodes looked through."""

    def __init__(self, function: "FunctionDef") -> None:
        self.function = function
        self.names = [a.name for a in function.signature.input_arg]
        self.args = {name: k for k, name in enumerate(self.names)}
        self.nodes = {n.name: n for n in function.node_def}

    def resolve(self, ref: str) -> str:
        node = self.nodes.get(ref.partition(":")[0]) if ":" in ref else None
        while node is not None and node.op == "Identity" and node.input:
            ref = node.input[0]
            node = self.nodes.get(ref.partition(":")[0]) if ":" in ref else None
        return ref

    def arg(self, ref: str) -> int | None:
        ref = self.resolve(ref)
        return self.args.get(ref) if ":" not in ref else None

    def node(self, ref: str) -> "NodeDef | None":
        ref = self.resolve(ref)
        return self.nodes.get(ref.partition(":")[0]) if ":" in ref else None

    def data(self, node: "NodeDef") -> list[str]:
        return [self.resolve(t) for t in node.input if not t.startswith("^")]


def _const_is(node: Any, number: int) -> bool:
    from tensorflow.python.framework import tensor_util  # deferred: TensorFlow costs seconds to import

    if node is None or node.op != "Const" or "value" not in node.attr:
        return False
    value = tensor_util.MakeNdarray(node.attr["value"].tensor)
    return value.size == 1 and value.reshape(-1)[0] == number


def _preparation(reader: _Reader, invariant: set[int]) -> dict[str, "NodeDef"]:
    """The stateless nodes computing from unchanged arguments and constants only, inputs first."""
    found: dict[str, "NodeDef"] = {}
    changed = True
    while changed:
        changed = False
        for node in reader.function.node_def:
            if node.name in found or node.op in _NOT_PREPARATION:
                continue
            op_def = tensorflow_op_def(node.op)
            if op_def is None or op_def.is_stateful:
                continue
            if all(reader.args.get(t) in invariant if ":" not in t else t.partition(":")[0] in found
                   for t in reader.data(node)):
                found[node.name] = node
                changed = True
    return found


def _check_ops(function: "FunctionDef", preparation: dict[str, "NodeDef"]) -> None:
    """Only cells, plumbing, preparation and (read strictly later) a copy-through's ops."""
    extra = [f"{n.name!r} ({n.op})" for n in function.node_def
             if n.op not in _PLUMBING and n.op not in CELLS and n.op not in COPY_OPS and n.name not in preparation]
    if extra:
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        fail(f"the loop body does more than fused cells and the loop's plumbing: {', '.join(extra[:3])}"
             f"{more} (a cell option or a step that did not fuse)")
    if not any(n.op in CELLS for n in function.node_def):
        fail("the loop body holds no fused cell (BasicLSTMCell, GRUCell)")


def _one(function: "FunctionDef", op: str) -> Any:
    found = [n for n in function.node_def if n.op == op]
    if len(found) != 1:
        fail(f"the loop body holds {len(found)} {op} nodes, not one")
    return found[0]


def _increment(reader: _Reader, ref: str) -> int | None:
    """The argument ``ref`` (an ``Add`` output) adds 1 to, or None."""
    node = reader.node(ref)
    if node is None or node.op not in ADD_OPS:
        return None
    data = reader.data(node)
    if len(data) == 2 and reader.arg(data[0]) is not None and _const_is(reader.node(data[1]), 1):
        return reader.arg(data[0])
    return None


def _copy_through(reader: _Reader, time: int, invariant: set[int]) -> CopyThrough[str] | None:
    """The body's sequence_length copy-through, or None when it has no copy-through ops."""
    ops = {n.name: n.op for n in reader.function.node_def if n.op in COPY_OPS}
    if not ops:
        return None
    compare = reader.nodes[one_compare(ops)]
    data = reader.data(compare)
    lengths = reader.arg(data[1])
    if reader.arg(data[0]) != time or lengths not in invariant:
        fail(f"GreaterEqual {compare.name!r} does not compare the loop's time with an unchanged argument "
             "(dynamic_rnn's time >= sequence_length)")
    selects = select_nodes({name: op for name, op in ops.items() if op != "GreaterEqual"},
                           lambda name: reader.data(reader.nodes[name]), f"{compare.name}:z:0", str)
    return CopyThrough(lengths, {f"{name}:output:0": pair for name, pair in selects.items()})


def _carried(rets: list[str], names: list[str], copy: CopyThrough[str] | None, position: int) -> str:
    """What the loop carries into argument ``position``'s next value, seen through the copy-through."""
    if copy is None:
        return rets[position]
    new = copy.new_of(rets[position], names[position])
    if new is None:
        fail(f"the loop's sequence_length does not carry its argument {names[position]!r} through "
             "past a sequence's end")
    return new


def _step_output(reader: _Reader, copy: CopyThrough[str] | None, written: str, invariant: set[int]) -> str | None:
    """The value the step writes to its output list, seen through the copy-through."""
    if copy is None:
        return written
    kept = copy.selects.get(written, ("", ""))[0]
    copy.zeros = reader.args.get(kept)
    if copy.zeros not in invariant:
        fail("the step's output past a sequence's end is not an unchanged argument of the loop "
             "(dynamic_rnn's zeros)")
    new = copy.new_of(written, kept)
    copy.check_all_used(lambda ref: ref.partition(":")[0])
    return new


def _layers(reader: _Reader, rets: list[str], start: str, preparation: dict[str, "NodeDef"],
            invariant: set[int], copy: CopyThrough[str] | None) -> tuple[list[LoopLayer], str]:
    """The chain of cells from the step's input ``start``; also the top layer's output."""
    cells = [n for n in reader.function.node_def if n.op in CELLS]
    layers, current = [], start
    while cells:
        cell = next((n for n in cells if n.input and reader.resolve(n.input[0]) == current), None)
        if cell is None:
            fail(f"the fused cells are no chain from the step's input (e.g. {cells[0].name!r})")
        cells.remove(cell)
        states, weight_slots, outs = CELLS[cell.op]
        data = reader.data(cell)
        state = [p for p in (reader.arg(data[k]) for k in states) if p is not None]
        if len(state) < len(states):
            fail(f"cell {cell.name!r} reads its state from inside the body, not from the loop")
        for position, out in zip(state, outs, strict=True):
            if _carried(rets, reader.names, copy, position) != f"{cell.name}:{out}:0":
                fail(f"the loop does not carry cell {cell.name!r}'s new {out} into its next step")
        weights = [data[k] for k in weight_slots]
        optional = _optional_weights(cell, data, len(states) + len(weight_slots) + 1)
        if not all(reader.args.get(w) in invariant if ":" not in w else w.partition(":")[0] in preparation
                   for w in weights + list(optional.values())):
            fail(f"cell {cell.name!r}'s weights change from step to step")
        layers.append(LoopLayer(cell.op, _cell_attrs(cell), weights, [p for p in state if p is not None], optional))
        current = f"{cell.name}:h:0"
    return layers, current


def _optional_weights(cell: "NodeDef", data: list[str], required: int) -> dict[str, str]:
    """The optional weights cell ``cell`` has (its ``optional_inputs``, after its ``required``
    data inputs), by name; refused (:func:`fail`) for one the loop op does not take."""
    listed = listed_optional_inputs(cell.attr)
    unknown = [name for name in listed if name not in OPTIONAL_WEIGHTS[cell.op]]
    if unknown:
        fail(f"cell {cell.name!r} has the optional input {unknown[0]!r}, which the whole-loop op does "
             f"not take (it takes: {', '.join(OPTIONAL_WEIGHTS[cell.op]) or 'none'})")
    if len(data) != required + len(listed):
        fail(f"cell {cell.name!r} has {len(data)} inputs, not its {required} required ones and the "
             f"{len(listed)} optional ones it lists")
    return dict(zip(listed, data[required:], strict=True))


def _cell_attrs(cell: "NodeDef") -> dict[str, Any]:
    """What the whole-loop op takes from a fused cell: its activation, dtype and the attributes of
    :data:`CELL_ATTRS` (their defaults when the node leaves them unset)."""
    attrs: dict[str, Any] = {"activation": cell.attr["activation"].s.decode(), "T": cell.attr["T"].type}
    for name, default in CELL_ATTRS[cell.op].items():
        if name not in cell.attr:
            attrs[name] = default
        elif isinstance(default, bool):
            attrs[name] = cell.attr[name].b
        else:
            attrs[name] = cell.attr[name].f
    return attrs


def _needed(reader: _Reader, layers: list[LoopLayer], preparation: dict[str, "NodeDef"]) -> list["NodeDef"]:
    """The preparation nodes the layers' weights need, in ``preparation``'s order."""
    wanted, stack = set(), [w.partition(":")[0] for layer in layers for w in layer.all_weights if ":" in w]
    while stack:
        name = stack.pop()
        if name in wanted:
            continue
        wanted.add(name)
        stack.extend(t.partition(":")[0] for t in reader.data(preparation[name]) if ":" in t)
    return [node for name, node in preparation.items() if name in wanted]


def read_body(function: "FunctionDef") -> LoopBody:
    """The roles of the loop's arguments and its layers; refused (:func:`fail`)."""
    reader = _Reader(function)
    names = reader.names
    if len(function.signature.output_arg) != len(names):
        fail("the loop body returns other values than it takes")
    rets = [reader.resolve(function.ret.get(a.name, "")) for a in function.signature.output_arg]
    invariant = {k for k, name in enumerate(names) if rets[k] == name}
    preparation = _preparation(reader, invariant)
    _check_ops(function, preparation)
    get, put = _one(function, "TensorListGetItem"), _one(function, "TensorListSetItem")
    got, written = reader.data(get), reader.data(put)
    inputs, time, outputs = reader.arg(got[0]), reader.arg(got[1]), reader.arg(written[0])
    last_only = reader.arg(written[1]) is None and _const_is(reader.node(written[1]), 0)
    if inputs is None or time is None or outputs is None or (reader.arg(written[1]) != time and not last_only):
        fail("the step does not read its input list and write its output list at the loop's time "
             "(or, keeping the last step's output alone, at 0)")
    if _increment(reader, rets[time]) != time:
        fail("the loop's time does not advance by one per step")
    counters = [k for k in range(len(names)) if k != time and _increment(reader, rets[k]) == k]
    if len(counters) != 1:
        fail("the loop has no counter advancing by one per step")
    copy = _copy_through(reader, time, invariant)
    layers, top = _layers(reader, rets, f"{get.name}:item:0", preparation, invariant, copy)
    if _step_output(reader, copy, written[2], invariant) != top or rets[outputs] != f"{put.name}:output_handle:0":
        fail("the loop does not write the top layer's output to its output list at each step")
    needed = _needed(reader, layers, preparation)
    body = LoopBody(counters[0], time, inputs, outputs, names, layers, needed,
                    {node.name: reader.data(node) for node in needed}, copy=copy, last_only=last_only)
    _check_invariants(names, rets, body)
    return body


def _check_invariants(names: list[str], rets: list[str], body: LoopBody) -> None:
    changing = {body.counter, body.time, body.outputs} | {p for layer in body.layers for p in layer.state}
    for k, name in enumerate(names):
        if k not in changing and rets[k] != name:
            fail(f"the loop changes its argument {name!r} from step to step besides the cells' state")


#: a bound of the loop's condition: ("arg", position) or ("value", the constant)
Bound = tuple[str, Any]


def read_bounds(cond: "FunctionDef", body: LoopBody) -> tuple[Bound | None, Bound]:
    """What ``counter < n and time < m`` compare with: (n, m); n None when the condition is
    ``time < m`` alone (tf_keras's loops, whose counter has no bound); refused (:func:`fail`)."""
    from tensorflow.python.framework import tensor_util  # deferred: TensorFlow costs seconds to import

    reader = _Reader(cond)
    bounds: dict[int, Bound] = {}
    compared: dict[int, str] = {}  # position -> the Less node comparing it with its bound
    for node in cond.node_def:
        data = reader.data(node)
        if node.op == "Less" and len(data) == 2 and (position := reader.arg(data[0])) in (body.counter, body.time):
            other, const = reader.arg(data[1]), reader.node(data[1])
            if other is not None:
                bounds[position] = ("arg", other)
            elif const is not None and const.op == "Const":
                bounds[position] = ("value", tensor_util.MakeNdarray(const.attr["value"].tensor))
            compared[position] = node.name
            continue
        if node.op not in ("LogicalAnd", "Identity", "Const"):
            fail(f"the loop's condition does more than compare its counter and time: {node.name!r}")
    ands = [n for n in cond.node_def if n.op == "LogicalAnd"]
    rets = [reader.resolve(r) for r in cond.ret.values()]
    if not ands and set(bounds) == {body.time} and rets == [f"{compared[body.time]}:z:0"]:
        return None, bounds[body.time]
    if set(bounds) != {body.counter, body.time} or len(ands) != 1 or rets != [f"{ands[0].name}:z:0"]:
        fail("the loop's condition is not counter < n and time < m, nor time < m")
    return bounds[body.counter], bounds[body.time]
