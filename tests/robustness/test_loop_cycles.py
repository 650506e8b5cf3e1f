"""A TF1 loop's back edge (NextIteration -> Merge) is the only cycle a graph may hold, and only where
TensorFlow's import accepts it: a Merge becomes ready once its control inputs and one data input are."""
from __future__ import annotations

import pytest
from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2

from scopefusion.core.errors import GraphValidationError
from scopefusion.core.graph.index import GraphIndex

_CONST = 'op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } ' \
         'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } }'


def _graph(text: str) -> graph_pb2.GraphDef:
    return text_format.Parse(text, graph_pb2.GraphDef())


def _tf_imports(graph_def: graph_pb2.GraphDef) -> bool:
    import tensorflow as tf

    try:
        with tf.Graph().as_default():
            tf.graph_util.import_graph_def(graph_def, name="")
    except (ValueError, tf.errors.InvalidArgumentError):
        return False
    return True


def _loop(merge_inputs: str) -> graph_pb2.GraphDef:
    """Merge -> Identity -> NextIteration, the Merge reading ``merge_inputs``."""
    return _graph(f"""
        node {{ name: "c" {_CONST} }}
        node {{ name: "enter" op: "Enter" input: "c" attr {{ key: "T" value {{ type: DT_FLOAT }} }}
               attr {{ key: "frame_name" value {{ s: "f" }} }} }}
        node {{ name: "merge" op: "Merge" {merge_inputs} attr {{ key: "T" value {{ type: DT_FLOAT }} }}
               attr {{ key: "N" value {{ i: 2 }} }} }}
        node {{ name: "body" op: "Identity" input: "merge" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
        node {{ name: "next" op: "NextIteration" input: "body" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
        node {{ name: "next_2" op: "NextIteration" input: "body" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
    """)


def test_a_loop_entered_from_outside_is_no_cycle():
    graph_def = _loop('input: "enter" input: "next"')
    assert _tf_imports(graph_def)
    order = GraphIndex(graph_def).topological_order()
    assert len(order) == len(graph_def.node)


@pytest.mark.parametrize("inputs", ['input: "next" input: "next_2"', 'input: "next" input: "body"'])
def test_a_cycle_closed_through_a_merge_nothing_outside_reaches_is_refused(inputs):
    """Every data input of the Merge comes from inside the cycle: TensorFlow refuses the graph."""
    graph_def = _loop(inputs)
    assert not _tf_imports(graph_def)
    with pytest.raises(GraphValidationError, match="cycle"):
        GraphIndex(graph_def).topological_order()
