"""The step of a Keras ``LSTMCell`` (Keras 3 and tf_keras, ``implementation=2``) as written in
the graph of an unrolled ``LSTM(unroll=True)`` / ``RNN(LSTMCell, unroll=True)``::

    z      = BiasAdd(AddV2(MatMul(x, kernel), MatMul(h, recurrent_kernel)), bias)
    split  = Split(1, z)                        i, f, c, o (Keras's gate order)
    new_c  = AddV2(Mul(Sigmoid(split:1), c), Mul(Sigmoid(split:0), act(split:2)))
    new_h  = Mul(Sigmoid(split:3), act(new_c))

Keras 3 gives every step its own scope (``lstm_cell_1``, ``lstm_cell_3``, ...); tf_keras traced
in a ``tf.function`` puts all of them in one ``lstm_cell`` scope, as ``static_rnn`` does.  The
step is ``BasicLSTMCell`` with ``forget_bias`` 0 once the weights are in its layout: an inner
graph stacks ``[kernel; recurrent_kernel]`` into the ``[input + hidden, 4 * hidden]`` kernel on
``concat(x, h)`` and reorders the gate columns (and the bias) from i, f, c, o to i, j, f, o.
Without a bias (``use_bias=False``) the products are split directly and the fused cell's bias is
zero.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ....core.fusion.fused_ops import OPTIONAL_INPUTS_ATTR
from ....core.graph.pattern import op
from ....core.graph.protos import message_class
from ....core.graph.tensor_codec import make_tensor_proto
from .cell_options import explain_by_dataflow
from .gate_order import KERAS_ORDER, Order, lstm_gate_orders
from .gate_parts import activated_part
from .lstm import ADD, ACTIVATIONS
from .steps import CellForm
from .sums import products_plus_bias

if TYPE_CHECKING:  # pragma: no cover
    from ....core.fusion.candidate import FusedInput
    from ....core.scope.results import FusionScopesResult
    from ....core.scope.scope_graph import Scope

DT_INT32 = 3


def _keras_lstm_defs(biased: bool = True, order: Order = KERAS_ORDER, projected: bool = False) -> dict[str, Any]:
    """The step with its gates i, f, g, o at the split's ports ``order`` (Keras's: 0, 1, 2, 3);
    ``projected``: its output multiplied by a projection matrix (Sonnet's ``projection_size``)."""
    def gate(k: int, act: Any = "Sigmoid", label: str | None = None) -> Any:  # before or after the split
        return activated_part(act, "$gates", order[k], 4, split_label="split", act_label=label)

    x_products = op("MatMul", "$x", "$kernel", transpose_a=False, transpose_b=False, label="x_matmul")
    h_products = op("MatMul", "$h", "$recurrent_kernel", transpose_a=False, transpose_b=False, label="h_matmul")
    output = op("Mul", gate(3), op(ACTIVATIONS, "$c_out", label="act_c"))
    return {
        "out": op("MatMul", output, "$proj", transpose_a=False, transpose_b=False, label="projection")
        if projected else output,
        "c_out": op(ADD, op("Mul", gate(1), "$c"), op("Mul", gate(0), gate(2, ACTIVATIONS, "act_j"))),
        "gates": products_plus_bias(x_products, h_products, "$bias" if biased else None),
    }


def explain_keras_options(scope: "Scope", cell: str) -> str | None:
    """A Keras cell option the fused op does not take, in the user's terms: a recurrent activation
    other than sigmoid (MatMul but no Sigmoid: e.g. hard_sigmoid, written as other ops)."""
    if scope.count("MatMul") and not scope.count("Sigmoid"):
        return (f"the Keras {cell} cell's recurrent_activation is not sigmoid (e.g. hard_sigmoid), and the fused "
                f"cell's gates are sigmoids")
    return None


def _wants_keras(scope: "Scope") -> bool:
    """Keras cells multiply x and h by separate kernels: no concatenation in the scope."""
    return scope.count("ConcatV2") <= 0


def int32_const(value: Any) -> dict[str, Any]:
    proto = make_tensor_proto(np.asarray(value, dtype=np.int32))
    AttrValue = message_class("AttrValue")
    return {"value": AttrValue(tensor=proto), "dtype": AttrValue(type=DT_INT32)}


def zero_bias(result: "FusionScopesResult", recurrent_kernel: "str | FusedInput", T: int) -> str:
    """A cell without a bias (``use_bias=False``) is the fused cell with a zero bias, as long as a
    row of the recurrent kernel (one column per gate unit): ``zeros_like(recurrent_kernel[0])``."""
    for name, value in (("row_begin", [0]), ("row_end", [1]), ("row_strides", [1])):
        result.add_inner_node(name, "Const", [], int32_const(value))
    result.add_inner_node("row", "StridedSlice", [recurrent_kernel, "row_begin", "row_end", "row_strides"],
                          {"T": T, "Index": DT_INT32, "begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0,
                           "new_axis_mask": 0, "shrink_axis_mask": 1})
    result.add_inner_node("zero_bias", "ZerosLike", ["row"], {"T": T})
    return "zero_bias"


def keras_lstm_inner_graph(result: "FusionScopesResult", attrs: dict[str, Any], T: int, *,
                           biased: bool = True, order: Order = KERAS_ORDER, projected: bool = False) -> None:
    """Fused inputs x, h, c, kernel, recurrent_kernel, bias (a zero bias when not ``biased``) and,
    when ``projected``, the projection -> BasicLSTMCell in its own layout (the projection its
    optional input ``proj``); the gates i, f, g, o at the column blocks ``order``."""
    ijfo = (order[0], order[2], order[1], order[3])
    fi = result.fused_input
    result.add_inner_node("axis_0", "Const", [], int32_const(0))
    result.add_inner_node("axis_1", "Const", [], int32_const(1))
    bias = fi(5) if biased else zero_bias(result, fi(4), T)
    concat = {"T": T, "Tidx": DT_INT32}
    result.add_inner_node("stacked_kernel", "ConcatV2", [fi(3), fi(4), "axis_0"], {**concat, "N": 2})
    result.add_inner_node("kernel_gates", "Split", ["axis_1", "stacked_kernel"], {"T": T, "num_split": 4})
    result.add_inner_node("w", "ConcatV2", [f"kernel_gates:{k}" for k in ijfo] + ["axis_1"],
                          {**concat, "N": 4})
    result.add_inner_node("bias_gates", "Split", ["axis_0", bias], {"T": T, "num_split": 4})
    result.add_inner_node("b", "ConcatV2", [f"bias_gates:{k}" for k in ijfo] + ["axis_0"],
                          {**concat, "N": 4})
    inputs: list["str | FusedInput"] = [fi(0), fi(1), fi(2), "w", "b"]
    if projected:
        attrs = {**attrs, OPTIONAL_INPUTS_ATTR: ["proj"]}
        inputs.append(fi(6 if biased else 5))
    result.add_inner_node("cell", "BasicLSTMCell", inputs, {**attrs, "T": T})
    result.set_inner_output(0, "cell:0")
    result.set_inner_output(1, "cell:1")


def _ordered(form: CellForm, order: Order) -> CellForm:
    """``form`` matching the gates at the split's ports ``order`` (i, f, g, o), its inner graph
    taking the kernel's column blocks in that order."""
    if order == KERAS_ORDER or form.inner_graph is None:
        return form
    return replace(form, defs=partial(form.defs, order=order), inner_graph=partial(form.inner_graph, order=order),
                   order=order, library=f"{form.library}, gates i, f, g, o at columns {list(order)}")


KERAS_LSTM_FORM = CellForm(
    name="BasicLSTMCell",
    defs=_keras_lstm_defs,
    roots=("Mul",),
    inputs=("x", "h", "c", "kernel", "recurrent_kernel", "bias"),
    outputs=("out", "c_out"),
    state="h",
    explain=lambda scope: explain_keras_options(scope, "LSTM") or explain_by_dataflow(scope),
    wants=_wants_keras,
    library="Keras LSTMCell",
    inner_graph=keras_lstm_inner_graph,
    gate_orders=lstm_gate_orders,
    ordered=_ordered,
    vectors=("bias",),
)

#: ``LSTM(use_bias=False)``: the products split directly, the fused cell's bias zero
KERAS_LSTM_NO_BIAS_FORM = replace(KERAS_LSTM_FORM, defs=partial(_keras_lstm_defs, biased=False),
                                  inputs=KERAS_LSTM_FORM.inputs[:-1], vectors=(),
                                  library="Keras LSTMCell (use_bias=False)",
                                  inner_graph=partial(keras_lstm_inner_graph, biased=False))


def _projected_gate_orders(view: Any, root: int) -> list[Order]:
    """The gate orders of a projected step: those its output before the projection reveals."""
    index = view.index
    ins = [t for t in index.inputs[root] if t[1] >= 0]
    if index.ops[root] != "MatMul" or not ins or ins[0][1] != 0:
        return []
    return lstm_gate_orders(view, ins[0][0])


def _projected(form: CellForm) -> CellForm:
    """``form`` with its output projected (``h' = h @ proj``): the projection the fused cell's
    optional input ``proj``; the dataflow's other LSTM options still refused."""
    biased = "bias" in form.inputs
    return replace(form, defs=partial(form.defs, projected=True), roots=("MatMul",), inputs=form.inputs + ("proj",),
                   explain=lambda scope: explain_keras_options(scope, "LSTM") or explain_by_dataflow(
                       scope, carried=("projection",)),
                   library=f"{form.library}, projected (Sonnet projection_size)",
                   inner_graph=partial(keras_lstm_inner_graph, biased=biased, projected=True),
                   gate_orders=_projected_gate_orders, ordered=_ordered_projected)


def _ordered_projected(form: CellForm, order: Order) -> CellForm:
    if order == KERAS_ORDER or form.inner_graph is None:
        return form
    biased = "bias" in form.inputs
    return replace(form, defs=partial(form.defs, order=order),
                   inner_graph=partial(keras_lstm_inner_graph, biased=biased, projected=True, order=order),
                   order=order, library=f"{form.library}, gates i, f, g, o at columns {list(order)}")


#: a Keras-layout LSTM whose output is projected (``snt.LSTM(projection_size=...)``), with and without a bias
KERAS_LSTM_PROJECTED_FORMS = (_projected(KERAS_LSTM_FORM), _projected(KERAS_LSTM_NO_BIAS_FORM))
