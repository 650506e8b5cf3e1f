"""The graph core's native parts: C extensions built from this folder's ``_*.c`` sources by
``pip install`` (``setup.py``), each with a pure-Python equivalent giving the same results.

:func:`native_module` hands out an extension module, or ``None`` when it was not built (no C
compiler at install time) or when the environment variable :data:`PURE_PYTHON_ENV` is set to
anything but ``0`` or nothing, which forces the pure-Python path (the tests run both).
"""
from __future__ import annotations

import importlib
import os
from functools import cache
from types import ModuleType

#: set to ``1`` to use the pure-Python path even where the C extensions are built
PURE_PYTHON_ENV = "SCOPEFUSION_PURE_PYTHON"
#: the extension modules, one per ``<name>.c`` source of this folder (an installed package may hold
#: the built modules without their sources); ``common.h`` and ``wire.h`` hold what the sources share
EXTENSIONS = ("_edges", "_order", "_scan", "_scopes", "_signatures", "_tables")


def pure_python_forced() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


@cache
def native_module(name: str) -> ModuleType | None:
    """The extension module ``name`` (``_scan``, ``_edges`` ...) of this package, or ``None`` to
    use the pure-Python path.  Read once per process."""
    if pure_python_forced():
        return None
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        return None


def native_status() -> dict[str, bool]:
    """Which extension modules this process uses (by module name), for ``--version`` and reports."""
    return {name: native_module(name) is not None for name in EXTENSIONS}


def native_summary() -> str:
    """One phrase saying which path this process takes, as ``scopefusion --version`` prints it."""
    status = native_status()
    if pure_python_forced():
        return f"pure-Python core, forced by {PURE_PYTHON_ENV}"
    if status and all(status.values()):
        return "native core: " + ", ".join(status)
    missing = [name for name, built in status.items() if not built]
    return f"pure-Python core; not built: {', '.join(missing)}" if missing else "pure-Python core"
