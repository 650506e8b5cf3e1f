"""What a back end runs: the supported-ops table.

A back end's ops come from up to three places:

* a **supported-ops file** in the reference's format, a JSON object
  ``{"OpType": {"isGray": bool, "isHeavy": bool}, ...}`` (``--supported_ops_file``);
* **plugins**, through the hook ``scopefusion_supported_ops()``;
* **every declared fused op**: a back end that is given fused ops runs them (they only
  ever replace nodes it already runs, see :mod:`.mixed`).

With a file or a plugin declaration the table is exactly their union plus the fused
ops; a file's entry overrides a plugin's for the same op.  In mixed mode an op marked
``isGray`` is not run by the back end (as in the reference); ``isHeavy`` is read and
reported, nothing more.

Without a file and without any plugin declaration the **default** applies: every op
runs on the back end except these host-only families:

* graph inputs and boundaries: ``Placeholder``, ``PlaceholderV2``, ``PlaceholderWithDefault``,
  ``_Arg``, ``_Retval``, ``_DeviceArg``, ``_DeviceRetval``, ``_Recv``, ``_Send``, ``_HostRecv``,
  ``_HostSend`` (these never run on a back end, whatever a table says);
* dataset and iterator ops: an op type containing ``Dataset`` or ``Iterator``;
* string ops: an op whose TensorFlow definition has an input or output of type string
  (``DecodeJpeg``, ``AsString``, ``StringSplitV2``, ``ReadFile``, ``ParseExampleV2``, ...);
* Python functions: ``PyFunc``, ``PyFuncStateless``, ``EagerPyFunc``;
* summaries: an op type containing ``Summary``;
* checkpoints: ``Save``, ``SaveV2``, ``SaveSlices``, ``Restore``, ``RestoreV2``, ``RestoreSlice``,
  ``MergeV2Checkpoints``, ``ShardedFilename``, ``ShardedFilespec``;
* printing: ``Print``, ``PrintV2``;
* queues and readers: an op type containing ``Queue``, or starting or ending with ``Reader``
  (``ReaderReadV2``, ``TFRecordReaderV2``, ...);
* outfeeds: an op type starting with ``Outfeed``, and ``StopOutfeedDequeueOp``.

Whatever the table, the reference also rejects op types ending in ``Dataset`` or
``DatasetV2`` and ``StringJoin``; so does this module.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..graph.tf_ops import tensorflow_op_def
from ..graph.vocabulary import DT_STRING
from .errors import PartitionError

#: Graph inputs and boundaries: never run on a back end.
INPUT_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault", "_Arg", "_Retval", "_DeviceArg",
                       "_DeviceRetval", "_Recv", "_Send", "_HostRecv", "_HostSend"})
PY_FUNC_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
CHECKPOINT_OPS = frozenset({"Save", "SaveV2", "SaveSlices", "Restore", "RestoreV2", "RestoreSlice",
                            "MergeV2Checkpoints", "ShardedFilename", "ShardedFilespec"})
PRINT_OPS = frozenset({"Print", "PrintV2"})
FLAGS = ("isGray", "isHeavy")
FILE_FORMAT = '{"OpType": {"isGray": false, "isHeavy": false}, ...}'

#: The host-only families of the default, as the report and the README name them.
HOST_ONLY_FAMILIES = (
    "graph input", "dataset or iterator op", "string op", "Python function", "summary op", "checkpoint op",
    "print op", "queue or reader op", "outfeed op",
)


@dataclass(frozen=True)
class OpSupport:
    """One op type a back end runs, with the reference's two flags and who declared it."""

    is_gray: bool = False
    is_heavy: bool = False
    origin: str = ""


def _string_op(op: str) -> bool:
    """TensorFlow defines ``op`` with an input or output of type string."""
    op_def = tensorflow_op_def(op)
    if op_def is None:
        return False
    return any(arg.type == DT_STRING for arg in (*op_def.input_arg, *op_def.output_arg))


def host_only_family(op: str) -> str | None:
    """The default's host-only family of op type ``op`` (one of :data:`HOST_ONLY_FAMILIES`), or None."""
    if op in INPUT_OPS:
        return "graph input"
    if "Dataset" in op or "Iterator" in op:
        return "dataset or iterator op"
    if op in PY_FUNC_OPS:
        return "Python function"
    if "Summary" in op:
        return "summary op"
    if op in CHECKPOINT_OPS:
        return "checkpoint op"
    if op in PRINT_OPS:
        return "print op"
    if "Queue" in op or op.startswith("Reader") or op.endswith(("Reader", "ReaderV2")):
        return "queue or reader op"
    if op.startswith("Outfeed") or op == "StopOutfeedDequeueOp":
        return "outfeed op"
    if _string_op(op):
        return "string op"
    return None


def _always_rejected(op: str) -> str | None:
    """The reference's exclusions that no table overrides."""
    if op in INPUT_OPS:
        return "graph input"
    if op.endswith(("Dataset", "DatasetV2")):
        return "dataset op"
    if op == "StringJoin":
        return "string op"
    return None


# ------------------------------------------------------------------ reading
def _entry(op: Any, flags: Any, where: str, origin: str) -> OpSupport:
    if not isinstance(op, str) or not op.strip():
        raise PartitionError(f"{where}: {op!r} is not an op type; allowed: {FILE_FORMAT}")
    if not isinstance(flags, Mapping):
        raise PartitionError(f"{where}: the entry of {op!r} is {flags!r}, not an object; allowed: {FILE_FORMAT}")
    unknown = [k for k in flags if k not in FLAGS]
    if unknown:
        raise PartitionError(f"{where}: the entry of {op!r} has unknown key(s) {', '.join(map(repr, unknown))}; "
                             f"allowed: {' and '.join(FLAGS)}")
    for key in FLAGS:
        if key in flags and not isinstance(flags[key], bool):
            raise PartitionError(f"{where}: {op}.{key} is {flags[key]!r}; allowed: true or false")
    return OpSupport(bool(flags.get("isGray", False)), bool(flags.get("isHeavy", False)), origin)


def parse_supported_ops(text: str, source: str = "<text>") -> dict[str, OpSupport]:
    """The entries of a supported-ops file's text; every mistake is one error naming ``source``."""
    if not text.strip():
        raise PartitionError(f"{source}: the supported-ops file is empty; allowed: {FILE_FORMAT}")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise PartitionError(f"{source}: {key!r} is given twice; allowed: each op type once")
            seen[key] = value
        return seen

    try:
        value = json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as exc:
        raise PartitionError(f"{source}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                             f"allowed: {FILE_FORMAT}") from None
    if not isinstance(value, dict):
        raise PartitionError(f"{source}: the file holds a {type(value).__name__}, not an object; "
                             f"allowed: {FILE_FORMAT}")
    if not value:
        raise PartitionError(f"{source}: the file names no op; allowed: {FILE_FORMAT}")
    origin = f"supported-ops file {source}"
    return {op: _entry(op, flags, source, origin) for op, flags in value.items()}


def read_supported_ops_file(path: str | os.PathLike[str]) -> dict[str, OpSupport]:
    """The entries of the supported-ops file ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PartitionError(f"supported-ops file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PartitionError(f"supported-ops file {path}: cannot read it ({exc})") from None
    return parse_supported_ops(text, str(path))


def plugin_entries(value: Iterable[Any], who: str) -> dict[str, OpSupport]:
    """What a plugin's ``scopefusion_supported_ops()`` returned: op type names, ``(name, flags)``
    pairs (a mapping in the file's format arrives as its items) or ``(name, OpSupport)`` pairs."""
    out: dict[str, OpSupport] = {}
    flags: Any
    for item in value:
        if isinstance(item, str):
            op, flags = item, {}
        elif isinstance(item, tuple) and len(item) == 2:
            op, flags = item
            if isinstance(flags, OpSupport):
                flags = {"isGray": flags.is_gray, "isHeavy": flags.is_heavy}
        else:
            raise PartitionError(f"{who}: hook scopefusion_supported_ops returned {item!r}; allowed: op type "
                                 f"names or a mapping {FILE_FORMAT}")
        support = _entry(op, flags, f"{who}: hook scopefusion_supported_ops", who)
        if op in out and out[op] != support:
            raise PartitionError(f"{who}: hook scopefusion_supported_ops declares {op!r} twice")
        out[op] = support
    return out


# -------------------------------------------------------------------- table
class SupportedOps:
    """The op types a back end runs: an explicit table, or the default (``table=None``)."""

    def __init__(self, table: Mapping[str, OpSupport] | None = None, fused_ops: Iterable[str] = (),
                 sources: Iterable[str] = ()) -> None:
        self.table = None if table is None else dict(table)
        self.fused_ops = frozenset(fused_ops)
        self.sources = list(sources)
        self._verdicts: dict[str, str | None] = {}

    @classmethod
    def build(cls, *, file_table: Mapping[str, OpSupport] | None = None,
              plugin_table: Mapping[str, OpSupport] | None = None, fused_ops: Iterable[str] = ()) -> "SupportedOps":
        """The table of a run: plugins' and the file's entries (the file wins) and the fused ops;
        the default when neither a file nor a plugin declares any op."""
        if not file_table and not plugin_table:
            return cls(None, fused_ops, ["default"])
        table = dict(plugin_table or {})
        table.update(file_table or {})
        origins = sorted({entry.origin for entry in table.values()})
        return cls(table, fused_ops, origins)

    @property
    def is_default(self) -> bool:
        return self.table is None

    def describe(self) -> str:
        """Where the table comes from, for reports."""
        if self.table is None:
            return "default: every op except " + ", ".join(HOST_ONLY_FAMILIES) + " families"
        return (f"{len(self.table)} op type(s) from {', '.join(self.sources)}, plus "
                f"{len(self.fused_ops)} declared fused op(s)")

    def why_not(self, op: str) -> str | None:
        """None when the back end runs op type ``op`` in mixed mode, else why not (one phrase)."""
        if op in self._verdicts:
            return self._verdicts[op]
        verdict = self._verdict(op)
        self._verdicts[op] = verdict
        return verdict

    def _verdict(self, op: str) -> str | None:
        rejected = _always_rejected(op)
        if rejected:
            return f"{rejected} {op}: runs on the host"
        if self.table is None:
            family = host_only_family(op)
            return f"{family} {op}: host-only in the default supported set" if family else None
        entry = self.table.get(op)
        if entry is None:
            if op in self.fused_ops:
                return None
            return f"op {op} is not in the back end's supported ops ({', '.join(self.sources)})"
        if entry.is_gray:
            return f"op {op} is gray (isGray) in {entry.origin}: not run by the back end in mixed mode"
        return None

    def is_heavy(self, op: str) -> bool:
        entry = None if self.table is None else self.table.get(op)
        return bool(entry and entry.is_heavy)
