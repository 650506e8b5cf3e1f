"""TensorFlow's op definitions, kept in a cache file so that reading them needs no TensorFlow import.

The op registry lives in TensorFlow's native library. The first time it is needed, a child
process imports TensorFlow once and writes every registered ``OpDef`` as one serialized
``OpList``; it is stored in the user's cache directory (``$SCOPEFUSION_CACHE_DIR``, else
``$XDG_CACHE_HOME/scopefusion``, else ``~/.cache/scopefusion``), written atomically. The
file's name carries TensorFlow's version and a hash of the installation (the location, size
and modification time of its native libraries), so an upgrade or reinstall builds a new one.
A cache file that cannot be read is built again.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from ..errors import ScopeFusionError
from .protos import message_class

CACHE_DIR_VARIABLE = "SCOPEFUSION_CACHE_DIR"

#: Every TensorFlow has this op; an op list without it is not a real one.
_SENTINEL_OP = "Const"

#: Run in a child process; argv[1]: the file to write the serialized OpList to (not standard
#: output, which whatever TensorFlow loads may print to).
_DUMP_OPS = (
    "import os, sys\n"
    "os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')\n"
    "import tensorflow\n"
    "from tensorflow.python.client import pywrap_tf_session as c_api\n"
    "with open(sys.argv[1], 'wb') as out:\n"
    "    out.write(c_api.TF_GetBuffer(c_api.TF_GetAllOpList()))\n"
)


class OpCacheError(ScopeFusionError):
    """TensorFlow's op list could not be produced."""


def cache_dir() -> Path:
    """Where scopefusion keeps its cache files."""
    if os.environ.get(CACHE_DIR_VARIABLE):
        return Path(os.environ[CACHE_DIR_VARIABLE])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scopefusion"


def _tensorflow_dir() -> Path:
    spec = importlib.util.find_spec("tensorflow")  # located, not imported
    if spec is None or not spec.submodule_search_locations:
        raise OpCacheError("TensorFlow is not installed; its op definitions are needed to check graphs")
    return Path(next(iter(spec.submodule_search_locations)))


def _tensorflow_version() -> str:
    for distribution in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tf-nightly"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def cache_key() -> str:
    """``<version>-<hash>``: TensorFlow's version and a hash of its native libraries' path,
    size and modification time."""
    root = _tensorflow_dir()
    digest = hashlib.sha256(str(root.resolve()).encode("utf-8"))
    libraries = sorted([*root.glob("libtensorflow*"), *root.glob("python/_pywrap_tensorflow_internal*"),
                        root / "__init__.py"])
    for library in libraries:
        with contextlib.suppress(OSError):
            stat = library.stat()
            digest.update(f"{library.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return f"{_tensorflow_version()}-{digest.hexdigest()[:16]}"


def cache_path() -> Path:
    """The cache file of the installed TensorFlow's op list."""
    return cache_dir() / f"tensorflow-ops-{cache_key()}.pb"


@lru_cache(maxsize=1)
def cached_op_defs() -> dict[str, Any]:
    """Every op TensorFlow registers, by name, read from the cache (built first when missing
    or unreadable)."""
    path = cache_path()
    op_list = _read(path)
    if op_list is None:
        data = _dump_op_list()
        op_list = _parse(data)
        if op_list is None:
            raise OpCacheError("TensorFlow's op list could not be read back from the child process")
        write_cache_file(path, data)
    return {op_def.name: op_def for op_def in op_list.op}


def _read(path: Path) -> Any | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return _parse(data)


def _parse(data: bytes) -> Any | None:
    op_list = message_class("OpList")()
    try:
        op_list.ParseFromString(data)
    except DecodeError:
        return None
    return op_list if any(op_def.name == _SENTINEL_OP for op_def in op_list.op) else None


def _dump_op_list() -> bytes:
    """The serialized OpList of the installed TensorFlow, from a child process."""
    with tempfile.TemporaryDirectory(prefix="scopefusion-ops.") as scratch:
        target = Path(scratch) / "ops.pb"
        try:
            done = subprocess.run([sys.executable, "-c", _DUMP_OPS, str(target)], capture_output=True,
                                  check=False, timeout=600)
            if done.returncode == 0:
                return target.read_bytes()
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OpCacheError(f"TensorFlow's op list could not be produced: {exc}") from None
    last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
    raise OpCacheError(f"TensorFlow's op list could not be produced (importing TensorFlow failed): {last[0]}")


def write_cache_file(path: Path, data: bytes) -> None:
    """Store a cache file whole or not at all; a directory that cannot be written only means the
    cached thing is made again next time."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".ops-", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
