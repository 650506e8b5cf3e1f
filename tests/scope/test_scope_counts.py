"""Counts a scope answers from the tree's arrays or lazily, against counting by hand on graphs
built by real libraries: a scope's op-type counts are counted over its nodes when first asked
for (``Scope.op_counts``; ``Scope.count`` answers before that from the tree's count columns, and
op-type features, their reasons and checks ask only that), labelled
scopes below a scope from their sorted pre-order numbers, kept until a label changes; a scope's
sub-scopes are a range of the arrays' pre-order once they are built."""
from __future__ import annotations

from collections import Counter

import pytest

from tests.models import layer_norm_models as lm
from tests.models import rnn_models as rm

from scopefusion import NodeOpTypeFeature, ScopeFeature, ScopeGraph
from scopefusion.core.scope.feature_checks import check_feature
from scopefusion.core.scope.patterns import count_holds

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


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_op_type_features_ask_one_count_not_every_count_of_the_scope(graph):
    """Matching, ruling out and explaining an op-type feature (as near misses of big scopes are
    explained) give the answers of the scope's op counts without counting every op of its subtree."""
    sg = ScopeGraph(GRAPHS[graph]().graph_def)
    ops = sg.index.ops
    scopes = sg.tree.scopes
    expected = [Counter(ops[i] for i in s.all_node_indices()) for s in scopes]
    op_type = Counter(ops).most_common(1)[0][0]
    features = [NodeOpTypeFeature(op_type, 1), NodeOpTypeFeature(op_type, 0, 2), NodeOpTypeFeature(op_type, -1),
                NodeOpTypeFeature("NoSuchOp", -1), NodeOpTypeFeature("NoSuchOp", 0)]
    for f in features:
        counts = [c.get(f.op_type, -1) for c in expected]
        assert [f.match(s) for s in scopes] == [count_holds(n, f.num, f.step) for n in counts]
        assert [f.rules_out_subtree(s) for s in scopes] == [f.num != -1 and n == -1 for n in counts]
        assert all(f.explain(s).endswith(f" {f.op_type} node(s) wanted, {max(n, 0)} found")
                   for s, n in zip(scopes, counts, strict=True))
        assert [check_feature(f, s).found for s in scopes] == [str(max(n, 0)) for n in counts]
    assert any(f.match(s) for f in features for s in scopes) and not all(f.match(s) for f in features for s in scopes)
    assert all(s._op_counts is None for s in scopes)


#: Label counts of every kind: exact, none, at least, modulo, with a name.
FEATURES = [ScopeFeature("a", 1), ScopeFeature("a", 0), ScopeFeature("b", 2, at_least=True),
            ScopeFeature("a", 1, step=2), ScopeFeature("b", 0, step=3), ScopeFeature("c", 0),
            ScopeFeature("a", 1, at_least=True, sub_scope_mask="gru")]


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_labelled_scopes_below_are_those_a_walk_finds(graph):
    tree = ScopeGraph(GRAPHS[graph]().graph_def).tree
    scopes = tree.scopes

    def walked(scope, label):
        return sum(s.sub_type == label for s in scope.all_sub_scopes())

    steps = [(scopes[k], "a") for k in range(1, len(scopes), 2)] + [(scopes[k], "b") for k in range(2, len(scopes), 3)]
    steps += [(scopes[k], None) for k in range(1, len(scopes), 4)] + [(scopes[3], "b"), (scopes[3], "b")]
    for step, (scope, label) in enumerate(steps):
        tree.set_label(scope, label)
        if step % 5 == 0 or step == len(steps) - 1:  # counts read between changes
            for s in scopes:
                assert [tree.count_labelled_below(s, lb) for lb in "abc"] == [walked(s, lb) for lb in "abc"]
            for feature in FEATURES:  # and every scope's at once, as the search reads them
                holds = tree.arrays.label_holds(feature, tree.labelled_positions(feature.sub_type))
                assert holds.tolist() == [feature.match(s) for s in tree.arrays.order], feature
    assert any(tree.count_labelled_below(s, "a") for s in scopes)
    tree.clear_labels()
    assert all(s.sub_type is None for s in scopes) and not any(tree.count_labelled_below(scopes[0], lb) for lb in "ab")


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_sub_scopes_from_the_arrays_are_those_walked(graph):
    graph_def = GRAPHS[graph]().graph_def
    walked = ScopeGraph(graph_def).tree  # no arrays: sub-scopes walked
    ranged = ScopeGraph(graph_def).tree
    assert len(ranged.arrays) == len(ranged.scopes) == len(walked.scopes) > 3 and walked._arrays is None
    for a, b in zip(walked.scopes, ranged.scopes, strict=True):
        assert [s.name for s in a.all_sub_scopes()] == [s.name for s in b.all_sub_scopes()]
        assert a.all_node_indices() == b.all_node_indices()
    assert walked._arrays is None
