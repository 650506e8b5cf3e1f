"""Example models shipped with scopefusion (``bert_tiny.pb``: a two-layer
BERT-style encoder built with ``tf_slim.layers.layer_norm`` and frozen; see
``scripts/make_example_model.py``)."""
