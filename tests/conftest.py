"""Shared fixtures: real graphs are built once per session."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"  # Keras 3 models in the corpus are traced as TF graphs
pytest_plugins = ["tests.helpers.installed_plugins",  # fixtures plugin_dirs, use_plugins
                  "tests.helpers.model_garden"]  # fixture model_garden_site

from tests.models.model_builders import FrozenModel, bert_style_encoder  # noqa: E402


@pytest.fixture(scope="session")
def bert_encoder() -> FrozenModel:
    """A three-layer BERT-style encoder using tf_slim layer_norm (7 layer norms)."""
    return bert_style_encoder(layers=3, hidden=64, heads=4, seq=8, batch=2, seed=1)


@pytest.fixture(scope="session")
def registry():
    from scopefusion.plugins.registry import load_registry

    return load_registry(autoload=False)


# ------------------------------------------------------------ model corpus
# Real models built with third-party model code (keras-hub, Keras
# applications, tf_slim), random weights, frozen once per session.


def _keras_tensorflow_backend():
    import keras
    assert keras.backend.backend() == "tensorflow", "the tests set KERAS_BACKEND=tensorflow"
    return keras


@pytest.fixture(scope="session")
def keras_hub_bert():
    """keras-hub BertBackbone: 2 layers, hidden 64, 2 heads, batch 2, seq 16 (5 layer norms)."""
    _keras_tensorflow_backend()
    import keras_hub  # noqa: F401
    from tests.models.corpus_models import keras_hub_bert as build

    return build(vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=64, intermediate_dim=128,
                 max_sequence_length=16, batch=2, seed=0)


@pytest.fixture(scope="session")
def keras_mobilenet_v2():
    """keras.applications.MobileNetV2, alpha 0.35, 32x32x3 images, 10 classes (52 batch norms)."""
    _keras_tensorflow_backend()
    from tests.models.corpus_models import keras_mobilenet_v2 as build

    return build(image_size=32, alpha=0.35, classes=10, batch=2, seed=0)


@pytest.fixture(scope="session")
def slim_instance_norm_convnet():
    """Two conv2d + tf_slim instance_norm blocks (NHWC, scopes block<i>/InstanceNorm)."""
    from tests.models.corpus_models import slim_instance_norm_convnet as build

    return build(convs=2, channels=16, image_size=16, batch=2, seed=0)
