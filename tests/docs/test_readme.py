"""The plugin example in the README is real code: run it."""
from __future__ import annotations

import re
import types
from pathlib import Path

import numpy as np

import scopefusion
import scopefusion.core.graph.matching
import scopefusion.testing
from scopefusion.core.verify.execute import run_graph_def
from scopefusion.plugins.registry import load_registry

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_plugin() -> types.ModuleType:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (source,) = [b for b in blocks if "def scopefusion_scope_passes" in b]
    module = types.ModuleType("readme_plugin")
    exec(compile(source, str(README), "exec"), module.__dict__)
    return module


def test_readme_plugin_example_registers_fuses_and_matches():
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [2, 4], name="x")
        with tf.name_scope("head/scale_shift"):
            y = x * 0.5 + 2.0
        tf.nn.relu(y, name="out")
    graph_def = graph.as_graph_def()

    registry = load_registry(autoload=False, plugins=[("readme", _readme_plugin())])
    spec = registry.get("ScopeScaleShiftPass")
    assert not spec.general and spec.origin == "readme local"
    assert scopefusion.fuse(graph_def, registry=registry).report.fused == []  # not enabled
    result = scopefusion.fuse(graph_def, registry=registry, emit="tf",
                              enable_scope_fusion_passes="ScopeScaleShiftPass")
    (fused,) = result.report.fused
    assert (fused.name, fused.type) == ("head/scale_shift", "ScaleShift")
    feeds = {"x:0": np.linspace(-3, 3, 8, dtype=np.float32).reshape(2, 4)}
    want = run_graph_def(graph_def, feeds, ["out:0"])
    got = run_graph_def(result.graph_def, feeds, ["out:0"])
    assert np.max(np.abs(want[0] - got[0])) <= 1e-6


def test_readme_op_pattern_example_matches_a_hard_swish():
    import tensorflow as tf

    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (source,) = [b for b in blocks if "HARD_SWISH = OpPattern" in b]
    namespace: dict = {}
    exec(compile(source, str(README), "exec"), namespace)

    def keras_style(x):
        return x * tf.nn.relu6(x + 3.0) / 6.0

    graph_def = scopefusion.testing.graph_from_function(keras_style, tf.TensorSpec([2, 3], tf.float32, "x"))
    view = scopefusion.GraphView(graph_def)
    (match,) = scopefusion.core.graph.matching.find_matches(view, namespace["HARD_SWISH"])
    assert match.tensor_name("x") == "x" and match.root_name == "truediv"
