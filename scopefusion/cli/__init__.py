"""The command line: every command's arguments, printing, progress and summaries.

``scopefusion`` (the console script) and ``python -m scopefusion`` call :func:`main`.
"""
from __future__ import annotations

from .main import EXAMPLE_MODEL, build_parser, main

__all__ = ["EXAMPLE_MODEL", "build_parser", "main"]
