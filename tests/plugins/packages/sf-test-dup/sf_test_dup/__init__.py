"""Contributes a pass named TestExtraPass, like sf-test-extra does."""
from __future__ import annotations

from scopefusion import ScopeBasePass, ScopePattern, hookimpl


class DuplicateExtraPass(ScopeBasePass):
    """Same registry name as sf-test-extra's pass."""

    name = "TestExtraPass"
    general = False

    def define_patterns(self):
        return [[[ScopePattern("Dup").add_scope_feature(suffix="dup_block")]]]

    def generate_fusion_result(self, scopes, result) -> None:
        result.reject("duplicate")


@hookimpl
def scopefusion_scope_passes():
    return [DuplicateExtraPass]
