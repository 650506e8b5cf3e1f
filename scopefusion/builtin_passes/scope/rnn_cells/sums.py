"""The sums a cell's gates are made of, in every spelling a library writes.

A gate's pre-activation is one or two matrix products plus a bias vector.  Libraries add the bias
with ``BiasAdd`` (``tf.nn.bias_add``) or with ``Add`` / ``AddV2`` of a vector (``x + b``), and
group the three terms as they like: ``(x @ W + h @ U) + b`` (Keras, Sonnet), ``(x @ W + b) + h @ U``
(a bias added to the input's product first), ``x @ W + (h @ U + b)``.  These expressions match
all of them, so a form is written once.  The two products keep their written order first (which
operand is the step's input and which its state matters to chaining the steps in time); the
other order is the last alternative.
"""
from __future__ import annotations

from typing import Any

from ....core.graph.pattern import one_of, op
from ....core.graph.vocabulary import ADD_OPS as ADD



def plus_bias(value: Any, bias: Any) -> Any:
    """``value + bias`` with ``bias`` a vector: ``BiasAdd(value, bias)`` or an add, either order."""
    return one_of(op("BiasAdd", value, bias), op(ADD, value, bias))


def products_plus_bias(first: Any, second: Any, bias: Any | None) -> Any:
    """``first + second + bias`` in any grouping (``bias`` None: ``first + second``)."""
    if bias is None:
        return one_of(op(ADD, first, second, commutative=False), op(ADD, second, first, commutative=False))
    return one_of(
        plus_bias(op(ADD, first, second, commutative=False), bias),
        op(ADD, plus_bias(first, bias), second, commutative=False),
        op(ADD, first, plus_bias(second, bias), commutative=False),
        plus_bias(op(ADD, second, first, commutative=False), bias),
        op(ADD, second, plus_bias(first, bias), commutative=False),
        op(ADD, plus_bias(second, bias), first, commutative=False),
    )
