"""The registry: scope passes, graph passes and fused-op definitions collected
from the built-ins and from plugins found through the ``scopefusion``
entry-point group.

Rules:

* built-ins come first, in their own order; plugins follow, sorted by
  distribution name and entry-point name, so registration order is
  deterministic;
* a plugin pass (or fused op) with a built-in's name replaces the built-in in
  its slot, and the replacement is recorded;
* two plugins contributing the same name is an error naming both, and so is
  one name used by a scope pass and a graph pass;
* a plugin that fails to load, or whose hook returns something that is not a
  pass, is an error naming its distribution and entry point;
* a plugin whose hook raises is reported (``Registry.errors``, naming its
  distribution) and skipped whole, so the others still apply; with
  ``strict=True`` it is an error;
* op types a back end runs (``scopefusion_supported_ops``, for mixed computation) may be
  declared by several plugins only with the same flags;
* plugins can be blocked by entry-point or distribution name
  (``SCOPEFUSION_BLOCK_PLUGINS=a,b``), or autoloading switched off
  (``SCOPEFUSION_DISABLE_PLUGIN_AUTOLOAD=1``) or limited to an allow-list
  (``SCOPEFUSION_PLUGINS=a,b``).
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import pluggy
from importlib_metadata import entry_points

from .. import builtin_passes  # the built-ins register through the same hooks as plugins
from ..core.errors import PluginError
from ..core.fusion.fused_ops import FusedOpDef
from ..core.fusion.options import parse_pass_list
from ..core.fusion.pass_spec import PassSpec
from ..core.graph_fusion.base_pass import PatternFusionBasePass
from ..core.partition.errors import PartitionError
from ..core.partition.supported import OpSupport, plugin_entries
from ..core.scope.base_pass import ScopeBasePass
from . import hookspecs

ENTRY_POINT_GROUP = "scopefusion"
BLOCK_ENV = "SCOPEFUSION_BLOCK_PLUGINS"
ALLOW_ENV = "SCOPEFUSION_PLUGINS"
NO_AUTOLOAD_ENV = "SCOPEFUSION_DISABLE_PLUGIN_AUTOLOAD"
BUILTIN = "built-in"


@dataclass
class PluginInfo:
    """One plugin found through an entry point."""

    name: str
    distribution: str
    version: str
    value: str
    blocked: bool = False
    blocked_by: str = ""  # "block list", "allow list" or the environment variable that left it out
    error: str | None = None  # why it was skipped, if it was
    passes: list[str] = field(default_factory=list)
    graph_passes: list[str] = field(default_factory=list)
    fused_ops: list[str] = field(default_factory=list)
    supported_ops: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"{self.distribution} {self.version}"

    def describe(self) -> str:
        return f"plugin {self.name!r} (distribution {self.origin}, entry point {self.value})"


@dataclass
class Registry:
    """Scope passes and graph passes in registration order, and fused ops by type."""

    passes: list[PassSpec] = field(default_factory=list)  # scope passes
    graph_passes: list[PassSpec] = field(default_factory=list)
    fused_ops: dict[str, FusedOpDef] = field(default_factory=dict)
    plugins: list[PluginInfo] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # plugins skipped because a hook raised
    #: op types plugins declare their back end runs (hook scopefusion_supported_ops), with origins
    supported_ops: dict[str, OpSupport] = field(default_factory=dict)

    @property
    def fused_op_origins(self) -> dict[str, str]:
        """Who declared each fused op ("built-in" or a distribution and version)."""
        return {name: op.origin for name, op in self.fused_ops.items()}

    def pass_names(self) -> list[str]:
        """Names of the scope passes, in registration order."""
        return [p.name for p in self.passes]

    def graph_pass_names(self) -> list[str]:
        """Names of the graph passes, in registration order."""
        return [p.name for p in self.graph_passes]

    def get(self, name: str) -> PassSpec:
        """The pass (scope or graph) called ``name`` (or answering to it as an alias)."""
        for p in (*self.passes, *self.graph_passes):
            if p.name == name:
                return p
        for p in (*self.passes, *self.graph_passes):
            if name in p.aliases:
                return p
        raise KeyError(name)

    def aliases(self, engine: str | None = None) -> dict[str, str]:
        """Alias -> pass name, for the passes of ``engine`` (both engines when None); a name
        that is some pass's own name is never an alias."""
        specs = [p for p in (*self.passes, *self.graph_passes) if engine is None or p.engine == engine]
        own = {p.name for p in specs}
        return {alias: p.name for p in specs for alias in p.aliases if alias not in own}

    def canonical_names(self, names: Sequence[str], engine: str | None = None) -> list[str]:
        """``names`` with aliases replaced by the passes' own names, each once, in order."""
        table = self.aliases(engine)
        return list(dict.fromkeys(table.get(n, n) for n in names))


def normalise_distribution(name: str) -> str:
    """PEP 503 normalisation: ``SF_Test.Broken`` and ``sf-test-broken`` are one name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _env_list(name: str) -> list[str]:
    return parse_pass_list(os.environ.get(name, ""))


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def autoload_disabled() -> bool:
    """``SCOPEFUSION_DISABLE_PLUGIN_AUTOLOAD`` is set to a true value."""
    return _truthy(os.environ.get(NO_AUTOLOAD_ENV))


def discover_entry_points() -> list[Any]:
    """Entry points of the ``scopefusion`` group, sorted deterministically."""
    eps = list(entry_points(group=ENTRY_POINT_GROUP))

    def key(ep: Any) -> tuple[str, str]:
        dist = ep.dist.name if ep.dist is not None else ""
        return (normalise_distribution(dist), ep.name)

    return sorted(eps, key=key)


class _Collector:
    """Merges contributions into a :class:`Registry`, enforcing the rules."""

    def __init__(self) -> None:
        self.registry = Registry()
        self._pass_owner: dict[str, str] = {}
        self._pass_engine: dict[str, str] = {}
        self._op_owner: dict[str, str] = {}

    def add_passes(self, classes: Iterable[Any], origin: str, who: str, engine: str) -> list[str]:
        """Add pass classes of one engine (``"scope"`` or ``"graph"``) from one contributor."""
        base = ScopeBasePass if engine == "scope" else PatternFusionBasePass
        slots = self.registry.passes if engine == "scope" else self.registry.graph_passes
        added = []
        for cls in classes:
            if not (isinstance(cls, type) and issubclass(cls, base)):
                raise PluginError(f"{who} contributed {described(cls)}, which is not a {base.__name__} subclass")
            name = cls.name
            if not isinstance(name, str) or not name.strip():
                raise PluginError(f"{who} contributed {cls.__name__}, whose name is {name!r}; a pass name must be "
                                  "a non-empty string")
            owner = self._pass_owner.get(name)
            spec = PassSpec(cls, origin)
            if owner is not None and self._pass_engine[name] != engine:
                raise PluginError(f"pass name {name!r} is used by a {self._pass_engine[name]} pass of {owner} "
                                  f"and a {engine} pass of {who}")
            if owner is None:
                slots.append(spec)
            elif owner == BUILTIN and origin != BUILTIN:
                slot = [p.name for p in slots].index(name)
                spec.replaces = BUILTIN
                slots[slot] = spec
                self.registry.overrides.append(f"pass {name}: built-in replaced by {who}")
            else:
                raise PluginError(f"pass {name!r} is registered twice: by {owner} and by {who}")
            self._pass_owner[name] = BUILTIN if origin == BUILTIN else who
            self._pass_engine[name] = engine
            added.append(name)
        return added

    def add_fused_ops(self, defs: Iterable[Any], origin: str, who: str) -> list[str]:
        added = []
        for op in defs:
            if not isinstance(op, FusedOpDef):
                raise PluginError(f"{who} contributed {op!r}, which is not a FusedOpDef")
            owner = self._op_owner.get(op.name)
            if owner == BUILTIN and origin != BUILTIN:
                self.registry.overrides.append(f"fused op {op.name}: built-in replaced by {who}")
            elif owner is not None:
                raise PluginError(f"fused op {op.name!r} is declared twice: by {owner} and by {who}")
            self.registry.fused_ops[op.name] = dataclasses.replace(op, origin=origin)
            self._op_owner[op.name] = BUILTIN if origin == BUILTIN else who
            added.append(op.name)
        return added

    def add_supported_ops(self, value: Iterable[Any], origin: str, who: str) -> list[str]:
        """Op types a back end runs: the same op from two plugins must carry the same flags."""
        try:
            entries = plugin_entries(value, who)
        except PartitionError as exc:
            raise PluginError(str(exc)) from None
        table = self.registry.supported_ops
        for op, entry in entries.items():
            known = table.get(op)
            if known is not None and (known.is_gray, known.is_heavy) != (entry.is_gray, entry.is_heavy):
                raise PluginError(f"supported op {op!r} is declared with different flags by {known.origin} "
                                  f"and by {origin}")
            if known is None:
                table[op] = OpSupport(entry.is_gray, entry.is_heavy, origin)
        return list(entries)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or "(no message)"


class PluginHookError(PluginError):
    """A plugin's hook raised."""


def _call_hook(function: Callable[[], Any], who: str, hook: str) -> list[Any]:
    """Call a plugin's hook; whatever it raises (``SystemExit`` too, but not
    ``KeyboardInterrupt``) becomes a :class:`PluginHookError` naming the plugin."""
    def raised(exc: BaseException) -> PluginHookError:
        return PluginHookError(f"{who}: hook {hook} raised {type(exc).__name__}: {_one_line(exc)}")

    try:
        value = function()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - plugin code may even call sys.exit()
        raise raised(exc) from exc
    if value is None:
        return []
    if isinstance(value, Mapping):  # scopefusion_supported_ops may answer in the file's format
        value = list(value.items())
    try:
        items = iter(value)
    except TypeError:
        raise PluginError(f"{who}: hook {hook} must return a sequence, got {described(value)}") from None
    try:
        return list(items)  # a generator hook runs its body here
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        raise raised(exc) from exc


def described(value: object) -> str:
    """A value a plugin gave, as a message speaks of it: a class by its name, an object without
    a readable form by its type (no ``<object object at 0x...>``), anything else by a short repr."""
    if isinstance(value, type):
        return f"class {value.__module__}.{value.__qualname__}"
    text = repr(value)
    if text.startswith("<") and " at 0x" in text:
        return f"an object of type {type(value).__name__}"
    return text if len(text) <= 80 else f"{text[:40]}...{text[-37:]} ({type(value).__name__})"


#: The hooks that contribute something, in the order they are collected.
_CONTRIBUTING_HOOKS = ("scopefusion_fused_ops", "scopefusion_scope_passes", "scopefusion_graph_passes",
                       "scopefusion_supported_ops")

_Loaded = tuple[Any, str, str, "PluginInfo | None"]  # (plugin object, origin, description, info)


def load_registry(
    *,
    block: Sequence[str] = (),
    only: Sequence[str] | None = None,
    autoload: bool | None = None,
    plugins: Sequence[tuple[str, Any]] = (),
    strict: bool = False,
) -> Registry:
    """Collect built-ins and plugins.

    ``block`` adds to ``SCOPEFUSION_BLOCK_PLUGINS``; ``only`` (or
    ``SCOPEFUSION_PLUGINS``) loads just the named plugins; ``autoload=False``
    (or ``SCOPEFUSION_DISABLE_PLUGIN_AUTOLOAD=1``) loads none from entry points.
    ``plugins`` are extra ``(name, module)`` pairs registered after discovery.
    A plugin whose hook raises is skipped and named in ``Registry.errors``;
    ``strict=True`` raises :class:`PluginError` instead.
    """
    if autoload is None:
        autoload = not autoload_disabled()
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(builtin_passes, name=BUILTIN)
    collector = _Collector()
    loaded: list[_Loaded] = [(builtin_passes, BUILTIN, BUILTIN, None)]
    if autoload:
        loaded.extend(_load_entry_points(pm, collector.registry, _plugin_filter(block, only)))
    loaded.extend(_register_extra(pm, collector.registry, plugins))
    _check_pending(pm, loaded)
    _collect(pm, loaded, collector, strict)
    return collector.registry


def _plugin_filter(block: Sequence[str], only: Sequence[str] | None) -> Callable[[str, str], str]:
    """A test ``skipped(entry_point_name, distribution)`` from the block and allow lists:
    what left the plugin out ("block list", "allow list" or an environment variable), or ""."""
    lists = [("block list", set(block)), (BLOCK_ENV, set(_env_list(BLOCK_ENV)))]
    allow = ("allow list", set(only)) if only is not None else (ALLOW_ENV, set(_env_list(ALLOW_ENV)))

    def named(names: set[str], ep_name: str, dist: str) -> bool:
        return ep_name in names or normalise_distribution(dist) in {normalise_distribution(n) for n in names}

    def skipped(ep_name: str, dist: str) -> str:
        for why, names in lists:
            if named(names, ep_name, dist):
                return why
        if (only is not None or allow[1]) and not named(allow[1], ep_name, dist):
            return allow[0]
        return ""

    return skipped


def _load_entry_points(pm: pluggy.PluginManager, registry: Registry,
                       skipped: Callable[[str, str], str]) -> list[_Loaded]:
    """Import and register every plugin of the entry-point group that is not skipped."""
    loaded: list[_Loaded] = []
    for ep in discover_entry_points():
        dist = ep.dist.name if ep.dist is not None else "unknown"
        version = ep.dist.version if ep.dist is not None else "?"
        info = PluginInfo(ep.name, dist, version, ep.value)
        registry.plugins.append(info)
        info.blocked_by = skipped(ep.name, dist)
        if info.blocked_by:
            info.blocked = True
            continue
        try:
            obj = ep.load()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - an import may even call sys.exit()
            raise PluginError(f"{info.describe()} failed to load: {type(exc).__name__}: {_one_line(exc)}") from exc
        try:
            pm.register(obj, name=ep.name)
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"{info.describe()} has an invalid hook implementation: {_one_line(exc)}") from exc
        except ValueError as exc:
            other = next((p for p in registry.plugins if p.name == ep.name and p is not info), None)
            raise PluginError(
                f"{info.describe()} cannot be registered: "
                + (f"{other.describe()} uses the same name" if other else str(exc))
            ) from exc
        loaded.append((obj, info.origin, info.describe(), info))
    return loaded


def _register_extra(pm: pluggy.PluginManager, registry: Registry,
                    plugins: Sequence[tuple[str, Any]]) -> list[_Loaded]:
    loaded: list[_Loaded] = []
    for name, obj in plugins:
        info = PluginInfo(name, name, "local", repr(obj))
        registry.plugins.append(info)
        try:
            pm.register(obj, name=name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise PluginError(f"{info.describe()} cannot be registered: {_one_line(exc)}") from exc
        loaded.append((obj, info.origin, info.describe(), info))
    return loaded


def _check_pending(pm: pluggy.PluginManager, loaded: Sequence[_Loaded]) -> None:
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        who = next((w for o, _, w, _ in loaded if o is getattr(exc, "plugin", None)), "a plugin")
        raise PluginError(f"{who} implements an unknown hook: {_one_line(exc)}") from exc


def _collect(pm: pluggy.PluginManager, loaded: Sequence[_Loaded], collector: _Collector, strict: bool) -> None:
    """Call every plugin's hooks and merge what they return, plugin by plugin."""
    impls = {hook: {id(i.plugin): i.function for i in getattr(pm.hook, hook).get_hookimpls()}
             for hook in _CONTRIBUTING_HOOKS}
    for obj, origin, who, info in loaded:
        try:  # every hook first: a plugin whose hook raises contributes nothing
            answers = {hook: _call_hook(impls[hook][id(obj)], who, hook) if id(obj) in impls[hook] else None
                       for hook in _CONTRIBUTING_HOOKS}
        except PluginHookError as exc:
            if strict or info is None:
                raise
            info.error = f"{exc}; skipped"
            collector.registry.errors.append(info.error)
            continue
        ops, scope_passes, graph_passes, supported = (answers[h] for h in _CONTRIBUTING_HOOKS)
        if ops is not None:
            names = collector.add_fused_ops(ops, origin, who)
            if info is not None:
                info.fused_ops = names
        if scope_passes is not None:
            names = collector.add_passes(scope_passes, origin, who, "scope")
            if info is not None:
                info.passes = names
        if graph_passes is not None:
            names = collector.add_passes(graph_passes, origin, who, "graph")
            if info is not None:
                info.graph_passes = names
        if supported is not None:
            names = collector.add_supported_ops(supported, origin, who)
            if info is not None:
                info.supported_ops = names
