"""A scope's op-type counts are counted for the whole tree when first asked for
(``Scope.op_counts``); ``Scope.count`` answers before that from the scope's own nodes.  Both
must give what counting each scope's nodes gives, on graphs built by real libraries."""
from __future__ import annotations

from collections import Counter

import pytest

import layer_norm_models as lm
import rnn_models as rm

from scopefusion import ScopeGraph

GRAPHS = {
    "tf.nn.batch_normalization": lambda: lm.hand_written_layer_norm("batch_normalization"),
    "static GRUCell": lambda: rm.static_rnn(rm.gru()),
}


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_counts_are_the_counts_of_each_scopes_nodes(graph):
    sg = ScopeGraph(GRAPHS[graph]().graph_def)
    ops = sg.index.ops
    scopes = sg.tree.scopes
    expected = [Counter(ops[i] for i in s.all_node_indices()) for s in scopes]
    op_types = sorted(set(ops)) + ["NoSuchOp"]
    before = [[s.count(op) for op in op_types] for s in scopes]  # nothing counted for the tree yet
    assert all(s._op_counts is None for s in scopes)
    assert [dict(s.op_counts) for s in scopes] == [dict(c) for c in expected]
    after = [[s.count(op) for op in op_types] for s in scopes]
    assert before == after == [[c[op] for op in op_types] for c in expected]
    assert len(scopes) > 3 and scopes[0].op_counts == Counter(ops)
