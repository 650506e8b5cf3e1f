"""What a mixed run is asked for: the session options that steer the partition, merged
from a session configuration and explicit values, and validated by the session options'
own rules (so ``in_out_pair`` without ``mix_compile_mode``, or an ``in_out_pair`` that is
not a list of pairs, is the same one-line :class:`SessionOptionError` wherever it comes
from)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence, Union

from ..errors import OptionError
from ..options import NpuOptions, npu_options, npu_options_from_config, read_npu_options
from ..options.in_out_pair import InOutPair

#: NpuOptions, a ConfigProto file, or a ConfigProto object (any message with
#: ``graph_options.rewrite_options.custom_optimizers``)
SessionLike = Union[NpuOptions, str, "os.PathLike[str]", Any, None]
InOutPairLike = Union[str, Sequence[Any], None]
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class PartitionRequest:
    """The options of one partition: the session's, validated, and the supported-ops file."""

    session: NpuOptions
    supported_ops_file: str | None = None

    @property
    def mixed(self) -> bool:
        return self.session.mix_compile_mode

    @property
    def pairs(self) -> tuple[InOutPair, ...]:
        return self.session.in_out_pair

    @property
    def device_ranges(self) -> bool:
        """``in_out_pair_flag``: True when the ranges go to the back end."""
        return self.session.in_out_pair_flag

    def mode(self) -> str:
        """The placement rule in force, for reports."""
        if not self.pairs:
            return "default (supported ops, spread along string/resource/ref edges, loops whole)"
        if self.device_ranges:
            return "in_out_pair ranges on the back end (in_out_pair_flag True)"
        return "in_out_pair ranges on the host (in_out_pair_flag False)"


def parse_flag(value: Any, name: str) -> bool:
    """A bool, or its spelling on a command line (true/false, 1/0, yes/no, on/off)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise OptionError(f"{name}: {value!r} is not a truth value; allowed: true or false (1/0, yes/no, on/off)")


def session_options(session: SessionLike, strict: bool = False) -> NpuOptions:
    """NpuOptions from a ConfigProto file path, a ConfigProto object, an NpuOptions, or None (the
    defaults); ``strict``: a key outside the option table is an error, not a warning."""
    if session is None:
        return NpuOptions()
    if isinstance(session, NpuOptions):
        if strict and session.unknown:
            return npu_options({**session.unknown, **session.given}, strict=True)  # raises, naming them
        return session
    if hasattr(session, "graph_options"):
        return npu_options_from_config(session, strict=strict)
    return read_npu_options(session, strict=strict)


def partition_request(*, mix_compile_mode: bool | str | None = None, in_out_pair: InOutPairLike = None,
                      in_out_pair_flag: bool | str | None = None,
                      supported_ops_file: str | os.PathLike[str] | None = None,
                      session: SessionLike = None, strict_options: bool = False) -> PartitionRequest:
    """The request of a run: ``session`` (a configuration's options) with the explicit values
    laid over it, all checked again together by the session options' rules (``strict_options``:
    a key outside the option table is an error)."""
    base = session_options(session, strict_options)
    values: dict[str, Any] = dict(base.given)
    if mix_compile_mode is not None:
        values["mix_compile_mode"] = parse_flag(mix_compile_mode, "mix_compile_mode")
    if in_out_pair_flag is not None:
        values["in_out_pair_flag"] = parse_flag(in_out_pair_flag, "in_out_pair_flag")
    if in_out_pair is not None:
        values["in_out_pair"] = in_out_pair if isinstance(in_out_pair, str) else str(_as_lists(in_out_pair))
    merged = npu_options({**base.unknown, **values}) if values != dict(base.given) else base
    path = None if supported_ops_file in (None, "") else os.fspath(supported_ops_file)
    if path is not None and not merged.mix_compile_mode:
        raise OptionError(f"supported_ops_file {path}: given without mix_compile_mode; allowed: a supported-ops "
                          "file only with mix_compile_mode True (it says what the back end runs in mixed mode)")
    return PartitionRequest(merged, path)


def _as_lists(value: Any) -> Any:
    """Tuples as lists, so that ``str()`` writes the option's own syntax."""
    if isinstance(value, (list, tuple)):
        return [_as_lists(v) for v in value]
    return value
