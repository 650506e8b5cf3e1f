"""A one-line progress display (a rich spinner and what is being done) on standard error while
long work runs: loading and freezing a model, the fusion stages, verification runs.

Only on a terminal: when standard error is piped or redirected (or ``TERM=dumb``) nothing is shown.
The line is transient: it is gone when the work is done, so the output reads the same either way.
It writes to its own copy of the terminal's file descriptor, so it stays visible while native
TensorFlow output is kept off file descriptor 2.
"""
from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import IO, Any

from rich.console import Console


def on_terminal() -> bool:
    try:
        return sys.stderr.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):
        return False


class Progress:
    """``with Progress() as progress: progress.update("fusing")``; does nothing off a terminal."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = on_terminal() if enabled is None else enabled
        self._status: Any = None
        self._stream: IO[str] | None = None

    def __enter__(self) -> "Progress":
        if self.enabled:
            sys.stderr.flush()
            self._stream = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
            console = Console(file=self._stream, stderr=True, highlight=False)
            self._status = console.status("starting", spinner="dots")
            self._status.start()
        return self

    def update(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text)

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None
