"""An LSTM whose initial h and c are one tensor (``state = tf.zeros(...)``; ``(state, state)``, or
two zero states a graph optimizer merged into one constant): the fused cell of the first step takes
that tensor at both its h and c inputs, told apart by which read of it the cell's form declares as
which (the concatenation reads h, the forget gate's product c), and every step is fused."""
from __future__ import annotations

import functools

import pytest
import tensorflow as tf

from tests.models import rnn_models as rm
from tests.helpers.verify import assert_verifies
from tests.passes.rnn.test_rnn_cells import LSTM, S, fuse

from scopefusion.testing import assert_fused

#: form -> builder
FORMS = {
    "static_rnn BasicLSTMCell": lambda: rm.static_rnn_shared_state(rm.basic_lstm()),
    "static_rnn LSTMCell": lambda: rm.static_rnn_shared_state(rm.lstm(), inputs=3),
    "Keras 3 LSTM(unroll=True)": lambda: rm.keras_lstm_shared_state("keras"),
    "tf_keras LSTM(unroll=True)": lambda: rm.keras_lstm_shared_state("tf_keras"),
}


@functools.cache
def model(form: str) -> rm.RnnModel:
    return FORMS[form]()


def zeros_of(m: rm.RnnModel) -> str:
    """The one constant the initial h and c both are."""
    (name,) = [n.name for n in m.graph_def.node if n.op == "Const" and n.name.rsplit("/", 1)[-1] == "zeros"]
    return name


@pytest.mark.parametrize("form", list(FORMS))
def test_one_tensor_for_h_and_c_is_both_inputs_of_the_first_cell(form):
    m = model(form)
    zeros = zeros_of(m)
    readers = {n.name for n in m.graph_def.node if zeros in n.input}
    assert len(readers) >= 2  # the h and the c of the first step read the one constant
    result = fuse(m, [LSTM])
    assert result.report.refused == []
    cells = assert_fused(result, "BasicLSTMCell", S, T=tf.float32.as_datatype_enum)
    first = [c for c in cells if list(c.input)[1:3] == [zeros, zeros]]
    assert len(first) == 1, [list(c.input) for c in cells]  # x, h, c: h and c are the one tensor
    later = [c for c in cells if c is not first[0]]
    assert all(zeros not in c.input for c in later)  # the later steps read the step before
    assert assert_verifies(m, result, every_output=True) < 1e-5
