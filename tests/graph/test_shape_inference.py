"""scopefusion's own shape propagation (``core/graph/shape_inference.py``) against TensorFlow's
shape inference on the real models of the suite: wherever both tell a rank or a dimension, they
tell the same; and on these models no op lies outside the shape table.  Models whose layers run
in library functions (functional loops, calls of a ``tf.function``) are compared inside the
called bodies too, TensorFlow instantiating each body with the input shapes we followed it with."""
from __future__ import annotations

from typing import Any, Callable

import pytest

tf = pytest.importorskip("tensorflow")

from tests.helpers.shape_compare import ShapeComparison, compare_function_bodies, compare_shapes  # noqa: E402


def _builders() -> dict[str, Callable[[], Any]]:
    from tests.models import (
        activation_models as act, attention_models as att, concat_models as cat, conv_models as conv,
        corpus_models as corpus, group_norm_models as gn, layer_norm_models as ln, loop_models as loops,
        model_builders as mb,
        rms_norm_models as rms, rnn_models as rnn,
    )
    return {
        "tf_slim_bert_encoder": lambda: mb.bert_style_encoder(layers=2),
        "transformers_bert": lambda: att.transformers_bert(),
        "transformers_gpt2": lambda: att.transformers_gpt2(),
        "transformers_t5": lambda: att.transformers_t5(),
        "transformers_vit": lambda: att.transformers_vit(),
        "transformers_mistral": lambda: att.transformers_mistral(),
        "transformers_clip_text": lambda: att.transformers_clip_text(),
        "keras_mha": lambda: att.keras_mha(),
        "tf_keras_mha_causal": lambda: att.keras_mha("causal", library="tf_keras"),
        "openai_gpt2": lambda: att.openai_gpt2(),
        "gpt2_mlp": lambda: act.gpt2_mlp(),
        "tf_keras_dense_rank3": lambda: act.keras_dense("tf_keras", 3),
        "keras_layer_norm": lambda: ln.keras_ops_layer_normalization(),
        "transformers_layer_norm": lambda: ln.transformers_functional_layernorm(),
        "keras_rms_norm": lambda: rms.keras_rms_normalization(),
        "keras_group_norm": lambda: gn.keras_group_normalization(),
        "tf_keras_group_norm": lambda: gn.tf_keras_group_normalization(),
        "keras_convnet": lambda: conv.keras_convnet("keras"),
        "tf_keras_convnet_channels_first": lambda: conv.keras_convnet("tf_keras", "channels_first"),
        "keras_mobilenet_v2": lambda: corpus.keras_mobilenet_v2(),
        "slim_inception_v3": lambda: cat.slim_inception_v3(),
        "tf_keras_lstm_unrolled": lambda: rnn.keras_rnn("tf_keras", "LSTM"),
        "keras_gru_unrolled": lambda: rnn.keras_rnn("keras", "GRU"),
        "static_rnn_basic_lstm": lambda: rnn.static_rnn(rnn.basic_lstm()),
        "dynamic_rnn_basic_lstm_loops": lambda: loops.dynamic_rnn(rnn.basic_lstm()),
        "tf_keras_lstm_gru_loops": lambda: rnn.keras_lstm_gru(),
        **_function_builders(),
    }


def _function_builders() -> dict[str, Callable[[], Any]]:
    """Models with library functions (see ``tests/models/function_models.py``)."""
    from tests.models import function_models as fm, rnn_models as rnn

    return {
        "keras_lstm_while": lambda: fm.keras_loop("keras", "LSTM"),
        "tf_keras_gru_while": lambda: fm.keras_loop("tf_keras", "GRU"),
        "keras_bidirectional_lstm_while": lambda: fm.keras_loop("keras", "LSTM", bidirectional=True,
                                                                unknown_batch=True),
        "dynamic_rnn_stateless_while": lambda: fm.dynamic_rnn(rnn.basic_lstm()),
        "called_dense_gelu_layer_norm": lambda: fm.called_dense_gelu_layer_norm(),
        "called_dynamic_rnn": lambda: fm.called_dynamic_rnn(rnn.basic_lstm()),
        "static_rnn_sequence_length_if": lambda: rnn.static_rnn(rnn.basic_lstm(), sequence_length=[3] * rnn.BATCH),
    }


BUILDERS = list(_builders())


@pytest.fixture(scope="session")
def compared() -> Callable[[str], ShapeComparison]:
    """Each model built and compared once per session."""
    cache: dict[str, ShapeComparison] = {}
    builders = _builders()

    def get(name: str) -> ShapeComparison:
        if name not in cache:
            cache[name] = compare_shapes(builders[name]().graph_def)
        return cache[name]
    return get


@pytest.mark.parametrize("name", BUILDERS)
def test_our_shapes_equal_tensorflows_wherever_both_tell(name: str, compared: Callable[[str], ShapeComparison]) -> None:
    result = compared(name)
    # (TensorFlow leaves a TF1 loop's Merge, and what follows it, without a rank: half those tensors)
    assert result.tensors > 4 and result.both > result.tensors // 3, (result.tensors, result.both)
    assert result.disagree == []


@pytest.mark.parametrize("name", BUILDERS)
def test_no_op_of_a_real_model_is_outside_the_table(name: str, compared: Callable[[str], ShapeComparison]) -> None:
    result = compared(name)
    assert result.outside == set()
    if not name.endswith("_loops"):  # TF1 loops: TensorFlow relaxes a Merge over its back edge
        assert result.tf_knows_more == []


FUNCTION_BUILDERS = list(_function_builders())


@pytest.mark.parametrize("name", FUNCTION_BUILDERS)
def test_our_shapes_equal_tensorflows_inside_the_called_functions(name: str) -> None:
    result, followed = compare_function_bodies(_function_builders()[name]().graph_def)
    assert followed >= 1 and result.tensors > 30, (followed, result.tensors)
    assert result.disagree == []
    assert result.outside == set()
    assert result.tf_knows_more == []


@pytest.mark.parametrize("name", ["tf_keras_lstm_gru_loops"])  # lowered to TF1 loops (Merge, Switch ...)
def test_every_tensor_of_a_tf1_loop_has_a_rank(name: str) -> None:
    """A loop variable's Merge is relaxed over its back edge (TensorFlow's import leaves it, and
    everything it feeds in the loop, without a rank)."""
    from scopefusion.core.graph.index import GraphIndex
    from scopefusion.core.graph.view import GraphView

    index = GraphIndex(_builders()[name]().graph_def)
    inference = GraphView(index).shape_inference()
    loop = [i for i, op in enumerate(index.ops) if op in ("Merge", "Switch", "NextIteration", "Exit")]
    assert any(index.ops[i] == "Merge" for i in loop)
    assert [index.names[i] for i in loop if inference.shape(i, 0) is None] == []


@pytest.mark.parametrize("name", ["tf_slim_bert_encoder", "transformers_gpt2", "tf_keras_lstm_gru_loops",
                                  "called_dynamic_rnn"])
def test_shapes_do_not_depend_on_the_order_they_are_asked_in(name: str) -> None:
    """A constant's shapes are worked out when a rule first reads them, a node whose producers are
    known at once: asking every tensor from the outputs back, or from the inputs on, or only the
    graph's last node's, gives the same shapes, values and op types outside the table."""
    from scopefusion.core.graph.index import GraphIndex
    from scopefusion.core.graph.view import GraphView

    index = GraphIndex(_builders()[name]().graph_def)
    everything = range(len(index))
    told = []
    for order in (list(everything), list(reversed(everything)), [len(index) - 1]):
        inference = GraphView(index).shape_inference()
        for i in order:
            inference.shape(i, 0)
        told.append(([inference.shape(i, port) for i in everything for port in range(3)],
                     [inference.missing(i) for i in everything],
                     [inference.value(i, 0) for i in everything]))
    assert told[0] == told[1] == told[2]
    assert any(shape is not None for shape in told[0][0])
