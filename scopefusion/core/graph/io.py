"""Reading and writing models: frozen GraphDefs (.pb / .pbtxt) and SavedModels.

The format is detected from the content, not only from the extension.  Saving
is atomic: the graph is written to a temporary file in the target directory
and renamed over the destination, so a failed write never leaves a torn file
and the input model is never touched.
"""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import GraphLoadError, ScopeFusionError

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

_TEXT_START = re.compile(rb"\A\s*(#[^\n]*\n\s*)*(node|library|versions|versions_def)\s*[{:]")


@dataclass
class LoadedModel:
    """A model read from disk, with the inputs and outputs found in it."""

    graph_def: "GraphDef"
    source: str
    format: str  # "pb", "pbtxt" or "saved_model"
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


def new_graph_def() -> "GraphDef":
    from tensorflow.core.framework import graph_pb2

    return graph_pb2.GraphDef()


def looks_like_text(data: bytes) -> bool:
    """True when ``data`` starts like a text-format GraphDef."""
    return bool(_TEXT_START.match(data[:4096]))


def parse_graph_def(data: bytes, source: str = "<bytes>") -> tuple["GraphDef", str]:
    """Parse binary or text GraphDef bytes; returns the graph and its format."""
    from google.protobuf import message, text_format

    graph = new_graph_def()
    attempts = ["pbtxt", "pb"] if looks_like_text(data) else ["pb", "pbtxt"]
    errors: list[str] = []
    for fmt in attempts:
        try:
            if fmt == "pb":
                graph.ParseFromString(data)
            else:
                text_format.Parse(data.decode("utf-8"), graph)
        except (message.DecodeError, text_format.ParseError, UnicodeDecodeError, ValueError) as exc:
            graph.Clear()
            errors.append(f"as {fmt}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        if fmt == "pb" and not graph.node and not graph.library.function and data.strip():
            # Random bytes sometimes parse as an empty message; do not accept that.
            graph.Clear()
            errors.append("as pb: no nodes found")
            continue
        return graph, fmt
    raise GraphLoadError(f"{source}: not a GraphDef ({'; '.join(errors)})")


def load_model(path: str | os.PathLike[str], signature: str | None = None) -> LoadedModel:
    """Load a frozen GraphDef file or a SavedModel directory."""
    p = Path(path)
    if not p.exists():
        raise GraphLoadError(f"{p}: no such file or directory")
    if p.is_dir():
        if not (p / "saved_model.pb").exists() and not (p / "saved_model.pbtxt").exists():
            raise GraphLoadError(f"{p}: a directory but not a SavedModel (no saved_model.pb)")
        return load_saved_model(p, signature)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise GraphLoadError(f"{p}: cannot read ({exc.strerror})") from exc
    graph, fmt = parse_graph_def(data, str(p))
    if not graph.node:
        raise GraphLoadError(f"{p}: the graph has no nodes" + (" (empty file)" if not data.strip() else ""))
    return LoadedModel(graph, str(p), fmt)


def load_saved_model(path: Path, signature: str | None = None) -> LoadedModel:
    """Freeze one signature of a SavedModel into a GraphDef of constants."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as exc:  # TensorFlow raises many unrelated types here
        raise GraphLoadError(f"{path}: cannot load SavedModel ({exc})") from exc
    signatures = dict(loaded.signatures)
    if not signatures:
        raise GraphLoadError(f"{path}: the SavedModel has no signatures to freeze")
    key = signature or ("serving_default" if "serving_default" in signatures else sorted(signatures)[0])
    if key not in signatures:
        raise GraphLoadError(
            f"{path}: no signature {key!r}; it has {', '.join(sorted(signatures))}"
        )
    frozen = convert_variables_to_constants_v2(signatures[key])
    graph_def = frozen.graph.as_graph_def()
    inputs = [t.name for t in frozen.inputs if t.dtype != tf.resource]
    outputs = [t.name for t in frozen.outputs]
    return LoadedModel(graph_def, str(path), "saved_model", inputs, outputs)


def graph_format_for(path: str | os.PathLike[str]) -> str:
    """The format to write for ``path``: text for .pbtxt/.txt, else binary."""
    return "pbtxt" if Path(path).suffix.lower() in {".pbtxt", ".txt"} else "pb"


def save_graph(graph_def: "GraphDef", path: str | os.PathLike[str], fmt: str | None = None) -> Path:
    """Write ``graph_def`` atomically (temporary file, fsync, rename)."""
    from google.protobuf import text_format

    dest = Path(path)
    fmt = fmt or graph_format_for(dest)
    data = (
        text_format.MessageToString(graph_def).encode("utf-8")
        if fmt == "pbtxt"
        else graph_def.SerializeToString()
    )
    write_atomically(dest, data)
    return dest


def write_atomically(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory,
    fsync and rename: readers see the old file or the whole new one, never a part."""
    dest = Path(path)
    directory = dest.parent if str(dest.parent) else Path(".")
    if not directory.is_dir():
        raise ScopeFusionError(f"{dest}: directory {directory} does not exist")
    if dest.is_dir():
        raise ScopeFusionError(f"{dest}: is a directory, not a file name")
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return dest
