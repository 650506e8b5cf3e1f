"""TensorFlow's own op definitions (the op registry), read when a question needs them.

Stock ops matter when a pass produces one, when an inner graph uses one, and when a graph
is checked before it runs. When TensorFlow is imported already its registry answers (it also
knows ops of libraries loaded into it); otherwise the cached op list does (:mod:`.op_cache`),
and TensorFlow is not imported.
"""
from __future__ import annotations

import sys
from typing import Any

from .op_cache import cached_op_defs


def tensorflow_op_def(op: str) -> Any | None:
    """TensorFlow's ``OpDef`` for op type ``op``, or None when TensorFlow has no such op."""
    if "tensorflow" in sys.modules:
        from tensorflow.python.framework import op_def_registry  # deferred: TensorFlow costs seconds to import

        return op_def_registry.get(op)
    return cached_op_defs().get(op)


def is_tensorflow_op(op: str) -> bool:
    return tensorflow_op_def(op) is not None


def tensorflow_attr_types(op: str) -> dict[str, str]:
    """The attribute types of a TensorFlow op (empty when there is no such op)."""
    op_def = tensorflow_op_def(op)
    return {a.name: a.type for a in op_def.attr} if op_def is not None else {}
