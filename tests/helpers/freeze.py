"""Freezing graphs for the tests: a TF1 graph (:func:`freeze_graph`) or a traced function
(:func:`freeze_function`; ``scopefusion.testing.graph_from_function`` where only the GraphDef of
positional specs is wanted)."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np


def freeze_graph(build: Callable[[], tuple[dict, list]], seed: int = 0, *,
                 initialize: Callable[[Any], None] | None = None) -> tuple[Any, dict[str, np.ndarray], list[str]]:
    """Build a TF1 graph with ``build() -> ({placeholder: value}, [output tensors])`` under the
    graph-level random seed ``seed``, initialise its variables (then ``initialize(session)``, to
    give them other values) and freeze it to the outputs.

    Returns the GraphDef, the feeds by tensor name and the output tensor names."""
    import tensorflow as tf  # deferred: the test modules import this one at collection

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(seed)
        feeds, outputs = build()
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            if initialize is not None:
                initialize(sess)
            frozen = tf1.graph_util.convert_variables_to_constants(
                sess, graph.as_graph_def(), [t.op.name for t in outputs]
            )
    return frozen, {k.name: v for k, v in feeds.items()}, [t.name for t in outputs]


def random_variables(seed: int, dtype: str = "float32", low: float = -0.8,
                     high: float = 0.8) -> Callable[[Any], None]:
    """An ``initialize`` for :func:`freeze_graph`: every global variable drawn uniformly from
    [``low``, ``high``) (biases too, which start at zero or one)."""
    def initialize(session: Any) -> None:
        import tensorflow as tf  # deferred, as above

        rng = np.random.default_rng(seed)
        for v in tf.compat.v1.global_variables():
            v.load(rng.uniform(low, high, v.shape.as_list()).astype(dtype), session)

    return initialize


def freeze_function(fn: Callable, specs: Mapping[str, Any], *, autograph: bool = True,
                    lower_control_flow: bool = True) -> tuple[Any, list[str], list[str]]:
    """Trace ``fn(**specs)`` (``autograph`` as ``tf.function`` takes it) and freeze its variables
    to constants (with ``lower_control_flow`` off, loops and conds stay functional ``While`` /
    ``If`` nodes).

    Returns the GraphDef, the output tensor names and the matching structured
    output keys (dict keys, or ``output_<i>`` for sequences)."""
    import tensorflow as tf  # deferred, as above
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = tf.function(fn, autograph=autograph).get_concrete_function(**specs)
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=lower_control_flow)
    structured = concrete.structured_outputs
    if isinstance(structured, Mapping):
        keys = sorted(structured)  # tf.nest flattens dicts in sorted key order
    else:
        keys = [f"output_{i}" for i in range(len(tf.nest.flatten(structured)))]
    outputs = [t.name for t in frozen.outputs]
    assert len(keys) == len(outputs), (keys, outputs)
    return frozen.graph.as_graph_def(), outputs, keys
