"""What a session needs from its options, checked at construction: where
the dump, overflow and profiling output goes, the fusion switch file, the
scope passes it names, and the ``ConfigProto`` its TensorFlow sessions run with.

Each problem is one :class:`~scopefusion.core.options.SessionOptionError`
naming the option, what was given and what is allowed.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..api import load_switch
from ..core.errors import ScopeFusionError
from ..core.graph_fusion.switch import FusionSwitch
from ..core.options import OPTIMIZER_NAME, NpuOptions, SessionOptionError, check_directory
from .dump import DumpSettings
from ..core.options.errors import bad_value
from .overflow import OVERFLOW_DIRECTORY
from ..plugins.blocked import check_enabled_passes
from ..plugins.registry import Registry


@dataclass(frozen=True)
class SessionOutputs:
    """Where the dump, overflow and profiling options write (absolute paths)."""

    dump: DumpSettings | None
    overflow: str | None
    profiles: str | None

    @classmethod
    def of(cls, options: NpuOptions) -> SessionOutputs:
        dump_path = os.path.realpath(options.dump_path) if options.dump_path else None
        dump = DumpSettings(dump_path, options.dump_step, options.dump_mode) \
            if options.enable_dump and dump_path else None
        overflow = os.path.join(dump_path, OVERFLOW_DIRECTORY) if options.enable_dump_debug and dump_path else None
        return cls(dump, overflow, profile_directory(options))


def profile_directory(options: NpuOptions) -> str | None:
    """The ``output`` directory of ``profiling_options`` when ``profiling_mode`` is on
    (it must exist and be writable, as the reference requires)."""
    if not options.profiling_mode:
        return None
    settings = options.profiling_options or {}
    output = settings.get("output")
    if not isinstance(output, str):
        raise bad_value("profiling_options", options.given.get("profiling_options", ""), 'has no "output"',
                        'a JSON object whose "output" is the directory the profiles go to')
    check_directory("profiling_options", output, "its output directory, where profiling_mode = True writes")
    return os.path.realpath(output)


def session_switch(options: NpuOptions) -> FusionSwitch:
    """The fusion switch of ``fusion_switch_file`` (every graph pass on without one)."""
    try:
        return load_switch(options.fusion_switch_file)
    except ScopeFusionError as exc:
        hint = "" if "; " in str(exc) else "; allowed: the path of a readable fusion switch file"
        raise SessionOptionError(f"{OPTIMIZER_NAME} option fusion_switch_file: {exc}{hint}",
                                 options=("fusion_switch_file",)) from None


def check_session_passes(registry: Registry, options: NpuOptions) -> None:
    """Every pass ``enable_scope_fusion_passes`` names is a registered scope pass."""
    try:
        check_enabled_passes(registry, list(options.enable_scope_fusion_passes))
    except ScopeFusionError as exc:
        text = str(exc).replace("; known: ", "; allowed: scope fusion pass names separated by ',', of: ")
        raise SessionOptionError(f"{OPTIMIZER_NAME} option enable_scope_fusion_passes: {text}",
                                 options=("enable_scope_fusion_passes",)) from None


def tensorflow_config(config: Any) -> Any:
    """A copy of ``config`` without its NpuOptimizer entries (they are this session's options, not Grappler's)."""
    if config is None:
        return None
    copy = type(config)()
    copy.CopyFrom(config)
    optimizers = copy.graph_options.rewrite_options.custom_optimizers
    kept = [o for o in config.graph_options.rewrite_options.custom_optimizers if o.name != OPTIMIZER_NAME]
    del optimizers[:]
    for entry in kept:
        optimizers.add().CopyFrom(entry)
    return copy
