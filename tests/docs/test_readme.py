"""The code in the README and in the documentation site is real code: run it."""
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

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def _plugin_example() -> types.ModuleType:
    (source,) = [b for b in _python_blocks(DOCS / "plugins.md") if "def scopefusion_scope_passes" in b]
    module = types.ModuleType("readme_plugin")
    exec(compile(source, str(DOCS / "plugins.md"), "exec"), module.__dict__)
    return module


def test_the_plugin_example_registers_fuses_and_matches():
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [2, 4], name="x")
        with tf.name_scope("head/scale_shift"):
            y = x * 0.5 + 2.0
        tf.nn.relu(y, name="out")
    graph_def = graph.as_graph_def()

    registry = load_registry(autoload=False, plugins=[("readme", _plugin_example())])
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


def _hard_swish_graph(write):
    import tensorflow as tf

    return scopefusion.testing.graph_from_function(write, tf.TensorSpec([2, 3], tf.float32, "x"))


def test_the_op_pattern_examples_match_a_hard_swish_in_each_spelling():
    """The graph-fusion page's pattern and the README's (written once: the matcher finds the
    groupings) both match Keras' spelling; the README's also the other grouping and the division."""
    import tensorflow as tf

    spellings = {
        "keras": lambda x: x * tf.nn.relu6(x + 3.0) / 6.0,
        "regrouped": lambda x: tf.nn.relu6(3.0 + x) * (1 / 6) * x,
    }
    pages = {"docs/graph-fusion.md": ["keras"], "README.md": ["keras", "regrouped"]}
    for page, forms in pages.items():
        (source,) = [b for b in _python_blocks(ROOT / page) if "HARD_SWISH = OpPattern" in b]
        namespace: dict = {}
        exec(compile(source, page, "exec"), namespace)
        for form in forms:
            view = scopefusion.GraphView(_hard_swish_graph(spellings[form]))
            matches = scopefusion.core.graph.matching.find_matches(view, namespace["HARD_SWISH"])
            assert len(matches) == 1, (page, form)
            assert matches[0].tensor_name("x") == "x"


def test_the_pass_table_names_every_built_in_pass_once():
    """The README's pass table has one row per built-in pass, and no row for a pass that does not exist."""
    from scopefusion.builtin_passes import BUILTIN_GRAPH_PASSES, BUILTIN_PASSES

    text = README.read_text()
    table = text[text.index("| pass | kind | fused op | proven on |"):]
    table = table[:table.index("\n\n")]
    rows = [line for line in table.splitlines()[2:] if line.startswith("| `")]
    named = [re.match(r"\| `(\w+)`", row).group(1) for row in rows]  # type: ignore[union-attr]
    built_in = sorted(p.__name__ for p in (*BUILTIN_PASSES, *BUILTIN_GRAPH_PASSES))
    assert sorted(named) == built_in


def test_the_output_blocks_are_text_as_printed():
    """Output copied into the README is the text a terminal shows, not an escaped string."""
    blocks, fence = [], None
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            if fence is None:
                fence = (line[3:].strip(), [])
            else:
                blocks.append(fence)
                fence = None
        elif fence is not None:
            fence[1].append(line)
    outputs = [lines for lang, lines in blocks if lang in ("", "text")]
    assert outputs, "the README shows real output"
    for lines in outputs:
        assert not any("\\n" in line for line in lines), lines[:3]
