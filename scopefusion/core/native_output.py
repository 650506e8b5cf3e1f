"""Keeping native output off the terminal.

TensorFlow's C++ code writes notices (oneDNN, CUDA drivers, a failed ``cuInit``)
straight to file descriptor 2, before and outside Python's logging, where no
log level reaches them.  The command line sends them to a temporary file while
it imports TensorFlow, loads SavedModels, loads plugins and runs sessions, and
shows them only when that fails unexpectedly: an error of the tool's own
(:class:`ScopeFusionError`) already says what went wrong in one line.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Iterator

from .errors import ScopeFusionError


@contextlib.contextmanager
def native_stderr_quiet(enabled: bool = True) -> Iterator[None]:
    """Keep what native code (TensorFlow's C++ logging: oneDNN and CUDA notices at import,
    a failed cuInit when a session starts) writes to file descriptor 2 off the terminal.
    If the block raises anything but a :class:`ScopeFusionError`, what was written
    is shown before the error."""
    if not enabled:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr: nothing to keep quiet
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        except ScopeFusionError:
            failed = False
            raise
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if failed:
                sink.seek(0)
                sys.stderr.write(sink.read().decode("utf-8", "replace"))


def import_tensorflow_quietly() -> None:
    """Import TensorFlow with its native start-up notices kept off the terminal."""
    if "tensorflow" in sys.modules:
        return
    with native_stderr_quiet():
        import tensorflow  # deferred: TensorFlow, imported only when a command needs it

        # the devices are looked for once per process: a failed cuInit is reported now, quietly,
        # not when the first session or function starts
        tensorflow.config.list_physical_devices()
