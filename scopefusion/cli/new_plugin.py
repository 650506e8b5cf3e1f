"""``scopefusion new-plugin NAME``: write a ready-to-install plugin package.

The package holds a working non-general pass (scopes named ``scale_shift``
computing ``x * a + b``), its fused-op definition with a TensorFlow reference
implementation, the entry point, a test written with the pytest plugin, and a
README.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import keyword
import re
import shutil
import sys
from pathlib import Path

from ..core.errors import OptionError, ScopeFusionError
from ..plugins.registry import normalise_distribution

#: A valid distribution name (PEP 508), ASCII only.
_DIST_NAME = re.compile(r"^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$")
#: Module names that would clash with scopefusion or with the package's own tests.
_RESERVED = frozenset({"scopefusion", "tensorflow", "test", "tests"})

PYPROJECT = '''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "scopefusion passes: {camel}ScaleShift"
requires-python = ">=3.10"
dependencies = ["scopefusion"]

[project.optional-dependencies]
test = ["pytest"]

[project.entry-points.scopefusion]
{module} = "{module}.plugin"

[tool.setuptools.packages.find]
where = ["src"]
'''

README = '''# {dist}

scopefusion passes. `{camel}ScaleShiftPass` (non-general) turns name scopes called `scale_shift`
that compute `x * a + b` with constant `a` and `b` into one `{camel}ScaleShift(x)` op.

```bash
pip install .                      # registers the plugin (entry point group "scopefusion")
scopefusion list --plugins         # shows {dist} 0.1.0 and what it contributes
scopefusion run model.pb --enable_scope_fusion_passes {camel}ScaleShiftPass --verify
pip install '.[test]' && python -m pytest tests
```

Edit `src/{module}/passes.py`: the pattern (`define_patterns`), the fused op (`generate_fusion_result`)
and its declaration with a reference implementation.
'''

PASSES = '''"""{camel}ScaleShiftPass: ``scale_shift`` scopes computing x * a + b -> {camel}ScaleShift(x)."""
from __future__ import annotations

from scopefusion import AttrDef, FusedOpDef, FusionScopesResult, ScopeBasePass, ScopePattern, TensorArg, fail


def scale_shift_reference(x, *, scale, shift, T):
    """What the fused op computes, in TensorFlow ops (used to run and verify fused graphs)."""
    return (x * scale + shift,)


SCALE_SHIFT = FusedOpDef(
    "{camel}ScaleShift",
    inputs=(TensorArg("x", type_attr="T"),),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(AttrDef("scale", "float"), AttrDef("shift", "float"), AttrDef("T", "type")),
    same_shape={{0: 0}},  # y has the shape of x: later stages' shape inference sees through the op
    reference=scale_shift_reference,
    description="y = x * scale + shift",
)


class {camel}ScaleShiftPass(ScopeBasePass):
    """scale_shift scopes (x * a + b) -> {camel}ScaleShift."""

    general = False  # runs only when named in enable_scope_fusion_passes

    def define_patterns(self):
        pattern = (
            ScopePattern("{camel}ScaleShift")
            .add_scope_feature(suffix="scale_shift")
            .add_node_op_type_feature("Mul", 1)
            .add_node_op_type_feature("AddV2", 1)
        )
        return [[[pattern]]]

    def generate_fusion_result(self, scopes, result: FusionScopesResult) -> None:
        scope = scopes[0]
        graph = scope.graph
        mul = scope.nodes_by_op("Mul")[0].name
        add = scope.nodes_by_op("AddV2")[0].name
        if graph.producer(add, 0) != (mul, 0):  # fail() refuses the match, naming the nodes; the report shows why
            fail("the AddV2 does not add to the Mul's output", add, mul)
        scale = graph.const_value(graph.producer(mul, 1)[0])
        shift = graph.const_value(graph.producer(add, 1)[0])
        if scale is None or shift is None or scale.size != 1 or shift.size != 1:
            fail("scale or shift is not a scalar constant", mul, add)
        result.set_type("{camel}ScaleShift")
        result.set_attr("scale", float(scale.reshape(-1)[0]))
        result.set_attr("shift", float(shift.reshape(-1)[0]))
        result.set_attr("T", graph.node(mul).attr["T"].type)
        result.insert_inputs(scope.suffix_of(mul), [0, None])
        result.insert_outputs(scope.suffix_of(add), [0])
'''

PLUGIN = '''"""The hooks scopefusion calls; named by the entry point in pyproject.toml."""
from scopefusion import hookimpl

from .passes import SCALE_SHIFT, {camel}ScaleShiftPass


@hookimpl
def scopefusion_scope_passes():
    return [{camel}ScaleShiftPass]


@hookimpl
def scopefusion_fused_ops():
    return [SCALE_SHIFT]
'''

TEST = '''"""Tests of {camel}ScaleShiftPass, using scopefusion's pytest plugin (fixture scopefusion_helper)."""
import tensorflow as tf

SPEC = tf.TensorSpec([2, 5], tf.float32, "x")


def model(x):
    with tf.name_scope("block/scale_shift"):
        y = x * 3.0 + 0.5
    with tf.name_scope("other"):
        z = y * 2.0 + 1.0  # same ops, but not in a scale_shift scope
    return tf.nn.relu(z)


def test_fuses_when_enabled_and_verifies(scopefusion_helper):
    graph = scopefusion_helper.graph_from_function(model, SPEC)
    result = scopefusion_helper.run(graph, enable="{camel}ScaleShiftPass")
    (node,) = scopefusion_helper.assert_fused(result, "{camel}ScaleShift", 1, scale=3.0, shift=0.5)
    assert node.name == "block/scale_shift"
    # "other" has the ops but not the scope name: a near miss, reported with the reason
    assert "scope name 'other' is not 'scale_shift'" in scopefusion_helper.assert_not_matched(result, "other")
    scopefusion_helper.assert_verified(graph, result)


def test_does_nothing_unless_enabled(scopefusion_helper):
    graph = scopefusion_helper.graph_from_function(model, SPEC)
    scopefusion_helper.assert_fused(scopefusion_helper.run(graph), "{camel}ScaleShift", 0)
'''


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_.]+", name) if part)


def _shadowed_location(module: str) -> str | None:
    """Where an importable module ``module`` lives, or None if there is none.

    A namespace package made only of directories under the current directory
    (which is on ``sys.path`` when Python runs with ``-m``) does not count.
    """
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # e.g. a module in sys.modules without a spec
        return "an already imported module"
    if spec is None:
        return None
    if spec.origin not in (None, "namespace"):
        return spec.origin
    cwd = Path.cwd().resolve()
    outside = [loc for loc in (spec.submodule_search_locations or [])
               if not Path(loc).resolve().is_relative_to(cwd)]
    return outside[0] if outside else None


def check_name(name: str) -> tuple[str, str]:
    """Validate a plugin name; returns its (distribution, module) names.

    The distribution name is the PEP 503 normalisation of ``name`` (which must
    be a valid PEP 508 name: ASCII letters, digits, ``-``, ``_`` and ``.``,
    beginning and ending with a letter or digit); the module name replaces
    ``-`` and ``.`` by ``_`` and must be a Python identifier that does not
    shadow a standard-library or already importable module.
    """
    if not _DIST_NAME.match(name):
        raise OptionError(
            f"plugin name {name!r} is not a valid distribution name: use ASCII letters, digits, '-', '_' "
            "and '.', beginning and ending with a letter or digit")
    module = re.sub(r"[-.]+", "_", name).lower()
    dist = normalise_distribution(name)
    if not module.isidentifier() or keyword.iskeyword(module):
        raise OptionError(
            f"plugin name {name!r} would make the module name {module!r}, which is not a valid Python "
            "identifier (it must begin with a letter and not be a keyword)")
    if module in sys.stdlib_module_names:
        raise OptionError(
            f"plugin name {name!r}: its module {module!r} would shadow the standard-library module {module!r}")
    where = _shadowed_location(module)
    if where is not None:
        raise OptionError(
            f"plugin name {name!r}: its module {module!r} would shadow the installed module {module!r} ({where})")
    if module in _RESERVED:
        raise OptionError(f"plugin name {name!r} would make an unusable module name {module!r}")
    try:
        installed = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed is not None:
        raise OptionError(
            f"plugin name {name!r}: a distribution {installed.metadata['Name']} {installed.version} is already "
            "installed, and installing the plugin would replace it")
    return dist, module


def new_plugin(name: str, directory: str | Path = ".") -> Path:
    """Write the package for plugin ``name`` under ``directory``; returns its root.

    Raises :class:`ScopeFusionError` for a bad name (see :func:`check_name`), a
    ``directory`` that is not a directory, or a package directory that exists.
    """
    dist, module = check_name(name)
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise OptionError(f"{directory} is not a directory")
    root = directory / dist
    if root.exists() or root.is_symlink():
        raise OptionError(f"{root} already exists; choose another name or --dir")
    values = {"dist": dist, "module": module, "camel": _camel(name)}
    files = {
        "pyproject.toml": PYPROJECT,
        "README.md": README,
        f"src/{module}/__init__.py": '"""scopefusion passes."""\n',
        f"src/{module}/passes.py": PASSES,
        f"src/{module}/plugin.py": PLUGIN,
        f"tests/test_{module}.py": TEST,
    }
    try:
        for rel, template in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(template.format(**values) if "{" in template else template)
    except OSError as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise ScopeFusionError(f"cannot write {root}: {exc.strerror or exc}") from exc
    return root
