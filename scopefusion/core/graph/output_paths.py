"""Where results go: output paths checked before any work, and every result
written at the end, atomically, all or nothing.

The rules:

* ``-`` is standard output.
* A symbolic link is followed on purpose: the file it points to is replaced
  (atomically, in that file's directory) and the link stays a link.
* Anything but a regular file (a FIFO, a device, a socket), as the path or as
  the target of a link, is refused: it is never replaced by a regular file.
* The directory must exist and accept a new file; that is tried, with a probe
  file created and removed, so the answer is the file system's own.
* Temporary files have short names (``.sf-XXXXXXXX.tmp``), so a destination
  name of the longest length the file system allows still works.
* SIGTERM or SIGHUP arriving while results are written (when the program has
  no handler of its own for them) removes the temporary files, then ends the
  process as the signal would have; SIGINT does the same through
  ``KeyboardInterrupt``.  A later result failing undoes the earlier ones.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import signal
import stat
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable, Iterator, Sequence, Union

from ..errors import OptionError

STDOUT = "-"
TEMP_PREFIX = ".sf-"
TEMP_SUFFIX = ".tmp"
#: what is written to one place: bytes, or chunks of bytes taken one at a time (a large graph's
#: encoding, :class:`.encoded_graph.EncodedGraph`, so it is never held whole)
Payload = Union[bytes, Iterable[bytes]]
_TERMINATING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class OutputPathError(OptionError):
    """An output path that cannot or must not be written (a usage error: the command names it)."""


@dataclass(frozen=True)
class OutputTarget:
    """One place to write: standard output, or a regular file (links resolved)."""

    given: str
    path: Path | None  # None: standard output

    @property
    def is_stdout(self) -> bool:
        return self.path is None

    def __str__(self) -> str:
        return "standard output" if self.path is None else self.given


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def resolve_output(given: str, what: str) -> OutputTarget:
    """Check ``given`` (``-`` or a path) as the destination of ``what`` ("output", "report").

    Raises :class:`OutputPathError` for a directory, a special file, a missing
    directory or one that does not accept a new file.
    """
    if given == STDOUT:
        return OutputTarget(given, None)
    path = Path(given)
    real = Path(os.path.realpath(path))
    link = f" (a link to {real})" if path.is_symlink() else ""
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputPathError(f"{given}: cannot use it for the {what} ({exc.strerror})") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputPathError(f"{given}: is a directory{link}; give a file name for the {what}")
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputPathError(f"{given}: is {_kind_of(mode)}{link}; refusing to replace it with the {what}: "
                              f"give a regular file name, or '-' for standard output")
    if not real.parent.is_dir():
        raise OutputPathError(f"{given}: directory {path.parent} does not exist")
    _probe_directory(given, real.parent, what)
    return OutputTarget(given, real)


def _probe_directory(given: str, directory: Path, what: str) -> None:
    try:
        fd, probe = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=directory)
    except OSError as exc:
        raise OutputPathError(f"{given}: cannot write the {what} in directory {directory} "
                              f"({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)


class _Terminated(BaseException):
    """A terminating signal arrived while results were being written."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated(signum)


@contextlib.contextmanager
def _terminating_signals_raise() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into an exception while the block runs (so the
    block's cleanup runs), then die of the signal as its default action would."""
    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in _TERMINATING:
            if signal.getsignal(sig) == signal.SIG_DFL:
                previous[sig] = signal.signal(sig, _raise_terminated)
    try:
        yield
    except _Terminated as stop:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        previous.clear()
        os.kill(os.getpid(), stop.signum)  # the default action: the process ends here
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def _write(handle: IO[bytes], data: Payload) -> None:
    if isinstance(data, (bytes, bytearray, memoryview)):
        handle.write(data)
    else:
        for chunk in data:
            handle.write(chunk)


def _stage(dest: Path, data: Payload) -> Path:
    """Write ``data`` to a new temporary file next to ``dest`` (fsynced); return its path."""
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=dest.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as handle:
            _write(handle, data)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:  # a full disk, a quota: the message names the file being written
        _unlink_quietly(Path(tmp))
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(dest)) from exc
    except BaseException:
        _unlink_quietly(Path(tmp))
        raise
    return Path(tmp)


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _backup(dest: Path) -> Path | None:
    """A hard link to the file ``dest`` holds now, to put back if a later step fails."""
    if not dest.is_file():
        return None
    for _ in range(100):
        backup = dest.parent / f"{TEMP_PREFIX}{secrets.token_hex(4)}{TEMP_SUFFIX}"
        try:
            os.link(dest, backup)
        except FileExistsError:
            continue
        except OSError:  # no hard links here: the old file cannot be put back
            return None
        return backup
    return None


def _commit(staged: Sequence[tuple[Path, Path]]) -> None:
    """Rename every temporary file over its destination; if one fails, undo the others."""
    done: list[tuple[Path, Path | None]] = []
    try:
        for tmp, dest in staged:
            backup = _backup(dest)
            try:
                os.replace(tmp, dest)
            except BaseException:
                if backup is not None:
                    _unlink_quietly(backup)
                raise
            done.append((dest, backup))
    except BaseException:
        for dest, backup in reversed(done):
            if backup is not None:
                os.replace(backup, dest)
            else:
                _unlink_quietly(dest)
        raise
    for _, backup in done:
        if backup is not None:
            _unlink_quietly(backup)


def _write_stdout(data: Payload, stream: IO[bytes] | None) -> None:
    out = stream if stream is not None else sys.stdout.buffer
    sys.stdout.flush()
    _write(out, data)
    out.flush()


def write_outputs(items: Sequence[tuple[OutputTarget, Payload]], stdout: IO[bytes] | None = None) -> None:
    """Write every item: standard output first, then every file through a
    temporary file that is renamed over it.  Either every file is replaced or,
    when anything fails or a terminating signal arrives, none is and no
    temporary file is left."""
    staged: list[tuple[Path, Path]] = []
    with _terminating_signals_raise():
        try:
            for target, data in items:
                if target.path is None:
                    _write_stdout(data, stdout)
            for target, data in items:
                if target.path is not None:
                    staged.append((_stage(target.path, data), target.path))
            _commit(staged)
        except BaseException:
            for tmp, _ in staged:
                _unlink_quietly(tmp)
            raise


def write_atomically(path: str | os.PathLike[str], data: Payload) -> Path:
    """Write ``data`` to the file ``path`` (following a link to its target):
    readers see the old file or the whole new one, never a part."""
    target = resolve_output(os.fspath(path), "file")
    if target.path is None:  # "-" as a path name here is a file called "-"
        target = resolve_output(os.path.join(".", STDOUT), "file")
    write_outputs([(target, data)])
    assert target.path is not None
    return Path(path)
