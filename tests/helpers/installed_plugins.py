"""Test plugin distributions (``tests/plugins/packages``), pip-installed once per session.

Each package is installed into its own target directory; a test puts the
directories it needs on ``sys.path`` (fixture ``use_plugins``) or on ``PYTHONPATH``
of a subprocess (``cli``), so the ``scopefusion`` entry-point group holds exactly
those plugins.
"""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import importlib_metadata
import pytest

from scopefusion.plugins.registry import ALLOW_ENV, BLOCK_ENV, ENTRY_POINT_GROUP, NO_AUTOLOAD_ENV

PACKAGES_DIR = Path(__file__).resolve().parents[1] / "plugins" / "packages"

#: distribution -> (version, top-level module)
DISTRIBUTIONS = {
    "sf-test-extra": ("1.2.3", "sf_test_extra"),
    "sf-test-more": ("0.5.0", "sf_test_more"),
    "sf-test-dup": ("0.4.0", "sf_test_dup"),
    "sf-test-broken": ("0.0.1", "sf_test_broken"),
    "sf-test-badhook": ("0.2.0", "sf_test_badhook"),
    "sf-test-notpass": ("0.3.0", "sf_test_notpass"),
    "sf-test-graph": ("0.7.0", "sf_test_graph"),
}
PLUGIN_MODULES = tuple(module for _, module in DISTRIBUTIONS.values())
ENV_VARS = (BLOCK_ENV, ALLOW_ENV, NO_AUTOLOAD_ENV)


# --------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def plugin_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Install every test plugin (in parallel) into its own ``--target`` directory."""
    root = tmp_path_factory.mktemp("scopefusion-plugins")
    env = dict(os.environ, PIP_ROOT_USER_ACTION="ignore", PIP_NO_INPUT="1")
    jobs = {}
    for dist in DISTRIBUTIONS:
        # Build from a copy: an in-tree setuptools build leaves build/ and
        # *.egg-info behind in the source directory.
        src = root / "src" / dist
        shutil.copytree(PACKAGES_DIR / dist, src,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        target = root / "site" / dist
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
               "--no-index", "--no-cache-dir", "--disable-pip-version-check", "--target", str(target), str(src)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        jobs[dist] = (target, proc)
    dirs = {}
    for dist, (target, proc) in jobs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"pip install of {dist} failed:\n{out}\n{err}"
        version, module = DISTRIBUTIONS[dist]
        dist_info = target / f"{dist.replace('-', '_')}-{version}.dist-info"
        assert (dist_info / "entry_points.txt").is_file(), f"{dist}: no entry_points.txt in {dist_info}"
        assert (target / module).is_dir()
        dirs[dist] = target
    return dirs


def unload_plugin_modules() -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in PLUGIN_MODULES:
            del sys.modules[name]


def reset_import_state() -> None:
    unload_plugin_modules()
    importlib.invalidate_caches()  # includes importlib_metadata's finder on sys.meta_path
    importlib_metadata.MetadataPathFinder.invalidate_caches()


@pytest.fixture()
def use_plugins(
    plugin_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., list[Path]]:
    """``use_plugins(dist, ...)`` puts those installed plugins on ``sys.path``.

    Every test starts and ends with no plugin module imported and none of the
    registry's environment variables set.
    """
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    reset_import_state()

    def use(*dists: str) -> list[Path]:
        # Prepend in reverse so sys.path ends up in the order given.
        for dist in reversed(dists):
            monkeypatch.syspath_prepend(str(plugin_dirs[dist]))
        reset_import_state()
        return [plugin_dirs[d] for d in dists]

    yield use
    reset_import_state()


def loaded_plugin_modules() -> set[str]:
    return {name for name in sys.modules if name.split(".")[0] in PLUGIN_MODULES}


def group_names() -> set[str]:
    return {ep.name for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP)}


def cli_env(plugin_dirs: dict[str, Path], *dists: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    paths = [str(plugin_dirs[d]) for d in dists]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["COLUMNS"] = "250"  # rich: keep table cells on one line
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env.update(extra)
    return env


def run_command(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)


def cli(plugin_dirs, dists, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    return run_command([sys.executable, "-m", "scopefusion.cli", *args], cli_env(plugin_dirs, *dists, **extra_env))
