"""Ranks that follow from a subgraph's rules and the ranks it reads (``RankInference.closure_ranks``),
and the layer-norm pass taking them as inferred for scopes alike to one it analysed.

What must hold: a closure's ranks are those the rules infer tensor by tensor; no closure when the
rules loop, read an outer tensor's length or an outer rank not inferred yet, or read a value the
caller does not vouch for; a recalled scope's ranks are taken only when its outer ranks are the
first scope's and none of its own is inferred yet, and every rank taken is the one inferred
tensor by tensor.
"""
from __future__ import annotations

from tests.helpers.graph_helpers import make_graph
from tests.passes.norm.test_layer_norm_structure import built

from scopefusion.builtin_passes.scope import layer_norm as ln_pass
from scopefusion.builtin_passes.scope.layer_norm.structure import AnalysisCache
from scopefusion.core.graph.index import GraphIndex
from scopefusion.core.graph.shapes import LENGTH, RankInference
from scopefusion.core.scope.scope_graph import ScopeGraph

LAYERS = ["ln0", "ln1", "ln2", "ln3", "ln4", "ln5", "ln_flat"]


def _computed_shapes() -> ScopeGraph:
    """Keras' Tensordot: a reshape to a shape computed from ``Shape(x)``, and a mean over a
    constant axis."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, None, 7], name="x")
        flat = tf.matmul(tf.reshape(x, [-1, 7]), tf.ones([7, 4]), name="flat")
        shape = tf.concat([tf.gather(tf.shape(x), [0, 1]), [4]], axis=0, name="shape")
        dense = tf.reshape(flat, shape, name="dense")
        tf.reduce_mean(tf.tanh(dense, name="tanh"), axis=[2], name="mean")
    return ScopeGraph(graph.as_graph_def())


def _inside(sg: ScopeGraph, *names: str):
    indices = {sg.index.index[n] for n in names}
    return indices.__contains__


def _tensor(sg: ScopeGraph, name: str, port: int = 0) -> tuple[int, int]:
    return sg.index.index[name], port


def test_a_closure_gives_the_ranks_inferred_tensor_by_tensor():
    sg = _computed_shapes()
    ranks = sg.rank_inference()
    mean, dense = _tensor(sg, "mean"), _tensor(sg, "dense")
    # the reshape's rank: its computed shape's length, from the gathered indices' shape
    inner = [n.name for n in sg.index.nodes if n.name not in ("x", "flat")]
    closure = ranks.closure_ranks([dense], _inside(sg, *inner), lambda i: True)
    assert closure is not None and closure.ranks == {dense: 3} and closure.boundary == {}
    assert _tensor(sg, "shape_1", LENGTH) in closure.inner and dense in closure.inner
    # the mean's: from the reshape's rank, inferred first, and its axis constant's value
    ranks.rank_at(*dense)
    closure = ranks.closure_ranks([mean], _inside(sg, "mean", "tanh", "mean/reduction_indices"), lambda i: True)
    assert closure is not None and closure.ranks == {mean: 2} and closure.boundary == {dense: 3}
    fresh = RankInference(sg.index)
    assert fresh.rank_at(*mean) == 2 and fresh.rank_at(*dense) == 3
    assert not ranks.inferred(*mean)[0]  # found, not taken as inferred


def test_no_closure_where_the_ranks_do_not_follow_from_it():
    sg = _computed_shapes()
    ranks = sg.rank_inference()
    mean, dense = _tensor(sg, "mean"), _tensor(sg, "dense")
    inside = _inside(sg, "mean", "tanh", "mean/reduction_indices")
    assert ranks.closure_ranks([mean], inside, lambda i: True) is None  # the reshape's rank not inferred yet
    ranks.rank_at(*dense)
    assert ranks.closure_ranks([mean], inside, lambda i: True) is not None
    # the mean's rank reads its axis constant's value
    axes = sg.index.index["mean/reduction_indices"]
    assert ranks.closure_ranks([mean], inside, lambda i: i != axes) is None
    # the reshape's rank is its shape's length, here an outer tensor's
    assert ranks.closure_ranks([dense], _inside(sg, "dense"), lambda i: True) is None


def test_no_closure_through_a_loop():
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

    shape = AttrValue()
    shape.shape.dim.add(size=2)
    index = GraphIndex(make_graph([
        ("in", "Placeholder", [], {"shape": shape}),
        ("a", "AddV2", ["in", "b"]),
        ("b", "Identity", ["a"]),
    ]), validate=False)
    ranks = RankInference(index)
    ranks.rank_at(index.index["in"], 0)
    b = (index.index["b"], 0)
    inside = {index.index["a"], index.index["b"]}.__contains__
    assert ranks.closure_ranks([b], inside, lambda i: True) is None
    assert ranks.closure_ranks([b], {b[0]}.__contains__, lambda i: True) is None  # a not inferred


def _analysed(sg: ScopeGraph, before=lambda sg, name: None) -> AnalysisCache:
    cache = AnalysisCache(sg)
    scopes = {s.name: s for s in sg.root.all_sub_scopes()}
    for name in LAYERS:
        before(sg, name)
        cache.analyse(scopes[name], ln_pass.analyse)
    return cache


def _agree_with_a_fresh_inference(sg: ScopeGraph) -> int:
    ranks, fresh = sg.rank_inference(), RankInference(sg.index, sg.same_shape)
    known = 0
    for i in range(len(sg.index)):
        inferred, rank = ranks.inferred(i, 0)
        if inferred:
            assert fresh.rank_at(i, 0) == rank, sg.index.names[i]
            known += 1
    return known


def test_recalled_layer_norms_take_their_ranks_from_the_first():
    """ln3 and ln5 are ln1 again: their outputs' ranks are taken as soon as they are recalled,
    before the next layer's description walks to them, and they are the ranks inferred."""
    sg = ScopeGraph(built("moments").graph_def)
    taken = {}

    def note(sg, name):
        if name in ("ln4", "ln_flat"):  # the layer after ln3, after ln5
            before = {"ln4": "ln3", "ln_flat": "ln5"}[name]
            taken[before] = sg.rank_inference().inferred(*_tensor(sg, f"{before}/batchnorm/add_1"))

    cache = _analysed(sg, note)
    assert cache.recalled == 2
    assert taken == {"ln3": (True, 3), "ln5": (True, 3)}
    assert _agree_with_a_fresh_inference(sg) > 20


def test_a_recalled_layer_norm_with_a_rank_inferred_already_takes_none():
    """ln3's ``batchnorm/mul`` is inferred before ln3 is recalled: its ranks are left to the rules."""
    sg = ScopeGraph(built("moments").graph_def)
    taken = {}

    def note(sg, name):
        if name == "ln3":
            sg.rank_inference().rank_at(*_tensor(sg, "ln3/batchnorm/mul"))
        if name == "ln4":
            taken["ln3"] = sg.rank_inference().inferred(*_tensor(sg, "ln3/batchnorm/add_1"))[0]

    cache = _analysed(sg, note)
    assert cache.recalled == 2 and taken == {"ln3": False}
    assert _agree_with_a_fresh_inference(sg) > 20


def test_none_inferred_tells_whether_any_rank_is_inferred():
    sg = _computed_shapes()
    ranks = sg.rank_inference()
    mean, tanh = _tensor(sg, "mean"), _tensor(sg, "tanh")
    assert ranks.none_inferred([mean, tanh])
    ranks.rank_at(*tanh)
    assert not ranks.none_inferred([mean, tanh]) and ranks.none_inferred([mean])
