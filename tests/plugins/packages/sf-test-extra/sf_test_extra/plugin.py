"""Contributes two non-general passes (TestExtraPass, TestExtraLatePass), the
fused op they produce, and a replacement for the built-in ScopeLayerNormPass."""
from __future__ import annotations

from typing import Sequence

from scopefusion import AttrDef, FusedOpDef, ScopeBasePass, ScopePattern, TensorArg, hookimpl
from scopefusion.builtin_passes.scope.layer_norm import ScopeLayerNormPass as BuiltinLayerNormPass

OVERRIDE_DESCRIPTION = "LayerNorm as overridden by sf-test-extra"

TEST_EXTRA = FusedOpDef(
    name="TestExtra",
    inputs=(TensorArg("x", type_attr="T"),),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(AttrDef("T", "type"),),
    description="Test op: the body of an extra_block scope",
)


class TestExtraPass(ScopeBasePass):
    """extra_block scopes (Relu -> Relu) -> TestExtra; others are rejected."""

    general = False
    description = "extra_block scopes -> TestExtra (test plugin)"

    def define_patterns(self):
        return [[[ScopePattern("ExtraBlock").add_scope_feature(suffix="extra_block")]]]

    def generate_fusion_result(self, scopes: Sequence, result) -> None:
        scope = scopes[0]
        relus = sorted(n.name for n in scope.nodes_by_op("Relu"))
        if len(relus) != 2:
            result.reject(f"expected two Relu nodes, found {len(relus)}")
            return
        first, second = (scope.suffix_of(n) for n in relus)
        result.set_type(TEST_EXTRA.name)
        result.set_attr("T", scope.graph.node(relus[0]).attr["T"].type)
        result.insert_inputs(first, [0])
        result.insert_outputs(second, [0])


class TestExtraLatePass(ScopeBasePass):
    """Registered after TestExtraPass; matches late_block scopes and always rejects."""

    general = False
    description = "late_block scopes, always rejected (test plugin)"

    def define_patterns(self):
        return [[[ScopePattern("LateBlock").add_scope_feature(suffix="late_block")]]]

    def generate_fusion_result(self, scopes: Sequence, result) -> None:
        result.reject("TestExtraLatePass never fuses")


class ScopeLayerNormPass(BuiltinLayerNormPass):
    """The built-in LayerNorm pass under a different description."""

    name = "ScopeLayerNormPass"
    description = OVERRIDE_DESCRIPTION


@hookimpl
def scopefusion_scope_passes():
    return [TestExtraPass, ScopeLayerNormPass, TestExtraLatePass]


@hookimpl
def scopefusion_fused_ops():
    return [TEST_EXTRA]
