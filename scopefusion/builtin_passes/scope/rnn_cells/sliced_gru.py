"""A GRU step whose gates and candidate take column slices of shared products (Sonnet 2's
``snt.GRU`` writes it so)::

    xs        = MatMul(x, W_i)                                      W_i [input, 3 * hidden]
    zr        = xs[:, :2H] + MatMul(h, W_h[:, :2H]) + b[:2H]        (any grouping, BiasAdd or add)
    z, r      = Split(1, Sigmoid(zr))                               (or r, z: the dataflow says which)
    candidate = act(xs[:, 2H:3H] + MatMul(r * h, W_h[:, 2H:3H]) + b[2H:3H])
    new_h     = (1 - z) * h + z * candidate                         (or z * h + (1 - z) * candidate)

The reset multiplies ``h`` before the candidate's matmul: TensorFlow's ``GRUCell`` convention,
once the weights are in its layout.  Which gate is which is read off the dataflow: ``r`` is the
one multiplying ``h`` before the candidate's product, ``z`` the one mixing the old state and the
candidate.  When ``z`` weighs the candidate (``(1 - z) * h + z * candidate``), the fused cell's
update gate is ``u = 1 - z = sigmoid(-pre_z)``: its kernel columns and bias are ``z``'s negated.
An inner graph stacks ``[W_i; W_h]`` on ``concat(x, h)``, takes its three column blocks (z, r,
candidate, as the slices say) and the bias's, and feeds ``GRUCell(reset_after=False)``.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ....core.graph.pattern import Op, const, op
from ....core.fusion.refusal import fail
from .keras_gru import column_slice, slice_columns
from .keras_lstm import DT_INT32, int32_const
from .gate_parts import activated_part
from .lstm import ADD, ACTIVATIONS
from .steps import CellForm, CellStep
from .sums import products_plus_bias

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.results import FusionScopesResult
    from ....core.scope.scope_graph import ScopeGraph


def _vector_slice(source: Any, label: str) -> Op:
    return op("StridedSlice", source, const(), const(), const(), label=label,
              ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)


def _defs(z_port: int, z_takes: bool) -> dict[str, Any]:
    xs = op("MatMul", "$x", "$w_i", transpose_a=False, transpose_b=False, label="x_matmul")

    def gate(port: int) -> Any:
        return activated_part("Sigmoid", "$zr", port, 2, split_label="gate_split")

    z, r = gate(z_port), gate(1 - z_port)
    keep = op("Sub", const(1.0), z) if z_takes else z
    take = z if z_takes else op("Sub", const(1.0), z)
    return {
        "out": op(ADD, op("Mul", keep, "$h"), op("Mul", take, "$candidate")),
        "zr": products_plus_bias(column_slice(xs, "zr_x"),
                                 op("MatMul", "$h", column_slice("$w_h", "zr_w"), transpose_a=False,
                                    transpose_b=False), _vector_slice("$b", "zr_b")),
        "candidate": op(ACTIVATIONS, products_plus_bias(
            column_slice(xs, "a_x"),
            op("MatMul", op("Mul", r, "$h"), column_slice("$w_h", "a_w"), transpose_a=False, transpose_b=False),
            _vector_slice("$b", "a_b")), label="act"),
    }


def _vector_range(sg: "ScopeGraph", node: int) -> tuple[int, int | None] | None:
    """The range [lo, hi) (hi None: to the end) a 1-D StridedSlice takes with stride 1, else None."""
    index = sg.index
    attrs = index.nodes[node].attr
    begin, end, strides = (sg.const_value_of(t[0]) for t in index.inputs[node][1:4])
    if begin is None or end is None or strides is None or any(v.shape != (1,) for v in (begin, end, strides)) \
            or int(strides[0]) != 1:
        return None
    begin_mask, end_mask = attrs["begin_mask"].i, attrs["end_mask"].i
    if (begin_mask | end_mask) & ~1:
        return None
    return (0 if begin_mask & 1 else int(begin[0])), (None if end_mask & 1 else int(end[0]))


def check_sliced_layout(sg: "ScopeGraph", step: CellStep) -> None:
    """The gates take columns [0, 2H) and the candidate [2H, 3H) of the products, kernels and
    bias, of kernels 3H wide; refused (:func:`fail`) otherwise."""
    zr = slice_columns(sg, step.nodes["zr_x"])
    if zr is None or zr[0] != 0 or zr[1] is None or zr[1] % 2:
        fail(f"the gates do not take the input product's first 2 * units columns (columns {zr})")
    units = zr[1] // 2
    gates, candidate = (0, 2 * units), (2 * units, 3 * units)
    def columns(v: tuple[int, int | None] | None) -> tuple[int, int | None] | None:
        return None if v is None else (v[0], 3 * units if v[1] is None else v[1])  # to the end: 3H wide

    found = {"zr_w": slice_columns(sg, step.nodes["zr_w"]), "a_x": slice_columns(sg, step.nodes["a_x"]),
             "a_w": slice_columns(sg, step.nodes["a_w"]), "zr_b": _vector_range(sg, step.nodes["zr_b"]),
             "a_b": _vector_range(sg, step.nodes["a_b"])}
    expected = {"zr_w": gates, "a_x": candidate, "a_w": candidate, "zr_b": gates, "a_b": candidate}
    wrong = [k for k, v in found.items() if columns(v) != expected[k]]
    if wrong:
        fail(f"the slices are not the gates' columns [0, {2 * units}) and the candidate's "
             f"[{2 * units}, {3 * units}) ({', '.join(f'{k}: {found[k]}' for k in wrong)})")
    for name in ("w_i", "w_h", "b"):
        shape = sg.static_shape(step.tensors[name])
        if shape is None or shape[-1] != 3 * units:
            fail(f"the {name} weights are not {3 * units} columns wide (shape {shape}): the slices "
                 f"would not cover them")


def sliced_gru_inner_graph(result: "FusionScopesResult", attrs: dict[str, Any], T: int, *, z_port: int,
                           z_takes: bool) -> None:
    """Fused inputs x, h, w_i, w_h, b -> GRUCell(reset_after=False) in TensorFlow's layout."""
    fi = result.fused_input
    result.add_inner_node("axis_0", "Const", [], int32_const(0))
    result.add_inner_node("axis_1", "Const", [], int32_const(1))
    concat = {"T": T, "Tidx": DT_INT32, "N": 2}
    result.add_inner_node("stacked_kernel", "ConcatV2", [fi(2), fi(3), "axis_0"], concat)
    result.add_inner_node("kernel_parts", "Split", ["axis_1", "stacked_kernel"], {"T": T, "num_split": 3})
    result.add_inner_node("bias_parts", "Split", ["axis_0", fi(4)], {"T": T, "num_split": 3})
    z_kernel, z_bias = f"kernel_parts:{z_port}", f"bias_parts:{z_port}"
    if z_takes:  # u = 1 - z = sigmoid(-pre_z)
        result.add_inner_node("u_kernel", "Neg", [z_kernel], {"T": T})
        result.add_inner_node("u_bias", "Neg", [z_bias], {"T": T})
        z_kernel, z_bias = "u_kernel", "u_bias"
    r = 1 - z_port
    result.add_inner_node("gate_kernel", "ConcatV2", [f"kernel_parts:{r}", z_kernel, "axis_1"], concat)
    result.add_inner_node("gate_bias", "ConcatV2", [f"bias_parts:{r}", z_bias, "axis_0"], concat)
    result.add_inner_node("cell", "GRUCell", [fi(0), fi(1), "gate_kernel", "gate_bias", "kernel_parts:2",
                                              "bias_parts:2"], {**attrs, "T": T})
    result.set_inner_output(0, "cell:0")


_BASE = CellForm(
    name="GRUCell",
    defs=lambda: _defs(0, True),
    roots=ADD,
    inputs=("x", "h", "w_i", "w_h", "b"),
    outputs=("out",),
    state="h",
    explain=lambda scope: None,
    wants=lambda scope: scope.count("StridedSlice") > 0,
    library="GRU on column slices of shared products (Sonnet's snt.GRU)",
    check=check_sliced_layout,
    attrs={"reset_after": False},
    vectors=("b",),
)

#: z, r or r, z from the gates' Split; z weighing the candidate or the old state
SLICED_GRU_FORMS = tuple(
    replace(_BASE, defs=partial(_defs, z_port, z_takes),
            inner_graph=partial(sliced_gru_inner_graph, z_port=z_port, z_takes=z_takes))
    for z_takes in (True, False) for z_port in (0, 1))
