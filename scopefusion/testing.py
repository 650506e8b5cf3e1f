"""Helpers for testing scope and graph passes, shipped as a pytest plugin.

Installed with scopefusion and loaded by pytest through the ``pytest11``
entry point, it provides the fixture ``scopefusion_helper`` (an instance of
:class:`PassTester`); the same functions can be imported from this module::

    def test_my_pass(scopefusion_helper):
        graph = scopefusion_helper.graph_from_function(model, tf.TensorSpec([2, 8], tf.float32, "x"))
        result = scopefusion_helper.run(graph, enable="MyPass")
        scopefusion_helper.assert_fused(result, "MyOp", 1, epsilon=1e-6)
        scopefusion_helper.assert_verified(graph, result)
"""
from __future__ import annotations

import dataclasses
import difflib
import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import pytest

import scopefusion  # cheap: its names load on first use, so this plugin costs pytest nothing until used

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

    from .api import FuseResult
    from .core.fusion.fused_ops import FusedOpDef
    from .core.fusion.options import PassList
    from .core.graph_fusion.base_pass import PatternFusionBasePass
    from .core.scope.base_pass import ScopeBasePass
    from .core.verify.verify import VerifyResult
    from .plugins.registry import Registry

    PassClass = type[ScopeBasePass] | type[PatternFusionBasePass]


def graph_from_function(fn: Callable[..., Any], *specs: Any) -> "GraphDef":
    """Trace ``fn`` over ``tf.TensorSpec`` inputs and freeze it to a GraphDef.

    Name the specs (``tf.TensorSpec([2, 8], tf.float32, "x")``) to name the
    Placeholders; name scopes opened inside ``fn`` become the graph's scopes.
    """
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import
    from tensorflow.python.framework.convert_to_constants import (  # deferred: TensorFlow
        convert_variables_to_constants_v2,
    )

    concrete = tf.function(fn, input_signature=list(specs), autograph=False).get_concrete_function()
    return convert_variables_to_constants_v2(concrete).graph.as_graph_def()


def registry_with(passes: Iterable["PassClass"] = (), fused_ops: Iterable["FusedOpDef"] = (),
                  *, autoload: bool = True) -> "Registry":
    """The built-in passes plus ``passes`` (scope or graph passes) and ``fused_ops``
    (tests of a pass that is not installed, or of a working copy of one that is).

    With ``autoload`` the installed plugins are loaded too, except any plugin
    (distribution) that contributes a pass or fused op with the name of one
    given here: that is the installed copy of the same plugin, and the given
    objects take its place instead of clashing with it. ``autoload=False``
    loads no installed plugin at all.
    """
    hookimpl, load_registry = scopefusion.hookimpl, scopefusion.load_registry
    passes, fused_ops = list(passes), list(fused_ops)
    scope_passes = [p for p in passes if getattr(p, "engine", None) != "graph"]
    graph_passes = [p for p in passes if getattr(p, "engine", None) == "graph"]

    class _Extra:
        @hookimpl
        def scopefusion_scope_passes(self) -> list["PassClass"]:  # those whose engine is scope
            return scope_passes

        @hookimpl
        def scopefusion_graph_passes(self) -> list["PassClass"]:  # those whose engine is graph
            return graph_passes

        @hookimpl
        def scopefusion_fused_ops(self) -> Iterable["FusedOpDef"]:
            return fused_ops

    if not passes and not fused_ops:
        return load_registry(autoload=autoload)
    block: list[str] = []
    if autoload:
        pass_names = {getattr(cls, "name", None) for cls in passes}
        op_names = {getattr(op, "name", None) for op in fused_ops}
        installed = load_registry(autoload=True)
        block = sorted({info.distribution for info in installed.plugins if not info.blocked and (
            pass_names.intersection(info.passes + info.graph_passes) or op_names.intersection(info.fused_ops))})
    return load_registry(autoload=autoload, block=block, plugins=[("test-passes", _Extra())])


def fused_nodes(result: "FuseResult", op_type: str) -> list[Any]:
    """Nodes of ``op_type`` in the fused form of a result."""
    return [n for n in result.fused_graph_def.node if n.op == op_type]


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, float) or isinstance(actual, float):
        return math.isclose(float(actual), float(expected), rel_tol=1e-5, abs_tol=1e-30)
    if isinstance(expected, (list, tuple)):
        return isinstance(actual, (list, tuple)) and len(actual) == len(expected) and all(
            _same(a, e) for a, e in zip(actual, expected, strict=True))
    return bool(actual == expected)


def _pass_errors(result: "FuseResult") -> list[str]:
    return [p.error for p in result.report.passes if p.error]


def _errors_text(errors: Sequence[str]) -> str:
    return f"{len(errors)} pass(es) raised (the run was not strict): " + "; ".join(errors)


def assert_fused(result: "FuseResult", op_type: str, count: int, **attrs: Any) -> list[Any]:
    """Assert ``op_type`` appears ``count`` times, each with the given attribute values.

    A pass that raised during a non-strict run makes this fail too (with the
    error), whatever the count: its matches are missing from the result.
    """
    # deferred: TensorFlow's message classes and the engine load when a test first uses a helper
    from .core.graph.attrs import attr_value_to_python

    nodes = fused_nodes(result, op_type)
    refusals = "; ".join(f"{r.name}: {r.reason}" for r in result.report.refused) or "none"
    errors = _pass_errors(result)
    found = f"expected {count} fused {op_type} node(s), found {len(nodes)}"
    assert not errors, f"{found}, but {_errors_text(errors)}; refusals: {refusals}"
    skipped = "; ".join(result.report.plugin_errors)
    assert len(nodes) == count, f"{found}; refusals: {refusals}" + (f"; plugins skipped: {skipped}" if skipped else "")
    for node in nodes:
        for key, expected in attrs.items():
            assert key in node.attr, f"{node.name}: no attribute {key!r}"
            actual = attr_value_to_python(node.attr[key])
            assert _same(actual, expected), f"{node.name}: {key} is {actual!r}, expected {expected!r}"
    return nodes


def _scope_names(result: "FuseResult") -> set[str]:
    """The scopes of the graph that was fused: those still in the result, plus
    every scope the report names (fused scopes are single nodes now)."""
    names: set[str] = set()
    for node in result.fused_graph_def.node:
        parts = node.name.split("/")
        names.update("/".join(parts[:i]) for i in range(1, len(parts)))
    for p in result.report.passes:
        names.update(p.matched_scopes)
        names.update(r.name for r in p.near_misses)
        names.update(s for record in p.fused for s in record.scopes)
        names.update(s for record in [*p.refused, *p.dropped] for s in record.scopes)
    return names


def _similar(scope: str, names: set[str]) -> list[str]:
    last = scope.rsplit("/", 1)[-1]
    same_end = sorted(n for n in names if n.endswith("/" + scope) or n.rsplit("/", 1)[-1] == last)
    close = difflib.get_close_matches(scope, sorted(names), n=5, cutoff=0.6)
    return list(dict.fromkeys([*same_end, *close]))[:5]


def assert_not_matched(result: "FuseResult", scope: str) -> str:
    """Assert nothing was fused for ``scope`` (a full scope name); returns why.

    Fails if the scope, or a scope holding it, was fused; if the graph has no
    scope of that name (a typo: the message lists similar names); or if a pass
    raised during a non-strict run (it might have fused the scope). Otherwise
    returns the reason: ``"<pass>: <reason>"`` for each pass that matched the
    scope and whose result was refused, else ``"<pass>: pattern <P>: <feature>
    wanted, ..."`` for each pass whose pattern the scope missed by a single
    feature (a near miss), else ``"no pattern matched it"``.
    """
    report = result.report
    for f in report.fused:
        if f.name == scope or scope in f.scopes:
            raise AssertionError(f"scope {scope!r} was fused as {f.type} {f.name!r}")
        outer = next((s for s in f.scopes if scope.startswith(s + "/")), None)
        if outer is not None:
            raise AssertionError(f"scope {scope!r} lies inside scope {outer!r}, which was fused as {f.type} {f.name!r}")
    names = _scope_names(result)
    if scope not in names:
        similar = _similar(scope, names)
        raise AssertionError(f"no scope named {scope!r} in the graph; scopes with a similar name: "
                             + (", ".join(repr(n) for n in similar) if similar else "none"))
    errors = _pass_errors(result)
    assert not errors, f"scope {scope!r} was not fused, but {_errors_text(errors)}"
    refused = [f"{p.name}: {r.reason}" for p in report.passes for r in p.refused
               if scope in r.scopes or r.name == scope]
    refused += [f"{p.name}: {r.reason} (kept {r.winner})" for p in report.passes for r in p.dropped
                if scope in r.scopes or r.name == scope]
    if refused:
        return "; ".join(refused)
    unused = [f"{p.name}: matched it, but the pass made no result for it"
              for p in report.passes if scope in p.matched_scopes]
    if unused:
        return "; ".join(unused)
    near = [f"{p.name}: {r.reason}" for p in report.passes for r in p.near_misses if r.name == scope]
    if near:
        return "; ".join(near)
    return "no pattern matched it"


def assert_verified(original: Any, result: "FuseResult | Any", **options: Any) -> "VerifyResult":
    """Run original and fused graphs in TensorFlow and assert every output matches."""
    fused_graph = result.fused_graph_def if isinstance(result, scopefusion.FuseResult) else result
    outcome = scopefusion.verify(original, fused_graph, **options)
    outcome.assert_ok()
    return outcome


class PassTester:
    """The ``scopefusion_helper`` fixture: the functions above, bound to a registry."""

    graph_from_function = staticmethod(graph_from_function)
    assert_fused = staticmethod(assert_fused)
    assert_not_matched = staticmethod(assert_not_matched)
    fused_nodes = staticmethod(fused_nodes)

    def __init__(self, registry: "Registry | None" = None) -> None:
        self._registry = registry

    @property
    def registry(self) -> "Registry":
        if self._registry is None:
            self._registry = scopefusion.load_registry()
        return self._registry

    def with_passes(self, passes: Sequence["PassClass"] = (),
                    fused_ops: Sequence["FusedOpDef"] = (), *, autoload: bool = False) -> "PassTester":
        """A tester whose registry is the built-in passes plus exactly these
        passes and fused ops (a pass with a built-in's name replaces it).

        Installed plugins are not loaded, so a test gives the same result before
        and after your package is installed, whatever else is installed.
        ``autoload=True`` loads them too, except the installed copy of the
        plugin these come from (any distribution contributing a pass or fused op
        of the same name), which these replace.
        """
        return PassTester(registry_with(passes, fused_ops, autoload=autoload))

    def run(self, graph: Any, *, enable: "PassList" = None, only: "PassList | None" = None,
            emit: str = "fused", strict: bool = True, **options: Any) -> "FuseResult":
        """Fuse ``graph`` with the registry.

        ``enable`` names non-general scope passes to run (general ones and graph
        passes always run).  ``only`` keeps just the named passes (scope or graph)
        and runs them, general or not.
        The run is strict by default: a pass that raises makes this raise
        :class:`~scopefusion.core.errors.PassError`, with the pass's own
        exception as its cause; ``strict=False`` reports and skips it instead
        (``result.report.passes[i].error``), as ``scopefusion run`` does.
        Other ``options`` go to :func:`scopefusion.fuse`.
        """
        # deferred: TensorFlow's message classes and the engine load when a test first uses a helper
        from .core.fusion.options import parse_pass_list

        registry = self.registry
        enabled = parse_pass_list(enable)
        if only is not None:
            only = parse_pass_list(only)
            known = registry.pass_names() + registry.graph_pass_names()
            unknown = [n for n in only if n not in known]
            assert not unknown, f"unknown pass(es) {unknown}; registered: {known}"
            registry = dataclasses.replace(registry, passes=[p for p in registry.passes if p.name in only],
                                           graph_passes=[p for p in registry.graph_passes if p.name in only])
            enabled += [n for n in only if n not in enabled and n in registry.pass_names()]
        return scopefusion.fuse(graph, enable_scope_fusion_passes=enabled, emit=emit, strict=strict,
                                registry=registry, **options)

    def assert_verified(self, original: Any, result: "FuseResult | Any", **options: Any) -> "VerifyResult":
        options.setdefault("fused_ops", self.registry.fused_ops)
        return assert_verified(original, result, **options)

    def origin_of(self, pass_name: str) -> str:
        """``built-in`` or the distribution and version that registered a pass."""
        # deferred: TensorFlow's message classes and the engine load when a test first uses a helper
        from .plugins.registry import BUILTIN

        spec = self.registry.get(pass_name)
        return BUILTIN if spec.origin == BUILTIN else spec.origin


@pytest.fixture
def scopefusion_helper() -> PassTester:
    """Helpers to build graphs, run passes, and assert on and verify the result."""
    return PassTester()
