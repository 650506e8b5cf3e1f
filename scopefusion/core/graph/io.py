"""Reading and writing models: frozen GraphDefs (.pb / .pbtxt) and SavedModels.

The format is detected from the content, not only from the extension.  Saving
is atomic (see :mod:`.output_paths`): the graph is written to a temporary file
in the target directory and renamed over the destination, so a failed write
never leaves a torn file and the input model is never touched.  A file is
written as binary for ``.pb`` / ``.graphdef`` and as text for ``.pbtxt`` /
``.txt``; another extension needs the format named.
"""
from __future__ import annotations

import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf import message, text_format

from ..errors import GraphLoadError, OptionError
from .encoded_graph import EncodedGraph
from .graph_scan import GraphColumns, scan_columns
from .output_paths import Payload, write_atomically
from .protos import message_class
from .validate import MAX_NESTING, validate_graph

if TYPE_CHECKING:  # pragma: no cover
    from tensorflow.core.framework.graph_pb2 import GraphDef

_TEXT_START = re.compile(rb"\A\s*(#[^\n]*\n\s*)*(node|library|versions|versions_def)\s*[{:]")
#: File extensions of GraphDefs and the format each is written in.
GRAPH_SUFFIXES = {".pb": "pb", ".graphdef": "pb", ".pbtxt": "pbtxt", ".txt": "pbtxt"}
GRAPH_FORMATS = ("pb", "pbtxt")
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


class _HandedOut:
    """The ``graph_def`` field of :class:`LoadedModel`: reading it lets go of the model's
    ``columns``, which describe the graph as it was read (code given the message may change it)."""

    def __get__(self, model: "LoadedModel | None", owner: type | None = None) -> "GraphDef":
        if model is None:
            raise AttributeError("graph_def")  # no default value
        model.__dict__["columns"] = None
        graph: GraphDef = model.__dict__["_graph_def"]
        return graph

    def __set__(self, model: "LoadedModel", graph: "GraphDef") -> None:
        model.__dict__["_graph_def"] = graph
        model.__dict__["columns"] = None


@dataclass
class LoadedModel:
    """A model read from disk, with the inputs and outputs found in it.  ``columns``: the graph's
    columns as :mod:`.graph_scan` read them from the file's bytes, for the first index of a run
    (see :func:`take_columns`); reading ``graph_def`` lets them go (whoever holds the message may
    change it), :meth:`graph_copy` does not."""

    graph_def: "GraphDef"  # read and written through _HandedOut (set below, after the dataclass is made)
    source: str
    format: str  # "pb", "pbtxt" or "saved_model"
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    columns: GraphColumns | None = field(default=None, repr=False, compare=False)

    def graph_copy(self) -> "GraphDef":
        """A copy of the graph, keeping ``columns``: copying reads the graph and changes nothing (the
        copy is the caller's to change; the model's own graph is still the one the columns describe)."""
        graph: GraphDef = self.__dict__["_graph_def"]
        copy = type(graph)()
        copy.CopyFrom(graph)
        return copy


setattr(LoadedModel, "graph_def", _HandedOut())  # noqa: B010 (after the dataclass: graph_def keeps no default)


def take_columns(model: LoadedModel) -> GraphColumns | None:
    """The columns of ``model``'s graph as read, if nothing was handed its graph since (a run
    takes them before it reads the graph, once: it changes the graph in place)."""
    columns = model.__dict__.get("columns")
    model.__dict__["columns"] = None
    return columns


def new_graph_def() -> "GraphDef":
    return message_class("GraphDef")()


def looks_like_text(data: bytes) -> bool:
    """True when ``data`` starts like a text-format GraphDef."""
    return bool(_TEXT_START.match(data[:4096]))


def parse_graph_def(data: bytes, source: str = "<bytes>") -> tuple["GraphDef", str]:
    """Parse binary or text GraphDef bytes; returns the graph and its format."""
    graph, fmt, _ = read_graph_def(data, source)
    return graph, fmt


def read_graph_def(data: bytes, source: str = "<bytes>") -> tuple["GraphDef", str, GraphColumns | None]:
    """:func:`parse_graph_def`, and the graph's columns as the native scan read them from the binary
    ``data`` (None: text, no native scan, or one that could not tell)."""
    graph = new_graph_def()
    attempts = ["pbtxt", "pb"] if looks_like_text(data) else ["pb", "pbtxt"]
    errors: list[str] = []
    for fmt in attempts:
        try:
            if fmt == "pb":
                graph.ParseFromString(data)
            else:
                text_format.Parse(data.decode("utf-8"), graph)
        except (message.DecodeError, text_format.ParseError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            graph.Clear()
            if isinstance(exc, RecursionError) or "MaxDepth" in str(exc) or "levels of nesting" in str(exc):
                raise GraphLoadError(f"{source}: the graph is nested more than {MAX_NESTING} levels deep "
                                     "(messages within messages); protobuf reads no deeper graph") from None
            errors.append(f"as {fmt}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        if fmt == "pb" and not graph.node and not graph.library.function and data.strip():
            # Random bytes sometimes parse as an empty message; do not accept that.
            graph.Clear()
            errors.append("as pb: no nodes found")
            continue
        columns = scan_columns(data) if fmt == "pb" else None
        validate_graph(graph, source, parsed=True, serialized=data if fmt == "pb" else None, columns=columns)
        if columns is not None:
            columns.keep_index_columns()
        return graph, fmt, columns
    raise GraphLoadError(f"{source}: not a GraphDef ({'; '.join(errors)})")


def check_model_path(path: str | os.PathLike[str]) -> str:
    """What ``path`` holds, checked without TensorFlow: ``"saved_model"`` (a SavedModel directory, or a
    folder with exactly one below it: :func:`saved_model_dir`) or ``"graph_def"`` (a file, parsed later);
    anything else is a :class:`GraphLoadError`."""
    p = Path(path)
    if not p.exists():
        raise GraphLoadError(f"{p}: no such file or directory")
    if p.is_dir():
        saved_model_dir(p)
        return "saved_model"
    if not p.is_file():
        raise GraphLoadError(f"{p}: not a regular file; give a .pb / .pbtxt GraphDef file or a SavedModel directory")
    _refuse_keras_file(p)
    return "graph_def"


#: how deep below a folder a SavedModel is looked for (``save_pretrained(saved_model=True)`` writes
#: ``<folder>/saved_model/1/``)
SAVED_MODEL_DEPTH = 3
#: folder names that say nothing of the model (a version number, ``saved_model``): output files are
#: named after the folder above them
_ANONYMOUS_FOLDER = re.compile(r"\A(\d+|saved_model|savedmodel|export|serving)\Z", re.IGNORECASE)


def _is_saved_model(p: Path) -> bool:
    return (p / "saved_model.pb").is_file() or (p / "saved_model.pbtxt").is_file()


def saved_model_dir(folder: Path) -> Path:
    """The SavedModel in ``folder``: the folder itself, or the only SavedModel at most
    :data:`SAVED_MODEL_DEPTH` levels below it (a transformers ``save_pretrained(saved_model=True)``
    folder keeps it in ``saved_model/1/``); none or several is a :class:`GraphLoadError`."""
    if _is_saved_model(folder):
        return folder
    found: list[Path] = []
    level = [folder]
    for _ in range(SAVED_MODEL_DEPTH):
        level = sorted(c for d in level for c in _subfolders(d))
        found.extend(d for d in level if _is_saved_model(d))
        level = [d for d in level if not _is_saved_model(d)]
    if len(found) == 1:
        return found[0]
    if found:
        raise GraphLoadError(f"{folder}: holds {len(found)} SavedModels ({', '.join(str(f) for f in found[:5])}"
                             f"{', ...' if len(found) > 5 else ''}); give the directory of one")
    raise GraphLoadError(f"{folder}: a directory but not a SavedModel (no saved_model.pb in it or in the folders "
                         f"{SAVED_MODEL_DEPTH} levels below it); give a .pb / .pbtxt GraphDef file or a SavedModel "
                         "directory")


def _subfolders(folder: Path) -> list[Path]:
    try:
        return [c for c in folder.iterdir() if c.is_dir() and not c.is_symlink() and not c.name.startswith(".")]
    except OSError:
        return []


def model_name(path: str | os.PathLike[str]) -> str:
    """The model's name for output files: a file's stem, a folder's name; a SavedModel folder named
    only by a version number or ``saved_model`` (``m/saved_model/1``) is named after the folder above
    those (``m``)."""
    p = Path(os.path.abspath(path))
    if not p.is_dir():
        return p.stem
    while _ANONYMOUS_FOLDER.match(p.name) and p.parent != p:
        p = p.parent
    return p.name


def _refuse_keras_file(p: Path) -> None:
    """A Keras model file is no GraphDef: say how to export a SavedModel from it."""
    try:
        with p.open("rb") as handle:
            head = handle.read(len(_HDF5_MAGIC))
    except OSError as exc:
        raise GraphLoadError(f"{p}: cannot read ({exc.strerror})") from exc
    keras = p.suffix.lower() in KERAS_SUFFIXES or head == _HDF5_MAGIC
    if not keras and head.startswith(b"PK"):  # a .keras archive under another name
        try:
            with zipfile.ZipFile(p) as archive:
                keras = "config.json" in archive.namelist()
        except (zipfile.BadZipFile, OSError):
            keras = False
    if keras:
        saved = f"{p.stem}_saved"
        raise GraphLoadError(
            f"{p}: a Keras model file, not a GraphDef or SavedModel; export a SavedModel first: "
            f"python -c \"import keras; keras.saving.load_model('{p}', compile=False).export('{saved}')\" "
            f"(Keras 3; with tf_keras: tf.saved_model.save(model, '{saved}')), then scopefusion run {saved}")


def load_model(path: str | os.PathLike[str], signature: str | None = None) -> LoadedModel:
    """Load a frozen GraphDef file or a SavedModel directory."""
    p = Path(path)
    if check_model_path(p) == "saved_model":
        return load_saved_model(saved_model_dir(p), signature)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise GraphLoadError(f"{p}: cannot read ({exc.strerror})") from exc
    graph, fmt, columns = read_graph_def(data, str(p))
    if not graph.node:
        raise GraphLoadError(f"{p}: the graph has no nodes" + (" (empty file)" if not data.strip() else ""))
    return LoadedModel(graph, str(p), fmt, columns=columns)


def load_saved_model(path: Path, signature: str | None = None) -> LoadedModel:
    """Freeze one signature of a SavedModel into a GraphDef of constants."""
    import tensorflow as tf  # deferred: TensorFlow costs seconds to import
    from tensorflow.python.framework.convert_to_constants import (  # deferred: TensorFlow costs seconds to import
        convert_variables_to_constants_v2,
    )

    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as exc:  # TensorFlow raises many unrelated types here
        raise GraphLoadError(f"{path}: cannot load SavedModel ({exc})") from exc
    signatures = dict(loaded.signatures)
    if not signatures:
        raise GraphLoadError(f"{path}: the SavedModel has no signatures to freeze")
    key = choose_signature(path, sorted(signatures), signature)
    frozen = convert_variables_to_constants_v2(signatures[key])
    graph_def = frozen.graph.as_graph_def()
    inputs = [t.name for t in frozen.inputs if t.dtype != tf.resource]
    outputs = [t.name for t in frozen.outputs]
    return LoadedModel(graph_def, str(path), "saved_model", inputs, outputs)


def choose_signature(path: Path, names: list[str], signature: str | None) -> str:
    """The signature to freeze: the one asked for, else ``serving_default``, else
    the only one; several others are an error that lists them."""
    if signature is not None:
        if signature not in names:
            raise GraphLoadError(f"{path}: no signature {signature!r}; it has {', '.join(names)}")
        return signature
    if "serving_default" in names or len(names) == 1:
        return "serving_default" if "serving_default" in names else names[0]
    raise GraphLoadError(f"{path}: the SavedModel has {len(names)} signatures and none is serving_default: "
                         f"{', '.join(names)}; choose one with --signature NAME")


def default_output_path(model: str | os.PathLike[str], directory: Path) -> Path:
    """``<model name>_fused`` in ``directory``, keeping the input's extension and format:
    ``x.pbtxt`` -> ``x_fused.pbtxt``, ``x.pb`` -> ``x_fused.pb``, a SavedModel ``m/`` (or
    ``m/saved_model/1/``) -> ``m_fused.pb``; another extension becomes ``.pb`` or ``.pbtxt`` as the content is."""
    p = Path(model)
    if p.is_dir():
        return directory / f"{model_name(p)}_fused.pb"
    if p.suffix.lower() in GRAPH_SUFFIXES:
        return directory / f"{p.stem}_fused{p.suffix}"
    try:
        with p.open("rb") as handle:
            text = looks_like_text(handle.read(4096))
    except OSError:
        text = False
    return directory / f"{p.stem}_fused{'.pbtxt' if text else '.pb'}"


def graph_format_for(path: str | os.PathLike[str]) -> str:
    """The format to write for ``path``: text for .pbtxt/.txt, binary for .pb/.graphdef."""
    suffix = Path(path).suffix.lower()
    if suffix not in GRAPH_SUFFIXES:
        raise OptionError(f"{path}: unknown extension {suffix or '(none)'!r}; a GraphDef file ends in "
                          f"{allowed_extensions()}, or name the format (fmt='pb' or 'pbtxt')")
    return GRAPH_SUFFIXES[suffix]


def allowed_extensions() -> str:
    """The extensions a GraphDef may be written to, for messages."""
    binary = [s for s, f in GRAPH_SUFFIXES.items() if f == "pb"]
    text = [s for s, f in GRAPH_SUFFIXES.items() if f == "pbtxt"]
    return f"{' or '.join(binary)} (binary) or {' or '.join(text)} (text)"


def graph_bytes(graph_def: "GraphDef", fmt: str) -> bytes:
    """``graph_def`` serialised as ``"pb"`` (binary) or ``"pbtxt"`` (text)."""
    if fmt not in GRAPH_FORMATS:
        raise OptionError(f"fmt must be one of {', '.join(GRAPH_FORMATS)}, not {fmt!r}")
    if fmt == "pbtxt":
        return text_format.MessageToString(graph_def).encode("utf-8")
    return graph_def.SerializeToString(deterministic=True)  # attribute maps in key order: the same bytes every run


def graph_payload(graph_def: "GraphDef", fmt: str) -> Payload:
    """What :func:`graph_bytes` returns, for writing: the binary format as chunks taken one at a
    time (:class:`.encoded_graph.EncodedGraph`, never the whole encoding at once)."""
    if fmt == "pb":
        return EncodedGraph(graph_def)
    return graph_bytes(graph_def, fmt)


def save_graph(graph_def: "GraphDef", path: str | os.PathLike[str], fmt: str | None = None) -> Path:
    """Write ``graph_def`` atomically (temporary file, fsync, rename); ``fmt``
    (``"pb"`` or ``"pbtxt"``) defaults to the one of the extension."""
    dest = Path(path)
    write_atomically(dest, graph_payload(graph_def, fmt or graph_format_for(dest)))
    return dest


__all__ = ["GRAPH_FORMATS", "GRAPH_SUFFIXES", "LoadedModel", "allowed_extensions", "check_model_path",
           "choose_signature", "default_output_path", "graph_bytes", "graph_format_for", "graph_payload", "load_model",
           "load_saved_model", "looks_like_text", "model_name", "new_graph_def", "parse_graph_def", "read_graph_def",
           "save_graph", "take_columns", "write_atomically"]
