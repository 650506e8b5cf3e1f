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
``LSTMCell``'s options are forms of their own (:data:`LSTM_OPTION_FORMS`), each combination of:
peepholes (the input and forget gates add ``w_i_diag * c``, ``w_f_diag * c``, the output gate
``w_o_diag * new_c``), ``cell_clip`` (``new_c`` clipped, ``Maximum(Minimum(new_c, clip), -clip)``),
``num_proj`` (the output multiplied by a projection matrix) and ``proj_clip`` (that product
clipped): the fused op takes the peephole weights and the projection as optional inputs and the
clips as attributes.  The plain form refuses a scope with any of them, naming it; the forms with
options read such a scope.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ....core.fusion.refusal import fail
from ....core.graph.pattern import Op, const, one_of, op
from .cell_options import explain_by_dataflow
from .gate_parts import AXIS_1, activated_part
from .ops import ACTIVATION_NAMES
from .steps import CellForm
from .sums import plus_bias

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.scope_graph import Scope

ADD = ("Add", "AddV2")
ACTIVATIONS = tuple(ACTIVATION_NAMES)


def gates(x: str, h: str | Op, w: str, b: str, label: str) -> Any:
    """``bias_add(concat([x, h], 1) @ w, b)`` (or ``+ b``), the products of every rnn_cell gate."""
    return plus_bias(op("MatMul", op("ConcatV2", x, h, AXIS_1, N=2, label=f"{label}_concat"), w,
                        transpose_a=False, transpose_b=False, label=f"{label}_matmul"), b)


def _clipped(value: Any, name: str) -> Op:
    """``clip_by_value(value, min, max)`` as TensorFlow writes it: ``Maximum(Minimum(value, max), min)``."""
    return op("Maximum", op("Minimum", value, const(label=f"{name}_max")), const(label=f"{name}_min"), label=name)


def _plus_peephole(gate: Any, weight: str, state: str) -> Op:
    """``gate + weight * state``: a peephole (``weight`` a vector, ``state`` the cell state)."""
    return op(ADD, gate, op("Mul", f"${weight}", state, label=f"{weight}_product"))


@dataclass(frozen=True)
class LstmOptions:
    """Which of LSTMCell's options a step has (the fused op carries each)."""

    peepholes: bool = False
    cell_clip: bool = False
    projection: bool = False
    proj_clip: bool = False

    @property
    def optional_inputs(self) -> tuple[str, ...]:
        return (PEEPHOLES if self.peepholes else ()) + (("proj",) if self.projection else ())

    @property
    def roots(self) -> tuple[str, ...]:
        return ("Maximum",) if self.proj_clip else ("MatMul",) if self.projection else ("Mul",)

    def __str__(self) -> str:
        names = [n for n, on in (("peepholes", self.peepholes), ("cell_clip", self.cell_clip),
                                 ("num_proj", self.projection), ("proj_clip", self.proj_clip)) if on]
        return ", ".join(names) or "no option"


#: the peephole weights, in the fused op's order
PEEPHOLES = ("w_i_diag", "w_f_diag", "w_o_diag")


def _lstm_defs(options: LstmOptions | None = None) -> dict[str, Any]:
    options = options or LstmOptions()

    def gate(k: int) -> Op:
        return op("Split", AXIS_1, "$gates", port=k, num_split=4, label="split")

    def sigmoid(k: int) -> Any:  # the gate's sigmoid, before or after the split
        return activated_part("Sigmoid", "$gates", k, 4, split_label="split")

    forget: Any = op(ADD, gate(2), const(label="forget_bias"))
    i_gate, o_gate = sigmoid(0), sigmoid(3)
    if options.peepholes:  # f + forget_bias + w_f * c in any grouping; i + w_i * c; o + w_o * c'
        peep_f = op("Mul", "$w_f_diag", "$c", label="w_f_diag_product")
        forget = one_of(op(ADD, forget, peep_f),
                        op(ADD, op(ADD, gate(2), peep_f), const(label="forget_bias")),
                        op(ADD, gate(2), op(ADD, const(label="forget_bias"), peep_f)))
        i_gate = op("Sigmoid", _plus_peephole(gate(0), "w_i_diag", "$c"))
        o_gate = op("Sigmoid", _plus_peephole(gate(3), "w_o_diag", "$c_out"))
    new_c = op(ADD, op("Mul", "$c", op("Sigmoid", forget)),
               op("Mul", i_gate, activated_part(ACTIVATIONS, "$gates", 1, 4, split_label="split", act_label="act_j")))
    output: Any = op("Mul", op(ACTIVATIONS, "$c_out", label="act_c"), o_gate)
    if options.projection:
        output = op("MatMul", output, "$proj", transpose_a=False, transpose_b=False, label="projection")
    if options.proj_clip:
        output = _clipped(output, "proj_clip")
    return {
        "out": output,
        "c_out": _clipped(new_c, "cell_clip") if options.cell_clip else new_c,
        "gates": gates("$x", "$h", "$w", "$b", "gates"),
    }


#: Inputs the names of which give away an option of LSTMCell that BasicLSTMCell cannot express.
_OPTIONS = (
    (("w_f_diag", "w_i_diag", "w_o_diag"), "has peephole connections (LSTMCell use_peepholes=True)"),
    (("projection/kernel",), "projects its output (LSTMCell num_proj)"),
    (("clip_by_value",), "clips its state or projection (LSTMCell cell_clip / proj_clip)"),
)


def explain_lstm_options(scope: "Scope") -> str | None:
    """Why the scope's cell is beyond BasicLSTMCell without options, seen in its nodes' names and
    inputs (the names LSTMCell gives its options), else in what it computes (:mod:`.cell_options`):
    the forms with options (:data:`LSTM_OPTION_FORMS`) read such a scope."""
    names = set(scope.node_names())
    for n in scope.nodes():
        names.update(i.split(":")[0].lstrip("^") for i in n.input)
    for needles, what in _OPTIONS:
        hits = sorted(n for n in names if any(f"/{needle}" in n for needle in needles))
        if hits:
            return f"the cell {what}, and no form of BasicLSTMCell with options reads it (e.g. {hits[0]!r})"
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


def _option_form(options: LstmOptions) -> CellForm:
    return replace(LSTM_FORM, defs=partial(_lstm_defs, options), roots=options.roots,
                   inputs=LSTM_FORM.inputs + options.optional_inputs, explain=lambda scope: None,
                   library=f"tf.compat.v1 rnn_cell LSTMCell ({options})",
                   vectors=("b",) + (PEEPHOLES if options.peepholes else ()), optional=options.optional_inputs)


#: LSTMCell with its options (peepholes, cell_clip, num_proj, proj_clip), each combination; the
#: fused op carries them as optional inputs and attributes
LSTM_OPTION_FORMS = tuple(
    _option_form(LstmOptions(peepholes, cell_clip, projection, proj_clip))
    for peepholes in (False, True) for cell_clip in (False, True) for projection, proj_clip in
    ((False, False), (True, False), (True, True)) if peepholes or cell_clip or projection)


def lstm_attrs(step_consts: dict[str, Any], act_types: tuple[str, str]) -> dict[str, Any]:
    """The attributes of one step (forget_bias, activation); refused (``fail``) with the reason."""
    if act_types[0] != act_types[1]:
        fail(f"the cell applies {act_types[1]} to the candidate but {act_types[0]} to the state")
    forget_bias = step_consts.get("forget_bias")
    clips = {name: _clip_bound(step_consts, name) for name in ("cell_clip", "proj_clip")
             if f"{name}_max" in step_consts}
    if forget_bias is None:  # a Keras cell: the forget bias is only an initializer of the bias
        return {"forget_bias": 0.0, "activation": ACTIVATION_NAMES[act_types[0]], **clips}
    if forget_bias.size != 1:
        fail(f"the forget bias is not a scalar (shape {list(forget_bias.shape)})")
    return {"forget_bias": float(forget_bias.reshape(-1)[0]), "activation": ACTIVATION_NAMES[act_types[0]], **clips}


def _clip_bound(step_consts: dict[str, Any], name: str) -> float:
    """The bound of a symmetric clip (``clip_by_value(v, -bound, bound)``, bound > 0); refused
    (``fail``) for any other range, which the fused op's ``cell_clip`` / ``proj_clip`` cannot say."""
    low, high = step_consts[f"{name}_min"], step_consts[f"{name}_max"]
    if low.size != 1 or high.size != 1 or float(high.reshape(-1)[0]) <= 0 \
            or float(low.reshape(-1)[0]) != -float(high.reshape(-1)[0]):
        fail(f"the cell clips to [{low.reshape(-1)[:1]}, {high.reshape(-1)[:1]}], not to [-bound, bound] with a "
             f"scalar bound > 0, which is what {name} says")
    return float(high.reshape(-1)[0])
