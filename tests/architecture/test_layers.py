"""The package's layers, checked on its source: every import points downward.

From the top: the command line; ``scopefusion.Session``; the Python API; the HTML report and
explain (which do not import each other); plugin loading; the built-in passes; the engines (which
do not import each other); the shared fusion machinery; the session options; the graph layer; the
leaf modules of ``core``.  ``scopefusion/__init__.py``, ``__main__.py`` and ``testing.py`` are the
public front and may import anything; nothing inside the package imports them.

An import inside a function is allowed only to defer TensorFlow, and says so in a comment on its
line or the line above (``# deferred: TensorFlow``); or, for a module that costs the command's
start-up more than it is worth to load at once, ``# deferred: start-up time`` with the reason.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "scopefusion"

#: top to bottom; a tuple of several names is a layer whose members do not import each other
LAYERS: list[tuple[str, ...]] = [
    ("cli",),
    ("session",),
    ("api",),
    ("report", "explain"),
    ("plugins",),
    ("builtin_passes",),
    ("plugins.hookspecs",),  # the hook markers every plugin (the built-ins too) implements
    ("core.scope", "core.graph_fusion", "core.partition", "core.functions", "core.verify"),
    ("core.fusion",),
    ("core.options",),
    ("core.graph",),
    ("core.errors", "core.parameters", "core.native_output", "core.version"),
]
#: scopefusion/__init__.py, __main__.py, testing.py; core/__init__.py and examples/ hold no code
FRONT = {"", "__main__", "testing", "core", "examples"}
#: leaf modules of the lowest layer may import each other (errors are raised everywhere)
SHARED_LEAVES = {"core.errors", "core.parameters", "core.native_output", "core.version"}
DEFERRED = re.compile(r"#.*\bdeferred\b.*(\bTensorFlow\b|\bstart-up time\b)", re.IGNORECASE)


def _unit(module: str) -> str:
    """The layer unit a module (dotted, relative to the package) belongs to."""
    if module in FRONT:
        return module
    units = sorted((u for layer in LAYERS for u in layer), key=len, reverse=True)
    for unit in units:
        if module == unit or module.startswith(unit + "."):
            return unit
    raise AssertionError(f"scopefusion.{module} belongs to no layer: add it to LAYERS in {__file__}")


def _rank(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def _module_of(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _imports(path: Path, root: Path) -> list[tuple[int, str, bool]]:
    """(line, imported module relative to the package, inside a function) for each import; an import from
    outside the package is ``<external>``."""
    module, is_package = _module_of(path, root)
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".") if module else []
                    if not is_package:
                        base = base[:-1]
                    base = base[:len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                    names = [target + "." + a.name if target else a.name for a in child.names] if not child.module \
                        else [target]
                    found.extend((child.lineno, t, in_function) for t in names)
                elif child.module and (child.module == "scopefusion" or child.module.startswith("scopefusion.")):
                    found.append((child.lineno, child.module[len("scopefusion."):], in_function))
                else:
                    found.append((child.lineno, "<external>", in_function))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    target = alias.name[len("scopefusion."):] if alias.name.startswith("scopefusion.") else "<external>"
                    found.append((child.lineno, target, in_function))
            visit(child, nested)

    visit(tree, False)
    return found


def _unit_of_target(target: str, root: Path) -> str:
    """The unit of an imported module of the package; ``""`` (the front) for the package itself
    (``from .. import x`` where ``x`` is not a module)."""
    while target:
        if (root / (target.replace(".", "/") + ".py")).exists() or (root / target.replace(".", "/")).is_dir():
            return _unit(target)
        target = target.rpartition(".")[0]
    return ""


def upward_imports(root: Path = PACKAGE) -> list[str]:
    problems = []
    for path in sorted(root.rglob("*.py")):
        module, _ = _module_of(path, root)
        unit = _unit(module)
        if unit in FRONT:
            continue
        for line, target, _ in _imports(path, root):
            if target == "<external>":
                continue
            other = _unit_of_target(target, root)
            if other == unit:
                continue
            where = f"{path.relative_to(root.parent)}:{line}"
            if other in FRONT:
                problems.append(f"{where}: {unit} imports the package front (scopefusion.{target or '__init__'})")
            elif _rank(other) < _rank(unit):
                problems.append(f"{where}: {unit} imports {other}, a layer above it")
            elif _rank(other) == _rank(unit) and not (unit in SHARED_LEAVES and other in SHARED_LEAVES):
                problems.append(f"{where}: {unit} imports {other}, its sibling in the same layer")
    return problems


def undeclared_deferred_imports(root: Path = PACKAGE) -> list[str]:
    problems = []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text().splitlines()
        for line, _target, in_function in _imports(path, root):
            if not in_function:
                continue
            text = lines[line - 1] + "\n" + (lines[line - 2] if line >= 2 else "")
            if not DEFERRED.search(text):
                problems.append(f"{path.relative_to(root.parent)}:{line}: {lines[line - 1].strip()}")
    return problems


def test_every_import_points_downward():
    problems = upward_imports()
    assert not problems, "imports against the layers:\n" + "\n".join(problems)


def test_imports_inside_functions_only_defer_tensorflow():
    problems = undeclared_deferred_imports()
    assert not problems, ("imports inside functions without a '# deferred: TensorFlow ...' or "
                          "'# deferred: start-up time ...' comment (move them to the top of the module):\n"
                          + "\n".join(problems))


@pytest.mark.parametrize("source, expected", [
    ("from ...cli import main\n", "core.graph imports cli, a layer above it"),
    ("from ..scope.base_pass import ScopeBasePass\n", "core.graph imports core.scope, a layer above it"),
    ("from ... import Session\n", "core.graph imports the package front"),
])
def test_an_upward_import_is_caught(tmp_path, source, expected):
    """The check itself: a copy of the package with one upward import added fails it."""
    import shutil

    copy = tmp_path / "scopefusion"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pb"))
    target = copy / "core" / "graph" / "vocabulary.py"
    target.write_text(target.read_text() + source)
    problems = upward_imports(copy)
    assert any(expected in p and "vocabulary.py" in p for p in problems), problems


def test_a_sibling_engine_import_is_caught(tmp_path):
    import shutil

    copy = tmp_path / "scopefusion"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pb"))
    target = copy / "core" / "partition" / "edges.py"
    target.write_text(target.read_text() + "from ..graph_fusion.switch import FusionSwitch\n")
    problems = upward_imports(copy)
    assert any("core.partition imports core.graph_fusion, its sibling" in p for p in problems), problems


def test_an_undeclared_import_inside_a_function_is_caught(tmp_path):
    """The deferral rule itself: a function-level import without the comment is reported, one
    saying ``deferred: TensorFlow`` or ``deferred: start-up time`` is not."""
    import shutil

    copy = tmp_path / "scopefusion"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pb"))
    target = copy / "core" / "graph" / "vocabulary.py"
    text = target.read_text()
    added = ("\n\ndef _late():\n    import json\n\n\ndef _heavy():\n    import tensorflow  # deferred: TensorFlow\n"
             "\n\ndef _slow():\n    # deferred: start-up time (a test)\n    import json\n")
    target.write_text(text + added)
    late = len((text + "\n\ndef _late():\n").splitlines()) + 1
    problems = [p for p in undeclared_deferred_imports(copy) if "vocabulary.py" in p]
    assert problems == [f"scopefusion/core/graph/vocabulary.py:{late}: import json"], problems
