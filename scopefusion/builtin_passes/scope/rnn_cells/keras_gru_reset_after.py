"""The step of a Keras ``GRUCell`` with ``reset_after=True`` (the Keras default; Keras 3 and
tf_keras, ``implementation=2``) as written in the graph of an unrolled ``GRU`` or of a loop body::

    b_in, b_rec = bias[0], bias[1]       Keras 3: Squeeze(Split(0, bias)); tf_keras: Unpack(bias);
                                         tf_keras's standard_gru: two loop arguments
    xs          = Split(1, BiasAdd(MatMul(x, kernel), b_in))            x_z, x_r, x_h
    rec         = BiasAdd(MatMul(h, recurrent_kernel), b_rec)            (Keras 3: AddV2)
    rec_z, rec_r, rec_h = rec's columns [:H], [H:2H], [2H:]             (Keras 3: StridedSlice;
                                         tf_keras: SplitV [H, H, -1]; standard_gru: Split in 3)
    z, r        = Sigmoid(x_z + rec_z), Sigmoid(x_r + rec_r)
    candidate   = act(x_h + r * rec_h)
    new_h       = z * h + (1 - z) * candidate

The reset multiplies the recurrent product and its bias after the matmul: ``GRUCell`` with
``reset_after=True``, u = z, once the weights are in its layout.  An inner graph stacks ``[kernel;
recurrent_kernel]`` (columns z, r, h), takes the gate kernel as its r, z columns and the candidate
kernel as its h columns (rows of x, then of h), the gate bias as the r, z parts of ``b_in +
b_rec``, ``candidate_bias`` as ``b_in``'s h part and ``candidate_recurrent_bias`` as ``b_rec``'s.
Without a bias (``use_bias=False``) both products are split directly: the gate and candidate
biases are zero and the cell has no ``candidate_recurrent_bias``.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from ....core.fusion.fused_ops import OPTIONAL_INPUTS_ATTR
from ....core.fusion.refusal import fail
from ....core.graph.pattern import Op, const, one_of, op
from .keras_gru import KERAS_GRU_FORM, column_slice, slice_columns
from .keras_lstm import DT_INT32, int32_const, zero_bias
from .lstm import ADD, ACTIVATIONS, AXIS_1
from .steps import CellStep
from .sums import plus_bias

if TYPE_CHECKING:  # pragma: no cover
    from ....core.fusion.candidate import FusedInput
    from ....core.scope.results import FusionScopesResult
    from ....core.scope.scope_graph import ScopeGraph

#: how the step reads Keras's [2, 3 * units] bias: split in the step ("rows": Keras 3's
#: Squeeze(Split) or tf_keras's Unpack), as two tensors from outside ("pair": standard_gru's
#: arguments), or not at all ("none": use_bias=False)
BiasForm = Literal["rows", "pair", "none"]

AXIS_0 = const(where=lambda v: v.size == 1 and int(v.reshape(-1)[0]) == 0, description="axis 0")


def _bias_row(bias: BiasForm, k: int) -> Any:
    """Row ``k`` (0: input, 1: recurrent) of Keras's bias."""
    if bias == "pair":
        return ("$bias_in", "$bias_rec")[k]
    return one_of(op("Squeeze", op("Split", AXIS_0, "$bias", port=k, num_split=2, label="bias_split"),
                     label=f"bias_row_{k}"),
                  op("Unpack", "$bias", port=k, num=2, axis=0, label="bias_unpack"))


def _defs(bias: BiasForm) -> dict[str, Any]:
    x_products = op("MatMul", "$x", "$kernel", transpose_a=False, transpose_b=False)
    h_products = op("MatMul", "$h", "$recurrent_kernel", transpose_a=False, transpose_b=False, label="h_matmul")

    def xs(k: int) -> Op:
        biased = x_products if bias == "none" else plus_bias(x_products, _bias_row(bias, 0))
        return op("Split", AXIS_1, biased, port=k, num_split=3, label="x_split")

    def recurrent(k: int) -> Any:
        return one_of(column_slice("$rec", f"rec_{k}"),
                      op("SplitV", "$rec", const(label="rec_sizes"), AXIS_1, port=k, num_split=3, label="rec_split"),
                      op("Split", AXIS_1, "$rec", port=k, num_split=3, label="rec_thirds"))

    return {
        "out": op(ADD, op("Mul", "$z", "$h"), op("Mul", op("Sub", const(1.0), "$z"), "$candidate")),
        "z": op("Sigmoid", op(ADD, xs(0), recurrent(0))),
        "r": op("Sigmoid", op(ADD, xs(1), recurrent(1))),
        "rec": h_products if bias == "none" else plus_bias(h_products, _bias_row(bias, 1)),
        "candidate": op(ACTIVATIONS, op(ADD, xs(2), op("Mul", "$r", recurrent(2))), label="act"),
    }


def check_reset_after_layout(sg: "ScopeGraph", step: CellStep) -> None:
    """The recurrent product is cut into Keras's z, r, h columns, in that order, each ``units``
    wide (a Split in three is); refused otherwise."""
    if "rec_thirds" in step.nodes:
        return
    if "rec_split" in step.nodes:
        sizes = step.consts.get("rec_sizes")
        if sizes is None or sizes.shape != (3,) or sizes[0] != sizes[1] or int(sizes[2]) not in (-1, int(sizes[0])):
            fail(f"the recurrent product is not split into three equal z, r, h parts (sizes "
                 f"{None if sizes is None else sizes.tolist()})")
        return
    parts = [slice_columns(sg, step.nodes[f"rec_{k}"]) for k in range(3)]
    first = parts[0]
    units = first[1] if first is not None and first[0] == 0 else None
    if not units or parts != [(0, units), (units, 2 * units), (2 * units, None)]:
        fail(f"the slices of the recurrent product are not its z, r, h columns [:u], [u:2u], [2u:] "
             f"(columns {parts})")


def keras_gru_reset_after_inner_graph(result: "FusionScopesResult", attrs: dict[str, Any], T: int, *,
                                      bias: BiasForm = "rows") -> None:
    """Fused inputs x, h, kernel, recurrent_kernel, then Keras's bias ([2, 3 * units], or its two
    rows, or none) -> GRUCell(reset_after=True) in TensorFlow's layout."""
    fi = result.fused_input
    result.add_inner_node("axis_0", "Const", [], int32_const(0))
    result.add_inner_node("axis_1", "Const", [], int32_const(1))
    concat = {"T": T, "Tidx": DT_INT32, "N": 2}
    # [kernel; recurrent_kernel] is [input + hidden, 3 * hidden] on concat(x, h), columns z, r, h
    result.add_inner_node("stacked_kernel", "ConcatV2", [fi(2), fi(3), "axis_0"], concat)
    result.add_inner_node("kernel_gates", "Split", ["axis_1", "stacked_kernel"], {"T": T, "num_split": 3})
    result.add_inner_node("gate_kernel", "ConcatV2", ["kernel_gates:1", "kernel_gates:0", "axis_1"], concat)
    inputs: list[str | FusedInput] = [fi(0), fi(1), "gate_kernel", "gate_bias", "kernel_gates:2", "bias_gates:2"]
    split = {"T": T, "num_split": 3}
    if bias == "none":
        result.add_inner_node("bias_gates", "Split", ["axis_0", zero_bias(result, fi(3), T)], split)
        result.add_inner_node("gate_bias", "ConcatV2", ["bias_gates:1", "bias_gates:0", "axis_0"], concat)
        result.add_inner_node("cell", "GRUCell", inputs, {**attrs, "T": T})
        result.set_inner_output(0, "cell:0")
        return
    if bias == "rows":
        result.add_inner_node("bias_rows", "Unpack", [fi(4)], {"T": T, "num": 2, "axis": 0})
        rows: list[str | FusedInput] = ["bias_rows:0", "bias_rows:1"]
    else:
        rows = [fi(4), fi(5)]
    # the gates add both rows; the candidate keeps the input row's h part and the recurrent row's apart
    result.add_inner_node("gate_bias_sum", "AddV2", rows, {"T": T})
    result.add_inner_node("gate_bias_parts", "Split", ["axis_0", "gate_bias_sum"], split)
    result.add_inner_node("gate_bias", "ConcatV2", ["gate_bias_parts:1", "gate_bias_parts:0", "axis_0"], concat)
    result.add_inner_node("bias_gates", "Split", ["axis_0", rows[0]], split)
    result.add_inner_node("recurrent_bias_gates", "Split", ["axis_0", rows[1]], split)
    result.add_inner_node("cell", "GRUCell", inputs + ["recurrent_bias_gates:2"],
                          {**attrs, "T": T, OPTIONAL_INPUTS_ATTR: ["candidate_recurrent_bias"]})
    result.set_inner_output(0, "cell:0")


#: the reset_after=False form's step signature and library checks, with this step's pattern and layout
KERAS_GRU_RESET_AFTER_FORM = replace(
    KERAS_GRU_FORM,
    defs=lambda: _defs("rows"),
    library="Keras GRUCell (reset_after=True)",
    inner_graph=keras_gru_reset_after_inner_graph,
    attrs={"reset_after": True},
    check=check_reset_after_layout,
    vectors=(),  # Keras's [2, 3 * units] bias, its rows split apart in the step
)

#: ``GRU(use_bias=False)``: both products split directly, the fused cell's biases zero
KERAS_GRU_RESET_AFTER_NO_BIAS_FORM = replace(
    KERAS_GRU_RESET_AFTER_FORM, defs=lambda: _defs("none"), inputs=KERAS_GRU_RESET_AFTER_FORM.inputs[:-1],
    library="Keras GRUCell (reset_after=True, use_bias=False)",
    inner_graph=partial(keras_gru_reset_after_inner_graph, bias="none"))

#: the bias's two rows given apart (tf_keras's ``standard_gru`` unstacks it before its loop)
KERAS_GRU_RESET_AFTER_PAIR_FORM = replace(
    KERAS_GRU_RESET_AFTER_FORM, defs=lambda: _defs("pair"),
    inputs=KERAS_GRU_RESET_AFTER_FORM.inputs[:-1] + ("bias_in", "bias_rec"), vectors=("bias_in", "bias_rec"),
    inner_graph=partial(keras_gru_reset_after_inner_graph, bias="pair"))
