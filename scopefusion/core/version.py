"""The package's version, read by the package, the command line and the build."""
from __future__ import annotations

import functools
import importlib.metadata
import platform

__version__ = "0.1.0"


@functools.lru_cache(maxsize=1)
def installed_versions() -> dict[str, str]:
    """The versions a report records: this package, TensorFlow, protobuf and Python (read from the
    installed distributions' metadata, without importing them; "not installed" when one is missing)."""
    versions = {"scopefusion": __version__}
    for name in ("tensorflow", "protobuf"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    versions["python"] = platform.python_version()
    return versions
