"""ScopeLayerNormPass on the TensorFlow model classes of ``transformers``.

Their tf_keras ``LayerNormalization`` gives its axis as a positive index (``[2]``), and the
input's rank comes through ops the local rank rules do not follow (an embedding lookup, a
residual add): TensorFlow's own shape inference tells the rank, so the axes are checked exactly.
"""
from __future__ import annotations

from tests.models import activation_models as am

import scopefusion

REGISTRY = scopefusion.load_registry(autoload=False)


def test_transformers_bert_layer_norms_are_all_fused_and_verified():
    m = am.transformers_bert(num_layers=2)
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    pr = result.report.pass_report("ScopeLayerNormPass")
    assert pr.refused == []
    # the embeddings' layer norm and two per layer (attention output, feed-forward output)
    assert len(pr.fused) == 5 and result.report.fused_count("LayerNorm") == 5
    nodes = [n for n in result.fused_graph_def.node if n.op == "LayerNorm"]
    assert all(n.attr["begin_norm_axis"].i == 2 and n.attr["begin_params_axis"].i == -1 for n in nodes)
    check = scopefusion.verify(m.graph_def, result.fused_graph_def, fused_ops=REGISTRY.fused_ops,
                               int_range=m.int_range, runs=2)
    assert check.passed, check.table()
