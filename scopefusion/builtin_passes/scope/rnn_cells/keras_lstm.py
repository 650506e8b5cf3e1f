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
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....core.graph.pattern import Op, op
from ....core.graph.protos import message_class
from ....core.graph.tensor_codec import make_tensor_proto
from .lstm import ADD, ACTIVATIONS, AXIS_1
from .steps import CellForm

if TYPE_CHECKING:  # pragma: no cover
    from ....core.scope.results import FusionScopesResult
    from ....core.scope.scope_graph import Scope

DT_INT32 = 3
#: Keras's gates i, f, c, o in BasicLSTMCell's order i, j (= c), f, o.
KERAS_TO_IJFO = (0, 2, 1, 3)


def _keras_lstm_defs() -> dict[str, Any]:
    def gate(k: int) -> Op:
        return op("Split", AXIS_1, "$gates", port=k, num_split=4, label="split")

    products = op(ADD, op("MatMul", "$x", "$kernel", transpose_a=False, transpose_b=False, label="x_matmul"),
                  op("MatMul", "$h", "$recurrent_kernel", transpose_a=False, transpose_b=False,
                     label="h_matmul"), commutative=False)
    return {
        "out": op("Mul", op("Sigmoid", gate(3)), op(ACTIVATIONS, "$c_out", label="act_c")),
        "c_out": op(ADD, op("Mul", op("Sigmoid", gate(1)), "$c"),
                    op("Mul", op("Sigmoid", gate(0)), op(ACTIVATIONS, gate(2), label="act_j"))),
        "gates": op("BiasAdd", products, "$bias"),
    }


def explain_keras_options(scope: "Scope", cell: str) -> str | None:
    """Keras cell options the fused op does not take, in the user's terms: a recurrent activation
    other than sigmoid (MatMul but no Sigmoid: e.g. hard_sigmoid, written as other ops) and no bias
    (``use_bias=False``: no BiasAdd)."""
    if not scope.count("MatMul"):
        return None
    if not scope.count("Sigmoid"):
        return (f"the Keras {cell} cell's recurrent_activation is not sigmoid (e.g. hard_sigmoid), and the fused "
                f"cell's gates are sigmoids")
    if not scope.count("BiasAdd"):
        return f"the Keras {cell} cell has no bias (use_bias=False), which the pass does not fuse"
    return None


def _wants_keras(scope: "Scope") -> bool:
    """Keras cells multiply x and h by separate kernels: no concatenation in the scope."""
    return scope.count("ConcatV2") <= 0


def int32_const(value: Any) -> dict[str, Any]:
    import numpy as np

    proto = make_tensor_proto(np.asarray(value, dtype=np.int32))
    AttrValue = message_class("AttrValue")
    return {"value": AttrValue(tensor=proto), "dtype": AttrValue(type=DT_INT32)}


def keras_lstm_inner_graph(result: "FusionScopesResult", attrs: dict[str, Any], T: int) -> None:
    """Fused inputs x, h, c, kernel, recurrent_kernel, bias -> BasicLSTMCell in its own layout."""
    fi = result.fused_input
    result.add_inner_node("axis_0", "Const", [], int32_const(0))
    result.add_inner_node("axis_1", "Const", [], int32_const(1))
    concat = {"T": T, "Tidx": DT_INT32}
    result.add_inner_node("stacked_kernel", "ConcatV2", [fi(3), fi(4), "axis_0"], {**concat, "N": 2})
    result.add_inner_node("kernel_gates", "Split", ["axis_1", "stacked_kernel"], {"T": T, "num_split": 4})
    result.add_inner_node("w", "ConcatV2", [f"kernel_gates:{k}" for k in KERAS_TO_IJFO] + ["axis_1"],
                          {**concat, "N": 4})
    result.add_inner_node("bias_gates", "Split", ["axis_0", fi(5)], {"T": T, "num_split": 4})
    result.add_inner_node("b", "ConcatV2", [f"bias_gates:{k}" for k in KERAS_TO_IJFO] + ["axis_0"],
                          {**concat, "N": 4})
    result.add_inner_node("cell", "BasicLSTMCell", [fi(0), fi(1), fi(2), "w", "b"], {**attrs, "T": T})
    result.set_inner_output(0, "cell:0")
    result.set_inner_output(1, "cell:1")


KERAS_LSTM_FORM = CellForm(
    name="BasicLSTMCell",
    defs=_keras_lstm_defs,
    roots=("Mul",),
    inputs=("x", "h", "c", "kernel", "recurrent_kernel", "bias"),
    outputs=("out", "c_out"),
    state="h",
    explain=lambda scope: explain_keras_options(scope, "LSTM"),
    wants=_wants_keras,
    library="Keras LSTMCell",
    inner_graph=keras_lstm_inner_graph,
)
