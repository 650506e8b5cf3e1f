"""The validated NpuOptimizer options as one typed object.

:func:`build_npu_options` takes the raw ``parameter_map`` values, checks each
value's kind and syntax against the option table, fills in the defaults and
applies the combination rules.  The result is an :class:`NpuOptions`; its field
defaults are the reference's (an option the reference leaves unset is ``None``
or an empty tuple), except the seed's documented defaults for the options in
:data:`SEED_DEFAULTS` (graph memory 26 GiB, variable memory 5 GiB, the op
compile cache off in ``$HOME/atc_data``, debug files in the current directory,
one stream per engine), which are filled in and reported as defaults.

A key outside the table is, as the seed says, reserved or another version's:
it is kept (``unknown``) with a warning naming it and its close matches
(``warnings``), unless ``strict`` asks for an error.
"""
from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import OPTIMIZER_NAME, SessionOptionError
from .in_out_pair import InOutPair
from .profiling import profiling_warnings
from .rules import Combination, check_combinations
from .spec import RawValue
from .syntax import InputShape, ShapeRangeInput, StepRange
from .table import OPTION_BY_NAME, OPTION_NAMES, OPTIONS

GIB = 1024 ** 3
#: The options whose default the seed documents and which are filled in when unset.
SEED_DEFAULTS = ("graph_memory_max_size", "variable_memory_max_size", "op_compiler_cache_mode",
                 "op_compiler_cache_dir", "debug_dir", "stream_max_parallel_num")


@dataclass(frozen=True)
class NpuOptions:
    """Every option of an NpuOptimizer entry, validated and typed."""

    use_off_line: bool = True
    enable_data_pre_proc: bool = False
    iterations_per_loop: int = 1
    profiling_mode: bool = False
    profiling_options: dict[str, Any] | None = None
    enable_dump: bool = False
    dump_path: str | None = None
    #: Empty: every step.
    dump_step: tuple[StepRange, ...] = ()
    dump_mode: str = "output"
    enable_dump_debug: bool = False
    dump_debug_mode: str = "all"
    #: When not given: allow_fp32_to_fp16 if graph_run_mode is 1, else force_fp16.
    precision_mode: str = "allow_fp32_to_fp16"
    variable_format_optimize: bool = True
    mix_compile_mode: bool = False
    hcom_parallel: bool = False
    graph_memory_max_size: int | None = 26 * GIB
    variable_memory_max_size: int | None = 5 * GIB
    auto_tune_mode: tuple[str, ...] = ()
    stream_max_parallel_num: tuple[tuple[str, int], ...] = (("DNN_VM_TF", 1), ("DNN_V100", 1))
    is_tailing_optimization: bool = False
    graph_run_mode: int = 1
    op_debug_level: int = 0
    enable_scope_fusion_passes: tuple[str, ...] = ()
    enable_exception_dump: int = 0
    op_select_implmode: str = "high_performance"
    optypelist_for_implmode: tuple[str, ...] = ()
    input_shape: tuple[InputShape, ...] = ()
    dynamic_dims: tuple[tuple[int, ...], ...] = ()
    dynamic_node_type: int | None = None
    aoe_mode: str | None = None
    work_path: str = "./"
    distribute_config: str | None = None
    buffer_optimize: str = "l2_optimize"
    enable_small_channel: int = 0
    fusion_switch_file: str | None = None
    op_compiler_cache_mode: str | None = "disable"
    op_compiler_cache_dir: str | None = field(default_factory=lambda: os.path.join(os.path.expanduser("~"),
                                                                                   "atc_data"))
    #: The directory the script runs in.
    debug_dir: str | None = field(default_factory=os.getcwd)
    dynamic_input: bool = False
    dynamic_graph_execute_mode: str = "dynamic_execute"
    dynamic_inputs_shape_range: tuple[ShapeRangeInput, ...] = ()
    local_rank_id: int | None = None
    local_device_list: tuple[int, ...] = ()
    session_device_id: int | None = None
    in_out_pair_flag: bool = True
    in_out_pair: tuple[InOutPair, ...] = ()
    modify_mixlist: str | None = None
    op_precision_mode: str | None = None
    device_type: str = "default_device_type"
    hccl_timeout: int | None = None
    op_wait_timeout: int | None = None
    op_execute_timeout: int | None = None
    lower_functional_ops: bool = False
    job: str = "localhost"
    task_index: int = 0
    enable_compress_weight: bool = False
    compress_weight_conf: str | None = None
    hcom_multi_mode: bool = False
    min_group_size: bool | None = None
    enable_reduce_precision: bool = False
    #: The options the configuration gave, as written (the others are defaults).
    given: Mapping[str, Any] = field(default_factory=dict)
    #: Keys outside the option table, as written (kept, recorded, not acted on).
    unknown: Mapping[str, Any] = field(default_factory=dict)
    #: What the configuration's reader warns about (unknown keys, values counted as off).
    warnings: tuple[str, ...] = ()

    def defaults_filled(self) -> list[str]:
        """The options of :data:`SEED_DEFAULTS` the configuration leaves unset, whose value is the
        seed's default."""
        return [name for name in SEED_DEFAULTS
                if name not in self.given or str(self.given[name]).strip() == ""]

    def source(self, name: str) -> str:
        """``set`` when the configuration gave the option, else ``default``."""
        if name not in OPTION_BY_NAME:
            raise KeyError(name)
        return "set" if name in self.given else "default"

    def items(self) -> list[tuple[str, Any]]:
        """``(name, value)`` of every option, in table order."""
        return [(name, getattr(self, name)) for name in OPTION_NAMES]




def _suggestions(name: str) -> str:
    """``name`` with the options it is closest to (a case-insensitive match,
    else the best matches, at most 0.1 below the best)."""
    close = [n for n in OPTION_NAMES if n.lower() == name.lower()]
    if not close:
        scored = sorted(((difflib.SequenceMatcher(None, name, n).ratio(), n) for n in OPTION_NAMES), reverse=True)
        close = [n for score, n in scored[:3] if score >= max(0.6, scored[0][0] - 0.1)]
    return f"{name} (did you mean {' or '.join(close)}?)" if close else name


def check_known(names: list[str]) -> None:
    """Raise for the names that are no NpuOptimizer option, with close matches."""
    unknown = [n for n in names if n not in OPTION_BY_NAME]
    if unknown:
        raise SessionOptionError(
            f"{OPTIMIZER_NAME} option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(_suggestions(n) for n in unknown)}: unknown; allowed: one of the {len(OPTIONS)} options "
            "the reference's NpuOptimizer reads", options=tuple(unknown))


def unknown_warnings(names: list[str]) -> list[str]:
    """One warning per name that is no NpuOptimizer option, with its close matches."""
    return [f"{OPTIMIZER_NAME} option {_suggestions(n)}: not in the option table (reserved or for another "
            "version, as the seed says); recorded, not acted on (strict_options makes it an error)"
            for n in names if n not in OPTION_BY_NAME]


def build_npu_options(params: Mapping[str, RawValue], *, environ: Mapping[str, str] | None = None,
                      strict: bool = False) -> NpuOptions:
    """The typed options of one NpuOptimizer ``parameter_map``; raises
    :class:`SessionOptionError` for the first mistake found.  ``environ``
    (default ``os.environ``) is what the ``enable_data_pre_proc`` rule reads.
    A key outside the table is a warning (``warnings``), or with ``strict`` an error."""
    if strict:
        check_known(list(params))
    warnings = unknown_warnings(list(params))
    unknown = {name: raw.value for name, raw in params.items() if name not in OPTION_BY_NAME}
    defaults = NpuOptions()
    values: dict[str, Any] = {}
    chosen: set[str] = set()
    for spec in OPTIONS:
        values[spec.name] = getattr(defaults, spec.name)
        if spec.name in params:
            has_value, typed = spec.typed(params[spec.name])
            if has_value:
                values[spec.name] = typed
                chosen.add(spec.name)
    if "precision_mode" not in chosen:
        values["precision_mode"] = "allow_fp32_to_fp16" if values["graph_run_mode"] == 1 else "force_fp16"
    given = {name: raw.value for name, raw in params.items() if name in OPTION_BY_NAME}
    check_combinations(Combination(values, given, os.environ if environ is None else environ))
    if "profiling_options" in chosen:
        warnings += profiling_warnings(params["profiling_options"].value)
    return NpuOptions(**values, given=given, unknown=unknown, warnings=tuple(warnings))


def npu_options(values: Mapping[str, object] | None = None, *, environ: Mapping[str, str] | None = None,
                strict: bool = False, **kwargs: object) -> NpuOptions:
    """The typed options of Python values (bool, int, str or bytes, each taken as
    the ``AttrValue`` field it would be written to): ``npu_options(enable_dump=True,
    dump_path="/tmp/dump")``."""
    merged = {**(values or {}), **kwargs}
    raw = {}
    for name, value in merged.items():
        try:
            raw[name] = RawValue.of(value)
        except (TypeError, ValueError) as exc:
            raise SessionOptionError(f"{OPTIMIZER_NAME} option {name}: {exc}", options=(name,)) from None
    return build_npu_options(raw, environ=environ, strict=strict)
