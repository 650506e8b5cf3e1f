"""Plugins that are installed but not loaded: listing them without loading
them, and finding which of them provides a pass asked for by name, so that
"unknown pass" can say which blocked plugin has it and how to load it."""
from __future__ import annotations

from typing import Mapping, Sequence

import pluggy

from ..core.errors import PluginError
from ..core.fusion.options import check_pass_names
from . import hookspecs
from .registry import ALLOW_ENV, NO_AUTOLOAD_ENV, PluginInfo, Registry, discover_entry_points


def installed_plugins() -> list[PluginInfo]:
    """Every plugin of the entry-point group, none of them loaded (as with autoloading off)."""
    plugins = []
    for ep in discover_entry_points():
        dist = ep.dist.name if ep.dist is not None else "unknown"
        version = ep.dist.version if ep.dist is not None else "?"
        plugins.append(PluginInfo(ep.name, dist, version, ep.value, blocked=True, blocked_by=NO_AUTOLOAD_ENV))
    return plugins


class BlockedPassError(PluginError):
    """A pass asked for by name is provided by a plugin that was not loaded."""

    def __init__(self, pass_name: str, plugin: PluginInfo) -> None:
        self.pass_name, self.plugin = pass_name, plugin
        super().__init__(self.describe({"block list": "block_plugins", "allow list": "the allow list (only)"}))

    def describe(self, wording: Mapping[str, str]) -> str:
        """The message, naming what blocked the plugin in ``wording``'s terms."""
        why = self.plugin.blocked_by
        by = wording.get(why, why)
        how = {NO_AUTOLOAD_ENV: "unset it", ALLOW_ENV: "add the plugin to it",
               "allow list": "add the plugin to it"}.get(why, "take the plugin out of it")
        return (f"pass {self.pass_name!r} is provided by {self.plugin.describe()}, which is not loaded: "
                f"blocked by {by}; {how} to use the pass")


def blocked_provider(plugins: Sequence[PluginInfo], pass_name: str) -> PluginInfo | None:
    """The blocked plugin among ``plugins`` that provides ``pass_name``, found by
    importing it and calling its pass hooks (nothing is registered); None if none does."""
    wanted = {(p.name, p.value): p for p in plugins if p.blocked}
    for ep in discover_entry_points() if wanted else []:
        info = wanted.get((ep.name, ep.value))
        if info is None:
            continue
        try:
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)
            pm.register(ep.load(), name=ep.name)
            classes = [c for hook in ("scopefusion_scope_passes", "scopefusion_graph_passes")
                       for answer in getattr(pm.hook, hook)() for c in (answer or [])]
        except Exception:  # a blocked plugin may well be broken: it just provides nothing here
            continue
        if any(getattr(c, "name", None) == pass_name for c in classes):
            return info
    return None


def check_enabled_passes(registry: Registry, names: Sequence[str]) -> None:
    """Every name is a registered scope pass (or one's alias); a name a blocked plugin provides
    is a :class:`BlockedPassError` saying which plugin and how to load it."""
    names = registry.canonical_names(names, "scope")
    known = registry.pass_names()
    for name in names:
        if name not in known:
            provider = blocked_provider(registry.plugins, name)
            if provider is not None:
                raise BlockedPassError(name, provider)
    check_pass_names(names, known)
