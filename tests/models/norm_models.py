"""What the normalization graph-pass tests build on: :class:`NormModel` (a frozen graph and
the norms its code computes) and the helpers the builders share.

The builders live in ``layer_norm_models``, ``rms_norm_models`` and ``group_norm_models``:
layer, RMS and group normalizations as real libraries write them (TensorFlow's own ops,
Keras 3, tf_keras, keras-hub, tf_slim, transformers), tiny and with random weights.  Every
builder returns a :class:`NormModel` whose counts come from the model's configuration,
never from running a pass.  Where a library's code is called outside its Keras layer
(``layer.call(x)``), the layer's own lines run at the top level of the traced function,
without the name scope ``Layer.__call__`` opens: that is how a normalization "without a
scope of its own" arises from real code.

tensorflow-addons 0.23 (its last release) runs only with tf_keras as ``tf.keras``, chosen
before TensorFlow is imported: its graphs are built in a subprocess by ``tfa_graphs.py`` (see
``test_tensorflow_addons.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tests.models import activation_models as am
from tests.models.model_builders import FrozenModel


@dataclass(repr=False)
class NormModel(FrozenModel):
    """A frozen model and the normalizations its code computes."""

    name: str = ""
    graph_layer_norms: int = 0  # LayerNorm nodes LayerNormFusionPass must produce
    rms_norms: int = 0
    group_norms: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)  # attribute values of every fused op of the model's kind
    signature: tuple[str, ...] = ()
    refusal: str | None = None  # a look-alike: what the pass's refusal must say (None: it must not match)
    input_shapes: str | None = None
    int_range: tuple[int, int] = (0, 10)

    def __repr__(self) -> str:
        return (f"NormModel({self.name!r}, layer_norms={self.layer_norms}, graph={self.graph_layer_norms}, "
                f"rms={self.rms_norms}, group={self.group_norms})")


def traced(name: str, fn: Callable, specs: dict, seed: int = 0, **known: Any) -> NormModel:
    """``activation_models._traced`` (trace, freeze, random feed) as a :class:`NormModel`."""
    m = am._traced(name, fn, specs, np.random.default_rng(seed), int_range=known.get("int_range", (0, 10)))
    return NormModel(m.graph_def, m.inputs, m.outputs, name=name, **known)


def tf1_graph(name: str, build: Callable, seed: int = 0, **known: Any) -> NormModel:
    """``activation_models._tf1`` (a frozen TF1 graph and its feed) as a :class:`NormModel`."""
    m = am._tf1(name, build, seed)
    return NormModel(m.graph_def, m.inputs, m.outputs, name=name, **known)


def params(n: int, seed: int, shift: float = 0.0) -> np.ndarray:
    """``n`` random float32 parameters around ``shift`` (gammas near 1, betas near 0)."""
    return (np.random.default_rng(seed).normal(shift, 0.5, n)).astype(np.float32)


def spec(shape, name: str = "x", dtype: str = "float32"):
    """A ``tf.TensorSpec`` of a traced function's input."""
    return am._spec(shape, name, dtype)


HIDDEN = 16


def encoder(norm: Callable, layers: int = 2, batch: int | None = 2, seed: int = 0):
    """A residual stack of ``layers`` blocks ``h = norm(h + relu(h @ w))`` at the top level
    of a traced function; ``norm(h, i)`` is the layer norm of block ``i``."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    weights = [rng.normal(0, 0.4, (HIDDEN, HIDDEN)).astype(np.float32) for _ in range(layers)]

    def fn(x):
        h = x
        for i, w in enumerate(weights):
            h = norm(h + tf.nn.relu(tf.matmul(h, w)), i)
        return h

    return fn, {"x": spec([batch, 4, HIDDEN])}


def ids(*names: str) -> dict:
    """Specs of [2, 8] int32 token inputs."""
    return {k: spec([2, 8], k, "int32") for k in names}
