"""scopefusion: find TensorFlow subgraphs by name scope (scope fusion) or by op
pattern (graph fusion) and replace each with one fused operator, through
pluggable passes.

Importing this package does not import TensorFlow; loading, fusing and
emitting graphs do.

The public surface is what this module exports (``__all__``), ``scopefusion.testing`` and the
op-pattern language (:mod:`scopefusion.core.graph.pattern`, whose names are exported here too, with
:func:`pattern_from_function`, a pattern written as the TensorFlow function that computes it).
Every other module is internal and may change in any release.  A few names this module used to
export are still importable from it, with a :class:`DeprecationWarning` naming where they live now.
"""
from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any

from .core.version import __version__

if TYPE_CHECKING:  # the names below, for type checkers; at run time each is imported on first use
    from .api import FuseResult, fuse, load, partition, verify
    from .builtin_passes import BUILTIN_FUSED_OPS_BY_NAME as BUILTIN_FUSED_OPS
    from .builtin_passes import BUILTIN_PASSES_BY_NAME as BUILTIN_PASSES
    from .core.errors import (
        EmitError,
        GraphLoadError,
        GraphValidationError,
        OptionError,
        PassError,
        PluginError,
        ScopeFusionError,
    )
    from .core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
    from .core.fusion.refusal import Refused, fail
    from .core.fusion.report import FusionReport
    from .core.graph.io import load_model, save_graph
    from .core.graph.function_pattern import FunctionPattern, pattern_from_function
    from .core.graph.matching import MatchFailure, PatternMatch, PatternMatcher
    from .core.graph.pattern import ANY, OpPattern, PatternDefinitionError, const, one_of, op, var
    from .core.graph.view import GraphView
    from .core.graph_fusion.base_pass import FusedOp, NotFused, PatternFusionBasePass, fused_input, inner_node
    from .core.graph_fusion.fusion_pattern import FusionPattern, FusionPatternError
    from .core.graph_fusion.switch import FusionSwitch, FusionSwitchError
    from .core.scope.base_pass import ScopeBasePass
    from .core.scope.patterns import NodeAttrFeature, NodeOpTypeFeature, ScopeFeature, ScopePattern
    from .core.scope.results import FusionScopesResult, ScopesResult
    from .core.scope.scope_graph import Scope, ScopeGraph
    from .core.verify.verify import VerifyResult
    from .explain import Explanation, explain
    from .plugins.hookspecs import hookimpl
    from .plugins.registry import Registry, load_registry
    from .session import Session

#: every public name but ``__version__`` -> (the module that holds it, its name there); ``import
#: scopefusion`` imports none of them, so the package (and the pytest plugin) load in milliseconds
_PUBLIC: dict[str, tuple[str, str]] = {
    "FuseResult": ("scopefusion.api", "FuseResult"),
    "fuse": ("scopefusion.api", "fuse"),
    "load": ("scopefusion.api", "load"),
    "partition": ("scopefusion.api", "partition"),
    "verify": ("scopefusion.api", "verify"),
    "BUILTIN_FUSED_OPS": ("scopefusion.builtin_passes", "BUILTIN_FUSED_OPS_BY_NAME"),
    "BUILTIN_PASSES": ("scopefusion.builtin_passes", "BUILTIN_PASSES_BY_NAME"),
    "EmitError": ("scopefusion.core.errors", "EmitError"),
    "GraphLoadError": ("scopefusion.core.errors", "GraphLoadError"),
    "GraphValidationError": ("scopefusion.core.errors", "GraphValidationError"),
    "OptionError": ("scopefusion.core.errors", "OptionError"),
    "PassError": ("scopefusion.core.errors", "PassError"),
    "PluginError": ("scopefusion.core.errors", "PluginError"),
    "ScopeFusionError": ("scopefusion.core.errors", "ScopeFusionError"),
    "AttrDef": ("scopefusion.core.fusion.fused_ops", "AttrDef"),
    "FusedOpDef": ("scopefusion.core.fusion.fused_ops", "FusedOpDef"),
    "TensorArg": ("scopefusion.core.fusion.fused_ops", "TensorArg"),
    "Refused": ("scopefusion.core.fusion.refusal", "Refused"),
    "fail": ("scopefusion.core.fusion.refusal", "fail"),
    "FusionReport": ("scopefusion.core.fusion.report", "FusionReport"),
    "load_model": ("scopefusion.core.graph.io", "load_model"),
    "save_graph": ("scopefusion.core.graph.io", "save_graph"),
    "FunctionPattern": ("scopefusion.core.graph.function_pattern", "FunctionPattern"),
    "pattern_from_function": ("scopefusion.core.graph.function_pattern", "pattern_from_function"),
    "MatchFailure": ("scopefusion.core.graph.matching", "MatchFailure"),
    "PatternMatch": ("scopefusion.core.graph.matching", "PatternMatch"),
    "PatternMatcher": ("scopefusion.core.graph.matching", "PatternMatcher"),
    "ANY": ("scopefusion.core.graph.pattern", "ANY"),
    "OpPattern": ("scopefusion.core.graph.pattern", "OpPattern"),
    "PatternDefinitionError": ("scopefusion.core.graph.pattern", "PatternDefinitionError"),
    "const": ("scopefusion.core.graph.pattern", "const"),
    "one_of": ("scopefusion.core.graph.pattern", "one_of"),
    "op": ("scopefusion.core.graph.pattern", "op"),
    "var": ("scopefusion.core.graph.pattern", "var"),
    "GraphView": ("scopefusion.core.graph.view", "GraphView"),
    "FusedOp": ("scopefusion.core.graph_fusion.base_pass", "FusedOp"),
    "NotFused": ("scopefusion.core.graph_fusion.base_pass", "NotFused"),
    "PatternFusionBasePass": ("scopefusion.core.graph_fusion.base_pass", "PatternFusionBasePass"),
    "fused_input": ("scopefusion.core.graph_fusion.base_pass", "fused_input"),
    "inner_node": ("scopefusion.core.graph_fusion.base_pass", "inner_node"),
    "FusionPattern": ("scopefusion.core.graph_fusion.fusion_pattern", "FusionPattern"),
    "FusionPatternError": ("scopefusion.core.graph_fusion.fusion_pattern", "FusionPatternError"),
    "FusionSwitch": ("scopefusion.core.graph_fusion.switch", "FusionSwitch"),
    "FusionSwitchError": ("scopefusion.core.graph_fusion.switch", "FusionSwitchError"),
    "ScopeBasePass": ("scopefusion.core.scope.base_pass", "ScopeBasePass"),
    "NodeAttrFeature": ("scopefusion.core.scope.patterns", "NodeAttrFeature"),
    "NodeOpTypeFeature": ("scopefusion.core.scope.patterns", "NodeOpTypeFeature"),
    "ScopeFeature": ("scopefusion.core.scope.patterns", "ScopeFeature"),
    "ScopePattern": ("scopefusion.core.scope.patterns", "ScopePattern"),
    "FusionScopesResult": ("scopefusion.core.scope.results", "FusionScopesResult"),
    "ScopesResult": ("scopefusion.core.scope.results", "ScopesResult"),
    "Scope": ("scopefusion.core.scope.scope_graph", "Scope"),
    "ScopeGraph": ("scopefusion.core.scope.scope_graph", "ScopeGraph"),
    "VerifyResult": ("scopefusion.core.verify.verify", "VerifyResult"),
    "Explanation": ("scopefusion.explain", "Explanation"),
    "explain": ("scopefusion.explain", "explain"),
    "hookimpl": ("scopefusion.plugins.hookspecs", "hookimpl"),
    "Registry": ("scopefusion.plugins.registry", "Registry"),
    "load_registry": ("scopefusion.plugins.registry", "load_registry"),
    "Session": ("scopefusion.session", "Session"),
}

__all__ = [
    # running it: the same jobs as the command line
    "fuse", "verify", "partition", "explain", "load", "load_model", "save_graph", "Session", "load_registry",
    "FuseResult", "VerifyResult", "Explanation", "Registry", "FusionSwitch", "FusionReport", "__version__",
    # errors
    "ScopeFusionError", "GraphLoadError", "GraphValidationError", "OptionError", "PluginError", "PassError",
    "EmitError", "FusionSwitchError", "FusionPatternError", "PatternDefinitionError",
    # writing a plugin: hooks, fused ops, the one way to refuse, and the built-ins to extend
    "hookimpl", "FusedOpDef", "AttrDef", "TensorArg", "fail", "Refused", "BUILTIN_PASSES", "BUILTIN_FUSED_OPS",
    # scope passes
    "ScopeBasePass", "ScopePattern", "ScopeFeature", "NodeOpTypeFeature", "NodeAttrFeature",
    "FusionScopesResult", "ScopesResult", "ScopeGraph", "Scope",
    # graph passes and the op-pattern language
    "PatternFusionBasePass", "FusionPattern", "FusedOp", "NotFused", "fused_input", "inner_node",
    "OpPattern", "op", "const", "var", "one_of", "ANY", "pattern_from_function", "FunctionPattern", "GraphView",
    "PatternMatcher", "PatternMatch", "MatchFailure",
]

#: names this module exported before its public surface was made small: still importable from
#: here (with a warning), but internal; each maps to the module that holds it
_MOVED = {
    "FusedInput": "scopefusion.core.fusion.candidate",
    "FusionCandidate": "scopefusion.core.fusion.candidate",
    "InnerNode": "scopefusion.core.fusion.candidate",
    "FusionOptions": "scopefusion.core.fusion.options",
    "PassSpec": "scopefusion.core.fusion.pass_spec",
    "FusionOutcome": "scopefusion.core.fusion.pipeline",
    "FusionPipeline": "scopefusion.core.fusion.pipeline",
    "GraphIndex": "scopefusion.core.graph.index",
    "GraphFusionEngine": "scopefusion.core.graph_fusion.engine",
    "ScopePassManager": "scopefusion.core.scope.pass_manager",
    "ScopeTree": "scopefusion.core.scope.scope_graph",
    # parts of results, reached through them (``report.passes``, ``result.comparisons``, ...)
    "FunctionRecord": "scopefusion.core.fusion.report",
    "FusedRecord": "scopefusion.core.fusion.report",
    "PassReport": "scopefusion.core.fusion.report",
    "Refusal": "scopefusion.core.fusion.report",
    "TensorComparison": "scopefusion.core.verify.verify",
    "PassVerdict": "scopefusion.explain.explanation",
    "LoadedModel": "scopefusion.core.graph.io",
}


def __getattr__(name: str) -> Any:
    public = _PUBLIC.get(name)
    if public is not None:
        value = getattr(importlib.import_module(public[0]), public[1])
        globals()[name] = value  # found here from now on
        return value
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'scopefusion' has no attribute {name!r}")
    warnings.warn(f"scopefusion.{name} is internal now ({module}.{name}); it will not stay exported from "
                  "scopefusion", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """``scopefusion`` itself: ``scopefusion.explain`` is the function :func:`explain`, though a
    subpackage has the same name; when the import system loads that subpackage it binds it here,
    which this leaves out (``from scopefusion.explain import hints`` still finds it)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "explain" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
