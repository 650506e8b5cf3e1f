"""The package's version, read by the package, the command line and the build."""
from __future__ import annotations

__version__ = "0.1.0"
