"""Helpers for testing scope passes, shipped as a pytest plugin.

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

import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import pytest

from .api import FuseResult, fuse
from .core.base_pass import ScopeBasePass
from .core.fused_ops import FusedOpDef, attr_value_to_python
from .core.options import PassList
from .core.verify import VerifyResult, verify
from .plugins.registry import BUILTIN, Registry, load_registry

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef


def graph_from_function(fn: Callable[..., Any], *specs: Any) -> "GraphDef":
    """Trace ``fn`` over ``tf.TensorSpec`` inputs and freeze it to a GraphDef.

    Name the specs (``tf.TensorSpec([2, 8], tf.float32, "x")``) to name the
    Placeholders; name scopes opened inside ``fn`` become the graph's scopes.
    """
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = tf.function(fn, input_signature=list(specs), autograph=False).get_concrete_function()
    return convert_variables_to_constants_v2(concrete).graph.as_graph_def()


def registry_with(passes: Iterable[type[ScopeBasePass]] = (), fused_ops: Iterable[FusedOpDef] = (),
                  *, autoload: bool = True) -> Registry:
    """The installed registry plus extra pass classes and fused ops (tests of
    a pass that is not installed yet)."""
    from .plugins.hookspecs import hookimpl

    passes, fused_ops = list(passes), list(fused_ops)

    class _Extra:
        @hookimpl
        def scopefusion_scope_passes(self) -> list[type[ScopeBasePass]]:
            return passes

        @hookimpl
        def scopefusion_fused_ops(self) -> list[FusedOpDef]:
            return fused_ops

    extra = [("test-passes", _Extra())] if passes or fused_ops else []
    return load_registry(autoload=autoload, plugins=extra)


def fused_nodes(result: FuseResult, op_type: str) -> list[Any]:
    """Nodes of ``op_type`` in the fused form of a result."""
    return [n for n in result.fused_graph_def.node if n.op == op_type]


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, float) or isinstance(actual, float):
        return math.isclose(float(actual), float(expected), rel_tol=1e-5, abs_tol=1e-30)
    if isinstance(expected, (list, tuple)):
        return isinstance(actual, (list, tuple)) and len(actual) == len(expected) and all(
            _same(a, e) for a, e in zip(actual, expected))
    return bool(actual == expected)


def assert_fused(result: FuseResult, op_type: str, count: int, **attrs: Any) -> list[Any]:
    """Assert ``op_type`` appears ``count`` times, each with the given attribute values."""
    nodes = fused_nodes(result, op_type)
    refusals = "; ".join(f"{r.name}: {r.reason}" for r in result.report.refused) or "none"
    assert len(nodes) == count, (
        f"expected {count} fused {op_type} node(s), found {len(nodes)}; refusals: {refusals}")
    for node in nodes:
        for key, expected in attrs.items():
            assert key in node.attr, f"{node.name}: no attribute {key!r}"
            actual = attr_value_to_python(node.attr[key])
            assert _same(actual, expected), f"{node.name}: {key} is {actual!r}, expected {expected!r}"
    return nodes


def assert_not_matched(result: FuseResult, scope: str) -> str:
    """Assert nothing was fused for ``scope``; returns why (the refusal reason,
    or that no pattern matched it)."""
    fused = [f for f in result.report.fused if scope in f.scopes or f.name == scope]
    assert not fused, f"scope {scope!r} was fused as {fused[0].type} {fused[0].name!r}"
    for p in result.report.passes:
        for r in p.refused:
            if scope in r.scopes or r.name == scope:
                return f"{p.name}: {r.reason}"
    return "no pattern matched it"


def assert_verified(original: Any, result: FuseResult | Any, **options: Any) -> VerifyResult:
    """Run original and fused graphs in TensorFlow and assert every output matches."""
    fused_graph = result.fused_graph_def if isinstance(result, FuseResult) else result
    outcome = verify(original, fused_graph, **options)
    outcome.assert_ok()
    return outcome


class PassTester:
    """The ``scopefusion_helper`` fixture: the functions above, bound to a registry."""

    graph_from_function = staticmethod(graph_from_function)
    assert_fused = staticmethod(assert_fused)
    assert_not_matched = staticmethod(assert_not_matched)
    fused_nodes = staticmethod(fused_nodes)

    def __init__(self, registry: Registry | None = None) -> None:
        self._registry = registry

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = load_registry()
        return self._registry

    def with_passes(self, passes: Sequence[type[ScopeBasePass]] = (),
                    fused_ops: Sequence[FusedOpDef] = ()) -> "PassTester":
        """A tester whose registry also holds these (not installed) passes and ops."""
        return PassTester(registry_with(passes, fused_ops))

    def run(self, graph: Any, *, enable: PassList = None, only: Sequence[str] | None = None,
            emit: str = "fused", **options: Any) -> FuseResult:
        """Fuse ``graph`` with the registry; ``only`` keeps just the named passes
        (their general flag still decides whether ``enable`` must name them)."""
        registry = self.registry
        if only is not None:
            unknown = [n for n in only if n not in registry.pass_names()]
            assert not unknown, f"unknown pass(es) {unknown}; registered: {registry.pass_names()}"
            registry = Registry(
                passes=[p for p in registry.passes if p.name in only],
                fused_ops=registry.fused_ops, fused_op_origins=registry.fused_op_origins,
                plugins=registry.plugins, overrides=registry.overrides,
            )
        return fuse(graph, enable_scope_fusion_passes=enable, emit=emit, registry=registry, **options)

    def assert_verified(self, original: Any, result: FuseResult | Any, **options: Any) -> VerifyResult:
        options.setdefault("fused_ops", self.registry.fused_ops)
        return assert_verified(original, result, **options)

    def origin_of(self, pass_name: str) -> str:
        """``built-in`` or the distribution and version that registered a pass."""
        spec = self.registry.get(pass_name)
        return BUILTIN if spec.origin == BUILTIN else spec.origin


@pytest.fixture
def scopefusion_helper() -> PassTester:
    """Helpers to build graphs, run passes, and assert on and verify the result."""
    return PassTester()
