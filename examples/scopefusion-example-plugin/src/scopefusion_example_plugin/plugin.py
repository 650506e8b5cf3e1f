"""The hooks scopefusion calls (entry point ``example`` in group ``scopefusion``)."""
from __future__ import annotations

from scopefusion import hookimpl

from .l2_normalize import L2_NORMALIZE, ScopeL2NormalizePass
from .layer_norm_v2 import LAYER_NORM_V2, ScopeLayerNormPass


@hookimpl
def scopefusion_scope_passes():
    return [ScopeL2NormalizePass, ScopeLayerNormPass]


@hookimpl
def scopefusion_fused_ops():
    return [L2_NORMALIZE, LAYER_NORM_V2]
