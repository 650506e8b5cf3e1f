"""TensorFlow's own op definitions (the op registry), read when a question needs them.

TensorFlow is imported on the first question only: stock ops matter when a pass
produces one, when an inner graph uses one, and when a graph is checked before it runs.
"""
from __future__ import annotations

from typing import Any


def tensorflow_op_def(op: str) -> Any | None:
    """TensorFlow's ``OpDef`` for op type ``op``, or None when TensorFlow has no such op."""
    from tensorflow.python.framework import op_def_registry

    return op_def_registry.get(op)


def is_tensorflow_op(op: str) -> bool:
    return tensorflow_op_def(op) is not None


def tensorflow_attr_types(op: str) -> dict[str, str]:
    """The attribute types of a TensorFlow op (empty when there is no such op)."""
    op_def = tensorflow_op_def(op)
    return {a.name: a.type for a in op_def.attr} if op_def is not None else {}
