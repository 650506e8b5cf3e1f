"""The public surface: what ``scopefusion`` exports, what it still lends with a warning, and what the
example plugin (a real plugin package) imports."""
from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

import scopefusion

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scopefusion-example-plugin"
PUBLIC_MODULES = {"scopefusion", "scopefusion.testing", "scopefusion.core.graph.pattern"}


def test_every_exported_name_exists_and_none_is_listed_twice():
    assert len(set(scopefusion.__all__)) == len(scopefusion.__all__)
    missing = [name for name in scopefusion.__all__ if not hasattr(scopefusion, name)]
    assert not missing


@pytest.mark.parametrize("name", sorted(scopefusion._MOVED))
def test_a_name_no_longer_exported_still_imports_with_a_warning_naming_its_home(name):
    assert name not in scopefusion.__all__
    with pytest.warns(DeprecationWarning, match=rf"scopefusion\.{name} is internal now \({scopefusion._MOVED[name]}"):
        value = getattr(scopefusion, name)
    assert value.__name__ == name


def test_an_unknown_name_is_an_attribute_error():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
            scopefusion.NoSuchThing  # noqa: B018


def test_the_builtins_are_lent_by_name_read_only():
    assert scopefusion.BUILTIN_PASSES["ScopeLayerNormPass"].name == "ScopeLayerNormPass"
    assert scopefusion.BUILTIN_PASSES["GeluFusionPass"].name == "GeluFusionPass"
    assert callable(scopefusion.BUILTIN_FUSED_OPS["LayerNorm"].reference)
    with pytest.raises(TypeError):
        scopefusion.BUILTIN_PASSES["ScopeLayerNormPass"] = object  # type: ignore[index]


def test_the_example_plugin_imports_only_the_public_surface():
    sources = sorted(EXAMPLE.rglob("*.py"))
    assert sources
    used = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "scopefusion":
                used.add(node.module)
            elif isinstance(node, ast.Import):
                used.update(a.name for a in node.names if a.name.split(".")[0] == "scopefusion")
    assert used and used <= PUBLIC_MODULES, sorted(used - PUBLIC_MODULES)


def test_importing_the_package_and_its_pytest_plugin_loads_nothing_heavy():
    """``import scopefusion`` and the pytest plugin (loaded into every pytest run of the environment) import
    no part of the engine, no numpy and no TensorFlow: their names load on first use."""
    import subprocess
    import sys

    code = ("import sys, scopefusion, scopefusion.testing; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'tensorflow', 'google') "
            "or m.startswith(('scopefusion.api', 'scopefusion.core.graph', 'scopefusion.plugins'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"


def test_the_lazy_table_and_the_type_checkers_imports_name_the_same_things():
    source = Path(scopefusion.__file__).read_text()
    tree = ast.parse(source)
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    imported = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            imported[alias.asname or alias.name] = ("scopefusion." + node.module, alias.name)
    assert imported == scopefusion._PUBLIC
    assert set(scopefusion.__all__) == set(scopefusion._PUBLIC) | {"__version__"}


def test_the_function_explain_stays_when_its_subpackage_loads():
    from scopefusion.explain import hints  # loads the subpackage scopefusion.explain

    assert callable(scopefusion.explain) and scopefusion.explain.__name__ == "explain"
    assert hints.__name__ == "scopefusion.explain.hints"
