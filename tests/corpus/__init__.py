"""The generalization corpus: the built-in passes on models built with the layer code of
libraries the other tests do not use (``tests/models/library_models.py``)."""
