"""The tests' one numerical check: a fused graph computes what its model's original graph does."""
from __future__ import annotations

from typing import Any

from tests.helpers.pass_checks import REGISTRY

from scopefusion.testing import assert_verified


def assert_verifies(model: Any, fused: Any, *, every_output: bool = False, **options: Any) -> float:
    """Run ``model.graph_def`` and ``fused`` (a fusion result or its fused GraphDef) in TensorFlow
    on two seeded random feeds, with the built-in passes' fused ops, and assert every output
    matches (:func:`scopefusion.testing.assert_verified`); returns the largest absolute error.

    The model says how it is fed and compared (``verify_options``: its input shapes, the range
    of its int inputs, a stricter tolerance); ``options`` (``scopefusion.verify``'s) come last.
    With ``every_output`` the outputs compared (the graph's sinks) must be as many as the
    model names.
    """
    settings = {"fused_ops": REGISTRY.fused_ops, "runs": 2, **model.verify_options, **options}
    outcome = assert_verified(model.graph_def, fused, **settings)
    if every_output:
        compared = [o.name for o in outcome.outputs]
        assert len(compared) == len(model.outputs), f"compared {compared}, the model names {model.outputs}"
    return max(o.max_abs_error for o in outcome.outputs)
