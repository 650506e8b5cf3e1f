"""Shared fixtures: real graphs are built once per session."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).parent))

from model_builders import FrozenModel, bert_style_encoder  # noqa: E402


@pytest.fixture(scope="session")
def bert_encoder() -> FrozenModel:
    """A three-layer BERT-style encoder using tf_slim layer_norm (7 layer norms)."""
    return bert_style_encoder(layers=3, hidden=64, heads=4, seq=8, batch=2, seed=1)


@pytest.fixture(scope="session")
def registry():
    from scopefusion.plugins.registry import load_registry

    return load_registry(autoload=False)
