"""Reading the NpuOptimizer entries of a session configuration.

A configuration is a ``ConfigProto`` object (any message with
``graph_options.rewrite_options.custom_optimizers``, such as a user's
``tf.compat.v1.ConfigProto``) or a file holding one, in text (``.pbtxt``) or
binary form; the form is told from the content.  Every custom optimizer named
``NpuOptimizer`` is read.  The reference lets a later entry overwrite an
earlier one; here several entries are merged, and an option they give
different values is an error.
"""
from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from google.protobuf import message, text_format

from ..graph.protos import message_class
from .errors import OPTIMIZER_NAME, SessionOptionError, bad_value
from .options import NpuOptions, build_npu_options
from .spec import RawValue

PathLike = str | os.PathLike[str]
_TEXT_START = re.compile(r"\A\s*(#[^\n]*\n\s*)*[A-Za-z_][A-Za-z0-9_]*\s*[{:<]")
_ENTRY_SHAPE = f'a custom_optimizers entry with name: "{OPTIMIZER_NAME}" under graph_options.rewrite_options'


def config_proto_class() -> type:
    """The ``ConfigProto`` message class files are parsed into (TensorFlow's own class,
    built without importing TensorFlow)."""
    return message_class("ConfigProto")


def _looks_like_text(data: bytes) -> bool:
    try:
        head = data[:4096].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return bool(_TEXT_START.match(head))


def _has_npu_entry(config: Any) -> bool:
    return any(o.name == OPTIMIZER_NAME for o in config.graph_options.rewrite_options.custom_optimizers)


def parse_config_proto(data: bytes, source: str = "<bytes>") -> Any:
    """A ``ConfigProto`` from text-format or binary bytes.  Bytes that look like
    text are read as binary only when that yields an NpuOptimizer entry (short
    binary messages can look like text); otherwise their text error is the one
    reported."""
    if not data.strip():
        raise SessionOptionError(f"{source}: the file is empty; allowed: a ConfigProto in text or binary form")
    config = config_proto_class()()
    text_first = _looks_like_text(data)
    problems: list[str] = []
    for form in ("text", "binary") if text_first else ("binary", "text"):
        config.Clear()
        try:
            if form == "text":
                text_format.Parse(data.decode("utf-8"), config)
            else:
                config.ParseFromString(data)
        except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as exc:
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            problems.append(f"as {form}: {first_line}")
            continue
        if form == "binary" and text_first and not _has_npu_entry(config):
            break
        return config
    if text_first:
        problems = problems[:1]
    raise SessionOptionError(f"{source}: not a ConfigProto ({'; '.join(problems)}); allowed: a ConfigProto in "
                             "text (.pbtxt) or binary form")


def load_config_proto(path: PathLike) -> Any:
    """The ``ConfigProto`` stored in the file ``path``."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SessionOptionError(
            f"{path}: cannot read the session configuration ({exc.strerror or exc})") from None
    return parse_config_proto(data, str(path))


def raw_value(name: str, attr: Any) -> RawValue:
    """The kind and value of one ``AttrValue`` of a ``parameter_map``."""
    kind = attr.WhichOneof("value")
    if kind == "s":
        try:
            return RawValue("s", attr.s.decode("utf-8"))
        except UnicodeDecodeError:
            raise bad_value(name, attr.s, "is not UTF-8 text", "UTF-8 text") from None
    if kind in ("b", "i", "f"):
        return RawValue(kind, getattr(attr, kind))
    return RawValue(kind, None)


def _optimizers(config: Any) -> list[Any]:
    try:
        return list(config.graph_options.rewrite_options.custom_optimizers)
    except AttributeError:
        raise SessionOptionError(
            f"a {type(config).__name__} is not a ConfigProto: it has no "
            f"graph_options.rewrite_options.custom_optimizers; allowed: {_ENTRY_SHAPE}") from None


def _no_entry(names: list[str]) -> SessionOptionError:
    listed = ", ".join(repr(n) for n in names) if names else "none"
    close = [n for n in names if n.lower() == OPTIMIZER_NAME.lower()]
    close += difflib.get_close_matches(OPTIMIZER_NAME, [n for n in names if n not in close], n=1, cutoff=0.7)
    hint = f" ({close[0]!r} is not spelled {OPTIMIZER_NAME!r})" if close else ""
    return SessionOptionError(f"no custom optimizer named {OPTIMIZER_NAME} in the ConfigProto (its custom "
                              f"optimizers: {listed}){hint}; allowed: {_ENTRY_SHAPE}")


def npu_optimizer_params(config: Any) -> dict[str, RawValue]:
    """The ``parameter_map`` of every NpuOptimizer entry of ``config``, merged."""
    optimizers = _optimizers(config)
    entries = [o for o in optimizers if o.name == OPTIMIZER_NAME]
    if not entries:
        raise _no_entry([o.name for o in optimizers])
    merged: dict[str, RawValue] = {}
    first_entry: dict[str, int] = {}
    for number, entry in enumerate(entries, 1):
        for name in sorted(entry.parameter_map):
            raw = raw_value(name, entry.parameter_map[name])
            if name in merged and merged[name] != raw:
                raise SessionOptionError(
                    f"{OPTIMIZER_NAME} option {name}: given {merged[name].describe()} in NpuOptimizer entry "
                    f"{first_entry[name]} and {raw.describe()} in entry {number}; allowed: one value (the same in "
                    "every NpuOptimizer entry)", options=(name,))
            merged.setdefault(name, raw)
            first_entry.setdefault(name, number)
    return merged


def npu_options_from_config(config: Any, *, environ: Mapping[str, str] | None = None,
                            strict: bool = False) -> NpuOptions:
    """The validated options of a ``ConfigProto`` object (duck-typed); ``strict``: a key outside
    the option table is an error, not a warning."""
    return build_npu_options(npu_optimizer_params(config), environ=environ, strict=strict)


def read_npu_options(path: PathLike, *, environ: Mapping[str, str] | None = None,
                     strict: bool = False) -> NpuOptions:
    """The validated options of the ``ConfigProto`` in the file ``path``; every
    error names the file."""
    config = load_config_proto(path)
    try:
        return npu_options_from_config(config, environ=environ, strict=strict)
    except SessionOptionError as exc:
        raise SessionOptionError(f"{path}: {exc}", options=exc.options) from None
