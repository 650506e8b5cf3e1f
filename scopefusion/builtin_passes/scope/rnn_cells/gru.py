"""The step of TensorFlow's ``rnn_cell.GRUCell`` as written in the graph::

    gates     = Sigmoid(BiasAdd(MatMul(ConcatV2(x, h, 1), gates/kernel), gates/bias))
    r, u      = Split(1, gates)
    candidate = act(BiasAdd(MatMul(ConcatV2(x, Mul(r, h), 1), candidate/kernel), candidate/bias))
    new_h     = AddV2(Mul(u, h), Mul(Sub(1, u), candidate))
"""
from __future__ import annotations

from typing import Any

from ....core.graph.pattern import const, op
from .gate_parts import activated_part
from .lstm import ADD, ACTIVATIONS, gates
from .ops import ACTIVATION_NAMES
from .steps import CellForm


def _gru_defs() -> dict[str, Any]:
    def gate(k: int) -> Any:  # the sigmoid before the split or after it (tflearn's GRUCell)
        return activated_part("Sigmoid", "$gates", k, 2, split_label="split")

    return {
        "out": op(ADD, op("Mul", "$u", "$h"), op("Mul", op("Sub", const(1.0), "$u"), "$candidate")),
        "u": gate(1),
        "candidate": op(ACTIVATIONS, gates("$x", op("Mul", gate(0), "$h"), "$wc", "$bc", "candidate"),
                        label="act"),
        "gates": gates("$x", "$h", "$wg", "$bg", "gates"),
    }


def explain_gru_options(scope: Any) -> str | None:
    """rnn_cell.GRUCell has no option beyond its activation."""
    return None


GRU_FORM = CellForm(
    name="GRUCell",
    defs=_gru_defs,
    roots=ADD,
    inputs=("x", "h", "wg", "bg", "wc", "bc"),
    outputs=("out",),
    state="h",
    explain=explain_gru_options,
    wants=lambda scope: scope.count("ConcatV2") > 0,
    library="tf.compat.v1 rnn_cell",
    vectors=("bg", "bc"),
)


def gru_attrs(act_type: str) -> dict[str, Any]:
    return {"activation": ACTIVATION_NAMES[act_type]}
