"""Running the graph core's native work (``scopefusion/core/graph/native/``) on the C path and on the
pure-Python path in one process, and comparing what the two give: the same values in the same
containers, the same errors."""
from __future__ import annotations

import importlib
from contextlib import ExitStack, contextmanager
from types import ModuleType
from typing import Any, Callable, Iterator
from unittest import mock

import pytest

from scopefusion.core.graph import edge_lists, layout, toposort
from scopefusion.core.graph.native import PURE_PYTHON_ENV, pure_python_forced
from scopefusion.core.scope import layout as scope_layout

PACKAGE = "scopefusion.core.graph.native"
#: the modules that hand their work to an extension (each looks it up through its ``native_module``)
DISPATCHING = (edge_lists, toposort, layout, scope_layout)


def extension(name: str) -> ModuleType:
    """The built extension ``name`` (``_edges``, ``_order``, ``_tables``, ``_scopes``), imported directly (also where
    SCOPEFUSION_PURE_PYTHON is set)."""
    return importlib.import_module(f"{PACKAGE}.{name}")


def edges_extension() -> ModuleType:
    return extension("_edges")


BUILD_HINT = "build it with `pip install .` or, in a checkout, `python setup.py build_ext --inplace`"


def required_extension(name: str) -> ModuleType:
    """:func:`extension` ``name`` for a test of the C path: where it is not built, the test is skipped
    only when SCOPEFUSION_PURE_PYTHON forces the pure-Python path; anywhere else that is a failure."""
    try:
        return extension(name)
    except ImportError as exc:
        if pure_python_forced():
            pytest.skip(f"the {name} extension is not built and {PURE_PYTHON_ENV} forces the pure-Python path")
        pytest.fail(f"the {name} extension is not built ({exc}); {BUILD_HINT}")


@contextmanager
def using(native: bool) -> Iterator[None]:
    """Run the dispatching functions on the C extensions (``native``) or on the pure-Python path."""
    def look_up(name: str) -> ModuleType | None:
        return extension(name) if native else None

    with ExitStack() as stack:
        for module in DISPATCHING:
            stack.enter_context(mock.patch.object(module, "native_module", look_up))
        yield


def outcome(run: Callable[[], Any]) -> tuple[str, Any]:
    """What ``run`` returned, or the type and message of what it raised."""
    try:
        return "returned", run()
    except Exception as error:  # noqa: BLE001 - errors are compared, whatever they are
        return "raised", (type(error), str(error))


def on_both_paths(run: Callable[[], Any]) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """``run()``'s outcome on the pure-Python path and on the C path."""
    with using(False):
        pure = outcome(run)
    with using(True):
        native = outcome(run)
    return pure, native


def assert_same(a: Any, b: Any, where: str = "") -> None:
    """``a`` and ``b`` are equal and built of the same container types (tuples where tuples are,
    lists where lists are, dicts with their keys in the same order)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: {len(a)} items vs {len(b)}"
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{k}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys differ"
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def assert_same_on_both_paths(run: Callable[[], Any]) -> Any:
    """``run`` gives the same on both paths (or raises the same); returns what it gave."""
    pure, native = on_both_paths(run)
    assert pure[0] == native[0], f"pure Python {pure}, C {native}"
    if pure[0] == "raised":
        assert pure[1] == native[1]
    else:
        assert_same(pure[1], native[1])
    return native[1]


_EMPTY: tuple = tuple()


def empty_tuples_shared(lists: list) -> bool:
    """Every per-node entry without edges is the one shared empty tuple."""
    return all(item is _EMPTY for item in lists if not item)
