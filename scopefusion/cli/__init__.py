"""The command line: every command's arguments, printing, progress and summaries.

``scopefusion`` (the console script) and ``python -m scopefusion`` call :func:`main`.  Ctrl-C
while the command's modules are still being imported ends the command as an interrupt during
its work does: one line, exit status 130, no traceback.
"""
from __future__ import annotations

import os
import sys

try:
    from .main import EXAMPLE_MODEL, build_parser, main
except KeyboardInterrupt:
    _program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if _program not in ("scopefusion", "__main__.py", "-m"):  # imported by a program of someone else's
        raise
    print("scopefusion: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

__all__ = ["EXAMPLE_MODEL", "build_parser", "main"]
