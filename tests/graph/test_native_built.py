"""Every C extension of the graph core (``scopefusion/core/graph/native/_*.c``) is built in this
environment, and :func:`native_module` hands it out unless the pure-Python path is forced.  A build
that stopped working would otherwise go unnoticed: every other test passes on the pure-Python path
too, which gives the same results."""
from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest
from tests.helpers.native_paths import extension

from scopefusion.core.graph import native

SOURCES = sorted(p.stem for p in Path(native.__file__).parent.glob("_*.c"))


def test_the_sources_are_there():
    assert {"_edges", "_order", "_scan", "_scopes", "_tables"} <= set(SOURCES)
    assert tuple(SOURCES) == native.EXTENSIONS  # what --version reports is every source's module


@pytest.mark.parametrize("name", SOURCES)
def test_the_extension_is_built(name):
    module = extension(name)
    assert module.__file__ is not None and module.__file__.endswith(tuple(EXTENSION_SUFFIXES)), (
        f"{native.__name__}.{name} is not built: `pip install .` (or `python setup.py build_ext --inplace`) "
        f"needs a C compiler")


@pytest.mark.parametrize("name", SOURCES)
def test_native_module_hands_it_out_unless_the_pure_python_path_is_forced(name, monkeypatch):
    monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)
    native.native_module.cache_clear()
    try:
        assert native.native_module(name) is extension(name)
        assert native.native_status()[name] is True
        monkeypatch.setenv(native.PURE_PYTHON_ENV, "1")
        native.native_module.cache_clear()
        assert native.native_module(name) is None
        assert native.native_status()[name] is False
    finally:
        native.native_module.cache_clear()  # read again from the environment the run was started in
