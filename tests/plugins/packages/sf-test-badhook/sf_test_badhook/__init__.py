"""A plugin whose hook raises when called."""
from __future__ import annotations

from scopefusion import hookimpl


@hookimpl
def scopefusion_scope_passes():
    raise RuntimeError("sf_test_badhook hook exploded")
