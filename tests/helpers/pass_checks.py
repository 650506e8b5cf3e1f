"""Assertions shared by the tests of the built-in graph passes (each on models built by
real libraries; see ``activation_models`` and the other ``*_models`` modules)."""
from __future__ import annotations

from typing import Any

import numpy as np

from tests.models import activation_models as am
import scopefusion

#: The built-in passes only: installed plugins must not change what these tests see.
REGISTRY = scopefusion.load_registry(autoload=False)
#: The residual-norm pass (UBFusion) takes every layer or RMS norm of a residual sum into an
#: ``AddLayerNorm`` / ``AddRMSNorm``.  The tests of the norm passes look at the norms those
#: passes made, before it; tests/test_residual_norm.py tests it, on the same models.
NORMS_APART = scopefusion.FusionSwitch.from_text('{"Switch": {"UBFusion": {"ResidualNormFusionPass": "off"}}}')


def op_count(graph_def: Any, *ops: str) -> int:
    """How many nodes of ``graph_def`` have one of ``ops``."""
    return sum(n.op in ops for n in graph_def.node)


def pass_report(result: Any, name: str) -> Any:
    """The report of pass ``name``, which must have run."""
    names = [p.name for p in result.report.passes]
    assert name in names, f"{name} did not run (passes: {names})"
    return result.report.pass_report(name)


def refusals(result: Any, name: str) -> list[str]:
    """The pass's refusal reasons (for assertion messages), or why there are none."""
    passes = {p.name: p for p in result.report.passes}
    return [r.reason for r in passes[name].refused] if name in passes else [f"{name} did not run"]


def assert_builds(model: Any, *fused_ops: str) -> None:
    """The builder's graph holds the ops of its form, none of ``fused_ops``, and runs in plain
    TensorFlow to finite outputs."""
    ops = {n.op for n in model.graph_def.node}
    assert set(model.signature) <= ops, sorted(set(model.signature) - ops)
    assert not ops & set(fused_ops), sorted(ops & set(fused_ops))
    outputs = am.run(model)
    assert len(outputs) == len(model.outputs) and all(np.all(np.isfinite(o)) for o in outputs)
