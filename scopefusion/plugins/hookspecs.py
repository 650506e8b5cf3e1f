"""Hook specifications.  A plugin is a module (or object) that implements
some of these with :data:`hookimpl` and is named in the ``scopefusion``
entry-point group of its distribution::

    [project.entry-points.scopefusion]
    my_passes = "my_package.plugin"
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from ..core.fusion.fused_ops import FusedOpDef
    from ..core.graph_fusion.base_pass import PatternFusionBasePass
    from ..core.scope.base_pass import ScopeBasePass

PROJECT = "scopefusion"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def scopefusion_scope_passes() -> Sequence["type[ScopeBasePass]"]:
    """Return the scope pass classes this plugin contributes, in the order
    they should run."""
    raise NotImplementedError


@hookspec
def scopefusion_graph_passes() -> Sequence["type[PatternFusionBasePass]"]:
    """Return the graph pass classes this plugin contributes, in the order
    they should run (the fusion switch file's Priority section may reorder them)."""
    raise NotImplementedError


@hookspec
def scopefusion_fused_ops() -> Sequence["FusedOpDef"]:
    """Return the fused-op definitions this plugin contributes."""
    raise NotImplementedError


@hookspec
def scopefusion_supported_ops() -> "Mapping[str, Mapping[str, bool]] | Sequence[str]":
    """Return the op types this plugin's back end runs, for mixed computation: op type names,
    or a mapping in the supported-ops file's format ``{"OpType": {"isGray": bool, "isHeavy":
    bool}}``.  With any plugin declaring ops (or a supported-ops file), the back end runs
    exactly those and the declared fused ops; without, the default set applies."""
    raise NotImplementedError
