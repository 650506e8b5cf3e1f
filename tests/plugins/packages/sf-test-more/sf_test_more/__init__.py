"""Contributes TestMorePass, a non-general pass that always rejects."""
from __future__ import annotations

from scopefusion import ScopeBasePass, ScopePattern, hookimpl


class TestMorePass(ScopeBasePass):
    """more_block scopes, always rejected (test plugin)."""

    general = False

    def define_patterns(self):
        return [[[ScopePattern("MoreBlock").add_scope_feature(suffix="more_block")]]]

    def generate_fusion_result(self, scopes, result) -> None:
        result.reject("TestMorePass never fuses")


@hookimpl
def scopefusion_scope_passes():
    return [TestMorePass]
