"""The rank rules of ``core/graph/shapes.py`` read the length of a constant shape vector from the
graph view's decoded constants when the view hands them over (its passes then read the same
vector's items without decoding it again): the ranks are those the bare rules tell from the
declared shapes."""
from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from scopefusion.core.graph.index import GraphIndex  # noqa: E402
from scopefusion.core.graph.shapes import LENGTH, RankInference  # noqa: E402
from scopefusion.core.graph.view import GraphView  # noqa: E402


@pytest.mark.parametrize("model", ["bert_encoder", "keras_mha"])
def test_ranks_with_the_views_constants_are_the_bare_rules_ranks(model: str) -> None:
    from tests.models import attention_models as att, model_builders as mb

    graph_def = (mb.bert_style_encoder(layers=2) if model == "bert_encoder" else att.keras_mha()).graph_def
    index = GraphIndex(graph_def)
    view = GraphView(index)
    hooked, bare = view.rank_inference(), RankInference(index)
    tensors = [(i, port) for i in range(len(index)) for port in (0, 1, LENGTH)]
    ranks = [hooked.rank_at(*t) for t in tensors]
    assert ranks == [bare.rank_at(*t) for t in tensors]
    reshapes = [i for i, op in enumerate(index.ops) if op == "Reshape"]
    assert reshapes and all(hooked.rank_at(i, 0) is not None for i in reshapes)
    # the shape vectors' values were decoded once, for their length, and are kept by the view
    targets = [index.inputs[i][1][0] for i in reshapes if index.ops[index.inputs[i][1][0]] == "Const"]
    assert targets and all(t in view._const_values for t in targets)
