"""A plugin whose hook returns a plain class instead of a ScopeBasePass subclass."""
from __future__ import annotations

from scopefusion import hookimpl


class NotAPass:
    """Looks like a pass by name only."""

    name = "NotAPass"


@hookimpl
def scopefusion_scope_passes():
    return [NotAPass]
