"""Assertions the normalization graph-pass tests share: fuse a :class:`norm_models.NormModel`
with the built-in passes, read one pass's report, verify numerically."""
from __future__ import annotations

import functools
from typing import Callable

import pytest

from tests.models import group_norm_models as gnm
from tests.models import layer_norm_models as lnm
from tests.models import norm_models as nm
from tests.models import rms_norm_models as rnm
from tests.helpers.pass_checks import NORMS_APART, REGISTRY, assert_builds, op_count, pass_report  # noqa: F401  (shared)
from tests.helpers.verify import assert_verifies  # noqa: F401  (shared with the norm tests)

import scopefusion

Builders = dict[str, Callable[[], nm.NormModel]]

#: Per pass, the forms it fuses and the look-alikes it must not (those of the other kinds too).
LAYER_NORM_FORMS: Builders = lnm.FORMS
LAYER_NORM_DECOYS: Builders = {
    **lnm.DECOYS,
    "rms_t5_call": lambda: rnm.rms_call_at_top_level("t5"),
    "instance_norm_nhwc": lambda: gnm.group_norm_decoy("instance_norm_nhwc"),
    "keras_group_normalization": gnm.keras_group_normalization,
    "keras_batch_normalization": lambda: gnm.group_norm_decoy("batch_norm"),
}
RMS_NORM_FORMS: Builders = rnm.FORMS
RMS_NORM_DECOYS: Builders = {**rnm.DECOYS, "hand_written_layer_norm": lambda: lnm.hand_written_layer_norm("rsqrt")}
GROUP_NORM_FORMS: Builders = gnm.FORMS
GROUP_NORM_DECOYS: Builders = gnm.DECOYS

ALL_MODELS: Builders = {
    **{f"ln:{k}": v for k, v in {**LAYER_NORM_FORMS, **LAYER_NORM_DECOYS}.items()},
    **{f"rms:{k}": v for k, v in {**RMS_NORM_FORMS, **RMS_NORM_DECOYS}.items()},
    **{f"gn:{k}": v for k, v in {**GROUP_NORM_FORMS, **GROUP_NORM_DECOYS}.items()},
}


@functools.cache
def model(key: str) -> nm.NormModel:
    """Each model is built once per test session."""
    return ALL_MODELS[key]()


@functools.cache
def fused(key: str, enable: str = ""):
    """The fusion result of a model (fused form), with the non-general scope passes ``enable`` names."""
    return scopefusion.fuse(model(key).graph_def, registry=REGISTRY, enable_scope_fusion_passes=enable or None,
                            fusion_switch_file=NORMS_APART)


def refusals(result, name: str) -> list[str]:
    """A pass's refusals (for assertion messages)."""
    return [f"{r.name}: {r.reason}" for r in pass_report(result, name).refused]


def nodes(graph_def, op: str) -> list:
    return [n for n in graph_def.node if n.op == op]


def attr_value(node, key: str):
    value = node.attr[key]
    kind = value.WhichOneof("value")
    if kind == "list":
        return list(value.list.i)
    if kind == "s":
        return value.s.decode()
    return getattr(value, kind)


def assert_attrs(node, expected: dict) -> None:
    for key, want in expected.items():
        got = attr_value(node, key)
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-6), (node.name, key)
        else:
            assert got == want, (node.name, key, got)


def assert_fused_as_built(key: str, pass_name: str, op: str, count: int):
    """``pass_name`` fused exactly ``count`` norms of the model (its own count, from the builder),
    refused nothing, and the graph holds ``count`` ``op`` nodes; returns ``(model, result, nodes)``."""
    m, result = model(key), fused(key)
    report = pass_report(result, pass_name)
    assert len(report.fused) == count, refusals(result, pass_name)
    assert report.refused == []
    found = nodes(result.fused_graph_def, op)
    assert len(found) == count
    return m, result, found


def assert_look_alike(key: str, pass_name: str, refusal: str | None) -> tuple[nm.NormModel, object]:
    """``pass_name`` fused nothing of a look-alike; it refused it with ``refusal`` in every reason,
    or (None) did not match it at all; the graph still computes what it did.  Returns
    ``(model, result)`` for the caller's own checks."""
    m, result = model(key), fused(key)
    report = pass_report(result, pass_name)
    assert report.fused == []
    if refusal is None:
        assert report.refused == [], refusals(result, pass_name)
    else:
        reasons = refusals(result, pass_name)
        assert reasons and all(refusal in r for r in reasons), reasons
    assert_verifies(m, result)
    return m, result
