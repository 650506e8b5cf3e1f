"""The step of a Keras ``GRUCell`` with ``reset_after=False`` (Keras 3 and tf_keras,
``implementation=2``) as written in the graph of an unrolled ``GRU(unroll=True)``::

    xs        = Split(1, BiasAdd(MatMul(x, kernel), bias))           x_z, x_r, x_h
    rec       = MatMul(h, recurrent_kernel[:, :2H])
    rec_z     = rec[:, :H]  and  rec_r = rec[:, H:2H]    (Keras 3: StridedSlice;
                                                          tf_keras: SplitV [H, H, -1])
    z, r      = Sigmoid(x_z + rec_z), Sigmoid(x_r + rec_r)
    candidate = act(x_h + MatMul(r * h, recurrent_kernel[:, 2H:]))
    new_h     = z * h + (1 - z) * candidate

That is TensorFlow's ``GRUCell`` with u = z once the weights are in its layout: an inner graph
stacks ``[kernel; recurrent_kernel]`` (columns z, r, h) and takes the gate kernel as its r, z
columns, the candidate kernel as its h columns, the gate bias ``[bias_r, bias_z]`` and ``bias_h``
(zero without a bias, ``use_bias=False``: x's products are split directly).
With ``reset_after=True`` (the Keras default) the reset multiplies ``h @ recurrent_h + bias``
after the matmul: that is ``GRUCell`` with ``reset_after=True`` (:mod:`.keras_gru_reset_after`).
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ....core.fusion.refusal import fail
from ....core.graph.pattern import Op, const, one_of, op
from .keras_lstm import DT_INT32, explain_keras_options, int32_const, zero_bias
from .lstm import ADD, ACTIVATIONS, AXIS_1
from .steps import CellForm, CellStep
from .sums import plus_bias

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.results import FusionScopesResult
    from ....core.scope.scope_graph import ScopeGraph


def column_slice(source: Any, label: str) -> Op:
    return op("StridedSlice", source, const(), const(), const(), label=label,
              ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)


def _keras_gru_defs(biased: bool = True) -> dict[str, Any]:
    def xs(k: int) -> Op:
        products = op("MatMul", "$x", "$kernel", transpose_a=False, transpose_b=False)
        return op("Split", AXIS_1, plus_bias(products, "$bias") if biased else products, port=k, num_split=3,
                  label="x_split")

    def recurrent(k: int) -> Any:
        return one_of(column_slice("$rec", f"rec_{k}"),
                      op("SplitV", "$rec", const(label="rec_sizes"), AXIS_1, port=k, num_split=3,
                         label="rec_split"))

    return {
        "out": op(ADD, op("Mul", "$z", "$h"), op("Mul", op("Sub", const(1.0), "$z"), "$candidate")),
        "z": op("Sigmoid", op(ADD, xs(0), recurrent(0))),
        "r": op("Sigmoid", op(ADD, xs(1), recurrent(1))),
        "rec": op("MatMul", "$h", column_slice("$recurrent_kernel", "zr_slice"), transpose_a=False, transpose_b=False),
        "candidate": op(ACTIVATIONS, op(ADD, xs(2), op("MatMul", op("Mul", "$r", "$h"),
                                                       column_slice("$recurrent_kernel", "h_slice"))), label="act"),
    }


def slice_columns(sg: "ScopeGraph", node: int) -> tuple[int, int | None] | None:
    """The column range [lo, hi) (hi None: to the end) a 2-D StridedSlice takes, all rows and
    stride 1; None when it is not such a slice."""
    index = sg.index
    attrs = index.nodes[node].attr
    values = [v for v in (sg.const_value_of(t[0]) for t in index.inputs[node][1:4])
              if v is not None and v.shape == (2,)]
    if len(values) != 3 or list(values[2]) != [1, 1]:
        return None
    begin_mask, end_mask = attrs["begin_mask"].i, attrs["end_mask"].i
    if not begin_mask & 1 or not end_mask & 1 or (begin_mask | end_mask) & ~3:
        return None
    lo = 0 if begin_mask & 2 else int(values[0][1])
    hi = None if end_mask & 2 else int(values[1][1])
    return lo, hi


def check_keras_gru_layout(sg: "ScopeGraph", step: CellStep) -> None:
    """The slices of the recurrent kernel and product are Keras's z, r | h columns; refused otherwise."""
    zr = slice_columns(sg, step.nodes["zr_slice"])
    if zr is None or zr[0] != 0 or zr[1] is None or zr[1] % 2:
        fail("the recurrent kernel's gate columns are not [:, :2 * units]")
    units = zr[1] // 2
    if slice_columns(sg, step.nodes["h_slice"]) != (2 * units, None):
        fail("the recurrent kernel's candidate columns are not [:, 2 * units:]")
    if not all(_recurrent_part_ok(sg, step, k, units) for k in (0, 1)):
        fail("the recurrent product is not split into the z and r columns")


def _recurrent_part_ok(sg: "ScopeGraph", step: CellStep, k: int, units: int) -> bool:
    """Gate ``k`` (z, r) reads columns [k * units, (k + 1) * units) of the recurrent product:
    a StridedSlice (Keras 3) or output k of a SplitV into [units, units, rest] (tf_keras)."""
    if f"rec_{k}" in step.nodes:
        return slice_columns(sg, step.nodes[f"rec_{k}"]) == (k * units, (k + 1) * units)
    sizes = step.consts.get("rec_sizes")
    return sizes is not None and sizes.shape == (3,) and list(sizes[:2]) == [units, units] and int(sizes[2]) in (-1, 0)


def keras_gru_inner_graph(result: "FusionScopesResult", attrs: dict[str, Any], T: int, *,
                          biased: bool = True) -> None:
    """Fused inputs x, h, kernel, recurrent_kernel, bias (a zero bias when not ``biased``) ->
    GRUCell in TensorFlow's layout."""
    fi = result.fused_input
    result.add_inner_node("axis_0", "Const", [], int32_const(0))
    result.add_inner_node("axis_1", "Const", [], int32_const(1))
    bias = fi(4) if biased else zero_bias(result, fi(3), T)
    concat = {"T": T, "Tidx": DT_INT32, "N": 2}
    # [kernel; recurrent_kernel] is [input + hidden, 3 * hidden] on concat(x, h), columns z, r, h
    result.add_inner_node("stacked_kernel", "ConcatV2", [fi(2), fi(3), "axis_0"], concat)
    result.add_inner_node("kernel_gates", "Split", ["axis_1", "stacked_kernel"], {"T": T, "num_split": 3})
    result.add_inner_node("bias_gates", "Split", ["axis_0", bias], {"T": T, "num_split": 3})
    result.add_inner_node("gate_kernel", "ConcatV2", ["kernel_gates:1", "kernel_gates:0", "axis_1"], concat)
    result.add_inner_node("gate_bias", "ConcatV2", ["bias_gates:1", "bias_gates:0", "axis_0"], concat)
    result.add_inner_node("cell", "GRUCell", [fi(0), fi(1), "gate_kernel", "gate_bias", "kernel_gates:2",
                                              "bias_gates:2"], {**attrs, "T": T})
    result.set_inner_output(0, "cell:0")


KERAS_GRU_FORM = CellForm(
    name="GRUCell",
    defs=_keras_gru_defs,
    roots=ADD,
    inputs=("x", "h", "kernel", "recurrent_kernel", "bias"),
    outputs=("out",),
    state="h",
    explain=lambda scope: explain_keras_options(scope, "GRU"),
    wants=lambda scope: scope.count("ConcatV2") <= 0,
    library="Keras GRUCell (reset_after=False)",
    inner_graph=keras_gru_inner_graph,
    check=check_keras_gru_layout,
    vectors=("bias",),
)

#: ``GRU(reset_after=False, use_bias=False)``: x's products split directly, the fused cell's biases zero
KERAS_GRU_NO_BIAS_FORM = replace(KERAS_GRU_FORM, defs=lambda: _keras_gru_defs(biased=False),
                                 inputs=KERAS_GRU_FORM.inputs[:-1], vectors=(),
                                 library="Keras GRUCell (reset_after=False, use_bias=False)",
                                 inner_graph=partial(keras_gru_inner_graph, biased=False))
