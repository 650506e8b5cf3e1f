"""scopefusion: find TensorFlow subgraphs by name scope and op types and
replace each with one fused operator, through pluggable passes.

Importing this package does not import TensorFlow; loading, fusing and
emitting graphs do.
"""
from __future__ import annotations

from .api import FuseResult, fuse
from .core.base_pass import PassSpec, ScopeBasePass
from .core.errors import (
    EmitError,
    GraphLoadError,
    GraphValidationError,
    OptionError,
    PassError,
    PluginError,
    ScopeFusionError,
)
from .core.fused_ops import AttrDef, FusedOpDef, TensorArg
from .core.graph_index import GraphIndex
from .core.graph_io import LoadedModel, load_model, save_graph
from .core.options import FusionOptions
from .core.pass_manager import FusionOutcome, ScopePassManager
from .core.patterns import NodeAttrFeature, NodeOpTypeFeature, ScopeFeature, ScopePattern
from .core.report import FusedRecord, FusionReport, PassReport, Refusal
from .core.results import FusedInput, FusionScopesResult, InnerNode, ScopesResult
from .core.scope_graph import Scope, ScopeGraph, ScopeTree
from .core.verify import TensorComparison, VerifyResult, verify
from .plugins.hookspecs import hookimpl
from .plugins.registry import Registry, load_registry

__version__ = "0.1.0"

__all__ = [
    "AttrDef", "EmitError", "FuseResult", "FusedInput", "FusedOpDef", "FusedRecord", "FusionOptions",
    "FusionOutcome", "FusionReport", "FusionScopesResult", "GraphIndex", "GraphLoadError",
    "GraphValidationError", "InnerNode", "LoadedModel", "NodeAttrFeature", "NodeOpTypeFeature",
    "OptionError", "PassError", "PassReport", "PassSpec", "PluginError", "Refusal", "Registry", "Scope",
    "ScopeBasePass", "ScopeFeature", "ScopeFusionError", "ScopeGraph", "ScopePassManager", "ScopePattern",
    "ScopeTree", "ScopesResult", "TensorArg", "fuse", "hookimpl", "load_model", "load_registry",
    "save_graph", "TensorComparison", "VerifyResult", "verify", "__version__",
]
