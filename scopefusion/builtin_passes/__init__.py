"""Built-in scope passes, registered through the same hooks as any plugin."""
from __future__ import annotations

from typing import Sequence

from ..core.base_pass import ScopeBasePass
from ..core.fused_ops import FusedOpDef
from ..plugins.hookspecs import hookimpl
from .layer_norm import LAYER_NORM, ScopeLayerNormPass

BUILTIN_PASSES: tuple[type[ScopeBasePass], ...] = (ScopeLayerNormPass,)
BUILTIN_FUSED_OPS: tuple[FusedOpDef, ...] = (LAYER_NORM,)


@hookimpl
def scopefusion_scope_passes() -> Sequence[type[ScopeBasePass]]:
    return BUILTIN_PASSES


@hookimpl
def scopefusion_fused_ops() -> Sequence[FusedOpDef]:
    return BUILTIN_FUSED_OPS
