"""Built-in scope passes, registered through the same hooks as any plugin."""
from __future__ import annotations

from typing import Sequence

from ..core.base_pass import ScopeBasePass
from ..core.fused_ops import FusedOpDef
from ..plugins.hookspecs import hookimpl
from .instance_norm import INSTANCE_NORM, ScopeInstanceNormPass
from .layer_norm import LAYER_NORM, ScopeLayerNormPass

#: Registration order: general passes first, then the non-general ones.
BUILTIN_PASSES: tuple[type[ScopeBasePass], ...] = (ScopeLayerNormPass, ScopeInstanceNormPass)
BUILTIN_FUSED_OPS: tuple[FusedOpDef, ...] = (LAYER_NORM, INSTANCE_NORM)


@hookimpl
def scopefusion_scope_passes() -> Sequence[type[ScopeBasePass]]:
    return BUILTIN_PASSES


@hookimpl
def scopefusion_fused_ops() -> Sequence[FusedOpDef]:
    return BUILTIN_FUSED_OPS
