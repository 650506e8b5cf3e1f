"""The step of TensorFlow's ``rnn_cell.BasicLSTMCell`` and ``rnn_cell.LSTMCell`` as written in
the graph (``tf_keras``'s ``legacy_cells``, which ``tf.compat.v1.nn.rnn_cell`` names)::

    concat    = ConcatV2(x, h, 1)
    MatMul    = MatMul(concat, kernel)          kernel [input + hidden, 4 * hidden]
    BiasAdd   = BiasAdd(MatMul, bias)
    split     = Split(1, BiasAdd)               i, j, f, o
    Add       = AddV2(split:2, forget_bias)
    new_c     = AddV2(Mul(c, Sigmoid(Add)), Mul(Sigmoid(split:0), act(split:1)))
    new_h     = Mul(act(new_c), Sigmoid(split:3))

``BasicLSTMCell`` and ``LSTMCell`` differ only in the order of the products' operands.
``LSTMCell`` options the fused op cannot express are named in the refusal: peepholes
(``w_f_diag``, ``w_i_diag``, ``w_o_diag``), an output projection (``projection/kernel``) and
clipping of the state or of the projection (``clip_by_value``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....core.fusion.refusal import fail
from ....core.graph.pattern import Op, const, op
from .cell_options import explain_by_dataflow
from .ops import ACTIVATION_NAMES
from .steps import CellForm
from .sums import plus_bias

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope

ADD = ("Add", "AddV2")
ACTIVATIONS = tuple(ACTIVATION_NAMES)
AXIS_1 = const(where=lambda v: v.size == 1 and int(v.reshape(-1)[0]) in (1, -1), description="axis 1")


def gates(x: str, h: str | Op, w: str, b: str, label: str) -> Any:
    """``bias_add(concat([x, h], 1) @ w, b)`` (or ``+ b``), the products of every rnn_cell gate."""
    return plus_bias(op("MatMul", op("ConcatV2", x, h, AXIS_1, N=2, label=f"{label}_concat"), w,
                        transpose_a=False, transpose_b=False, label=f"{label}_matmul"), b)


def _lstm_defs() -> dict[str, Any]:
    def gate(k: int) -> Op:
        return op("Split", AXIS_1, "$gates", port=k, num_split=4, label="split")

    return {
        "out": op("Mul", op(ACTIVATIONS, "$c_out", label="act_c"), op("Sigmoid", gate(3))),
        "c_out": op(ADD, op("Mul", "$c", op("Sigmoid", op(ADD, gate(2), const(label="forget_bias")))),
                    op("Mul", op("Sigmoid", gate(0)), op(ACTIVATIONS, gate(1), label="act_j"))),
        "gates": gates("$x", "$h", "$w", "$b", "gates"),
    }


#: Inputs the names of which give away an option of LSTMCell that BasicLSTMCell cannot express.
_OPTIONS = (
    (("w_f_diag", "w_i_diag", "w_o_diag"), "has peephole connections (LSTMCell use_peepholes=True)"),
    (("projection/kernel",), "projects its output (LSTMCell num_proj)"),
    (("clip_by_value",), "clips its state or projection (LSTMCell cell_clip / proj_clip)"),
)


def explain_lstm_options(scope: "Scope") -> str | None:
    """Why the scope's cell is beyond BasicLSTMCell, seen in its nodes' names and inputs (the names
    LSTMCell gives its options), else in what it computes (:mod:`.cell_options`)."""
    names = set(scope.node_names())
    for n in scope.nodes():
        names.update(i.split(":")[0].lstrip("^") for i in n.input)
    for needles, what in _OPTIONS:
        hits = sorted(n for n in names if any(f"/{needle}" in n for needle in needles))
        if hits:
            return f"the cell {what}, which BasicLSTMCell cannot express (e.g. {hits[0]!r})"
    return explain_by_dataflow(scope)


LSTM_FORM = CellForm(
    name="BasicLSTMCell",
    defs=_lstm_defs,
    roots=("Mul",),
    inputs=("x", "h", "c", "w", "b"),
    outputs=("out", "c_out"),
    state="h",
    explain=explain_lstm_options,
    wants=lambda scope: scope.count("ConcatV2") > 0,
    library="tf.compat.v1 rnn_cell",
    vectors=("b",),
)


def lstm_attrs(step_consts: dict[str, Any], act_types: tuple[str, str]) -> dict[str, Any]:
    """The attributes of one step (forget_bias, activation); refused (``fail``) with the reason."""
    if act_types[0] != act_types[1]:
        fail(f"the cell applies {act_types[1]} to the candidate but {act_types[0]} to the state")
    forget_bias = step_consts.get("forget_bias")
    if forget_bias is None:  # a Keras cell: the forget bias is only an initializer of the bias
        return {"forget_bias": 0.0, "activation": ACTIVATION_NAMES[act_types[0]]}
    if forget_bias.size != 1:
        fail(f"the forget bias is not a scalar (shape {list(forget_bias.shape)})")
    return {"forget_bias": float(forget_bias.reshape(-1)[0]), "activation": ACTIVATION_NAMES[act_types[0]]}
