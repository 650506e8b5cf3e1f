"""The C extension ``native/_scopes.c`` works out the scope tree's names as the pure-Python path of
``core/scope/layout.py`` does: the same scopes created in the same order, the same parents, depths
and node scopes, and so the same layout, on random names (nested, repeated, out of order, odd
slashes, non-ASCII, thousands of scopes deep, none at all) and on real graphs."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.helpers.native_paths import assert_same_on_both_paths, extension, using
from tests.models import rnn_models as rm

from scopefusion.core.scope.layout import ScopeLayout, _scopes_of

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
PARTS = ["a", "b", "LayerNorm", "LayerNorm_1", "dense", "é", "ß/", "", "/", "𝔁", "x:0"]


def random_names(seed: int) -> list[str]:
    rng = random.Random(seed)
    count = rng.choice([0, 1, rng.randint(2, 80)])
    names: list[str] = []
    for _ in range(count):
        if names and rng.random() < 0.4:  # a neighbour of the node before (the common case)
            base = names[-1].rpartition("/")[0]
            names.append(f"{base}/n{len(names)}" if base else f"n{len(names)}")
        else:
            names.append("/".join(rng.choice(PARTS) for _ in range(rng.randint(1, 6))))
    return names


def _scope_tables(names: list[str]) -> tuple:
    created, parent, depth, node_created = _scopes_of(names)
    assert node_created.dtype == np.int64
    return created, parent, depth, node_created.tolist()


def _layout_tables(names: list[str]) -> tuple:
    layout = ScopeLayout(names)
    arrays = (layout.position, layout.created, layout.parent, layout.depth, layout.end, layout.node_scope,
              layout.members, layout.starts)
    return layout.names_created, layout.by_name, layout.names(), [a.tolist() for a in arrays]


@pytest.mark.parametrize("seed", range(80))
def test_random_names(seed):
    names = random_names(seed)
    created, _, _, node_created = assert_same_on_both_paths(lambda: _scope_tables(names))
    assert len(node_created) == len(names) and next(iter(created), "") == ""
    assert_same_on_both_paths(lambda: _layout_tables(names))


def test_names_thousands_of_scopes_deep():
    names = ["/".join(f"s{k}" for k in range(5000)), "top", "/".join(f"s{k}" for k in range(3000)) + "/x"]
    created, parent, depth, _ = assert_same_on_both_paths(lambda: _scope_tables(names))
    assert len(created) == 5000 and max(depth) == 4999


def test_a_name_that_is_no_string_raises():
    """(A GraphDef's names are strings; the pure-Python path raises AttributeError, the C path TypeError.)"""
    with using(False), pytest.raises(AttributeError):
        _scopes_of(["a", 3])
    with using(True), pytest.raises(TypeError, match="a node name must be a str, not int"):
        _scopes_of(["a", 3])


def _bench_bert_names() -> list[str]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from bench_graphs import make_generator
    finally:
        sys.path.remove(str(BENCHMARKS))
    generator = make_generator("bert", hidden=16, heads=4, batch=2, seq=8, seed=0)
    return [node.name for node in generator.build(3).graph_def.node]


@pytest.mark.parametrize("graph", ["bert encoder", "static GRUCell", "benchmark bert"])
def test_real_graphs(graph, bert_encoder):
    if graph == "bert encoder":
        names = [node.name for node in bert_encoder.graph_def.node]
    elif graph == "static GRUCell":
        names = [node.name for node in rm.static_rnn(rm.gru()).graph_def.node]
    else:
        names = _bench_bert_names()
    names_created, _, _, _ = assert_same_on_both_paths(lambda: _layout_tables(names))
    assert len(names_created) > 10
    assert extension("_scopes").scope_tree(names)[0] == _scopes_of(names)[0]
