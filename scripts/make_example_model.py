"""Rebuild ``scopefusion/examples/bert_tiny.pb``, the model ``scopefusion run``
fuses when no model is given: a two-layer BERT-style encoder whose layer
normalizations come from ``tf_slim.layers.layer_norm``, frozen to constants."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.models.model_builders import bert_style_encoder  # noqa: E402

from scopefusion.core.graph.io import save_graph  # noqa: E402


def main() -> None:
    model = bert_style_encoder(layers=2, hidden=64, heads=4, seq=8, batch=2, seed=0)
    dest = save_graph(model.graph_def, ROOT / "scopefusion" / "examples" / "bert_tiny.pb")
    print(f"wrote {dest}: {len(model.graph_def.node)} nodes, {model.layer_norms} layer norms")


if __name__ == "__main__":
    main()
