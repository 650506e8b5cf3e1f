"""scopefusion: find TensorFlow subgraphs by name scope (scope fusion) or by op
pattern (graph fusion) and replace each with one fused operator, through
pluggable passes.

Importing this package does not import TensorFlow; loading, fusing and
emitting graphs do.
"""
from __future__ import annotations

from .api import FuseResult, fuse, verify
from .core.errors import (
    EmitError,
    GraphLoadError,
    GraphValidationError,
    OptionError,
    PassError,
    PluginError,
    ScopeFusionError,
)
from .core.fusion.candidate import FusedInput, FusionCandidate, InnerNode
from .core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from .core.fusion.options import FusionOptions
from .core.fusion.pass_spec import PassSpec
from .core.fusion.pipeline import FusionOutcome, FusionPipeline
from .core.fusion.refusal import Refused, fail
from .core.fusion.report import FunctionRecord, FusedRecord, FusionReport, PassReport, Refusal
from .core.graph.index import GraphIndex
from .core.graph.io import LoadedModel, load_model, save_graph
from .core.graph.matching import MatchFailure, PatternMatch, PatternMatcher
from .core.graph.pattern import ANY, OpPattern, PatternDefinitionError, const, one_of, op, var
from .core.graph.view import GraphView
from .core.graph_fusion.base_pass import FusedOp, NotFused, PatternFusionBasePass, fused_input, inner_node
from .core.graph_fusion.engine import GraphFusionEngine
from .core.graph_fusion.fusion_pattern import FusionPattern, FusionPatternError
from .core.graph_fusion.switch import FusionSwitch, FusionSwitchError
from .core.scope.base_pass import ScopeBasePass
from .core.scope.pass_manager import ScopePassManager
from .core.scope.patterns import NodeAttrFeature, NodeOpTypeFeature, ScopeFeature, ScopePattern
from .core.scope.results import FusionScopesResult, ScopesResult
from .core.scope.scope_graph import Scope, ScopeGraph, ScopeTree
from .core.version import __version__
from .core.verify.verify import TensorComparison, VerifyResult
from .explain import Explanation, PassVerdict, explain
from .api import partition
from .plugins.hookspecs import hookimpl
from .plugins.registry import Registry, load_registry
from .session import Session


__all__ = [
    "ANY", "AttrDef", "EmitError", "Explanation", "FuseResult", "FusedInput", "FusedOp", "FusedOpDef", "FusedRecord",
    "FunctionRecord", "FusionCandidate", "FusionOptions", "FusionOutcome", "FusionPattern", "FusionPatternError",
    "FusionPipeline", "FusionReport", "FusionScopesResult", "FusionSwitch", "FusionSwitchError",
    "GraphFusionEngine", "GraphIndex", "GraphLoadError", "GraphValidationError", "GraphView", "InnerNode",
    "LoadedModel", "MatchFailure", "NodeAttrFeature", "NodeOpTypeFeature", "NotFused", "OpPattern",
    "OptionError", "PassError", "PassReport", "PassSpec", "PatternDefinitionError", "PatternFusionBasePass",
    "PassVerdict", "PatternMatch", "PatternMatcher", "PluginError", "Refusal", "Refused", "Registry", "Scope",
    "ScopeBasePass", "ScopeFeature", "ScopeFusionError", "ScopeGraph", "ScopePassManager", "ScopePattern", "ScopeTree",
    "ScopesResult", "Session", "TensorArg", "TensorComparison", "VerifyResult", "__version__", "const", "explain",
    "fail", "fuse",
    "fused_input", "hookimpl", "inner_node", "load_model", "load_registry", "one_of", "op", "partition", "save_graph",
    "var", "verify",
]
