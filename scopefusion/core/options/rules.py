"""The combination rules of the NpuOptimizer options.

Each option value is checked on its own first (see :mod:`.table`); the rules
here reject values that are each fine but cannot be used together, and check
the directories the reference checks (``dump_path`` when a dump is on,
``work_path`` when ``aoe_mode`` is set).  Each rule raises one
:class:`SessionOptionError` naming the options involved.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import bad_combination, bad_value, show
from .table import MIX_PRECISION_MODES

DYNAMIC_OPTIONS = ("input_shape", "dynamic_dims", "dynamic_node_type")
#: The most graph and variable memory together (the seed: the hardware's limit).
MAX_TOTAL_MEMORY = 31 * 1024 ** 3
_DIRECTORY = "an existing directory you can read and write"


@dataclass(frozen=True)
class Combination:
    """What the rules look at: typed values (defaults filled in), the values
    given (as written) and the environment."""

    values: Mapping[str, Any]
    given: Mapping[str, Any]
    environ: Mapping[str, str]

    def on(self, name: str) -> bool:
        """True when a bool option is True."""
        return bool(self.values[name])

    def is_set(self, name: str) -> bool:
        """True when an option has a value (not the "not set" default)."""
        return self.values[name] not in (None, ())

    def shown(self, name: str) -> str:
        """``name = value`` as given, or ``name = value (default)``."""
        if name in self.given:
            return f"{name} = {show(self.given[name])}"
        return f"{name} = {show(self.values[name])} (default)"


def check_directory(option: str, path: str, when: str) -> None:
    """Raise unless ``path`` is an existing directory this process may read and write."""
    allowed = f"{_DIRECTORY} ({when})"
    if not os.path.exists(path):
        raise bad_value(option, path, "does not exist", allowed)
    if not os.path.isdir(path):
        raise bad_value(option, path, "is not a directory", allowed)
    if not os.access(path, os.R_OK | os.W_OK):
        raise bad_value(option, path, "is not readable and writable by this user", allowed)


def _dynamic_together(c: Combination) -> None:
    present = [n for n in DYNAMIC_OPTIONS if c.is_set(n)]
    if present and len(present) < len(DYNAMIC_OPTIONS):
        missing = [n for n in DYNAMIC_OPTIONS if n not in present]
        raise bad_combination(DYNAMIC_OPTIONS, f"{', '.join(c.shown(n) for n in present)} set without "
                              f"{' and '.join(missing)}", "all three together, or none of them")


def _gears_fit_shape(c: Combination) -> None:
    if not c.is_set("input_shape"):
        return
    dynamic = sum(shape.dynamic_count for shape in c.values["input_shape"])
    if dynamic == 0:
        raise bad_combination(("input_shape", "dynamic_dims"), f"{c.shown('input_shape')} has no dynamic "
                              "dimension (-1) for the gears of dynamic_dims to fill",
                              "an input_shape with at least one -1")
    for number, gear in enumerate(c.values["dynamic_dims"], 1):
        if len(gear) != dynamic:
            raise bad_combination(("dynamic_dims", "input_shape"), f"gear {number} of {c.shown('dynamic_dims')} "
                                  f"has {len(gear)} value(s) but input_shape has {dynamic} dynamic "
                                  "dimension(s) (-1)", f"exactly {dynamic} value(s) in every gear")


def _mix_without_dynamic(c: Combination) -> None:
    if c.on("mix_compile_mode") and c.is_set("input_shape"):
        raise bad_combination(("mix_compile_mode", "input_shape", "dynamic_dims"), "mix_compile_mode = True "
                              "cannot be used with a dynamic configuration (input_shape, dynamic_dims)",
                              "either mix_compile_mode or input_shape/dynamic_dims/dynamic_node_type")


def _dump_path(c: Combination) -> None:
    dumps = [n for n in ("enable_dump", "enable_dump_debug") if c.on(n)]
    if not dumps:
        return
    when = f"{' and '.join(dumps)} = True"
    if not c.is_set("dump_path"):
        raise bad_combination(("dump_path", *dumps), f"{when} but dump_path is not set",
                              f"dump_path set to {_DIRECTORY}")
    check_directory("dump_path", c.values["dump_path"], f"{when} writes there")


def _profiling_options(c: Combination) -> None:
    if c.on("profiling_mode") and not c.is_set("profiling_options"):
        raise bad_combination(("profiling_options", "profiling_mode"), "profiling_mode = True but "
                              "profiling_options is not set", "profiling_options set to the profiler's JSON "
                              "settings whenever profiling_mode is True")


def _training_trace(c: Combination) -> None:
    settings = c.values["profiling_options"] or {}
    if settings.get("training_trace") != "on":
        return
    missing = [key for key in ("fp_point", "bp_point") if key not in settings]
    if missing:
        raise bad_combination(("profiling_options",), f'"training_trace": "on" without {" and ".join(missing)}',
                              'fp_point (the first forward op) and bp_point (the last backward op) with '
                              '"training_trace": "on"')
    if c.values["graph_run_mode"] != 1:
        raise bad_combination(("profiling_options", "graph_run_mode"), '"training_trace": "on" in online '
                              f"inference ({c.shown('graph_run_mode')})", 'training_trace only in training '
                              "(graph_run_mode 1); online inference takes task_trace and aicpu")


def _memory_total(c: Combination) -> None:
    names = ("graph_memory_max_size", "variable_memory_max_size")
    total = sum(c.values[n] or 0 for n in names)
    if total > MAX_TOTAL_MEMORY:
        raise bad_combination(names, f"{' and '.join(c.shown(n) for n in names)} add up to {total} bytes",
                              f"at most {MAX_TOTAL_MEMORY} bytes (31 GiB) together")


def _implmode_list(c: Combination) -> None:
    if c.is_set("optypelist_for_implmode") and "op_select_implmode" not in c.given:
        raise bad_combination(("optypelist_for_implmode", "op_select_implmode"),
                              f"{c.shown('optypelist_for_implmode')} is set but op_select_implmode is not",
                              "op_select_implmode set too (the mode those op types use)")


def _mixlist_precision(c: Combination) -> None:
    if c.is_set("modify_mixlist") and c.values["precision_mode"] not in MIX_PRECISION_MODES:
        raise bad_combination(("modify_mixlist", "precision_mode"), f"{c.shown('modify_mixlist')} needs a mixed "
                              f"precision mode but {c.shown('precision_mode')}",
                              f"precision_mode set to {' or '.join(MIX_PRECISION_MODES)}")


def _in_out_pair_mix(c: Combination) -> None:
    if c.is_set("in_out_pair") and not c.on("mix_compile_mode"):
        raise bad_combination(("in_out_pair", "mix_compile_mode"), f"in_out_pair is set but "
                              f"{c.shown('mix_compile_mode')}", "mix_compile_mode = True with in_out_pair")


def _single_iteration(c: Combination) -> None:
    loops = c.values["iterations_per_loop"]
    for mode in ("dynamic_input", "mix_compile_mode"):
        if loops > 1 and c.on(mode):
            raise bad_combination(("iterations_per_loop", mode), f"iterations_per_loop = {loops} with "
                                  f"{mode} = True", f"iterations_per_loop = 1 when {mode} is True")


def _compress_weight(c: Combination) -> None:
    if c.on("enable_compress_weight") and c.is_set("compress_weight_conf"):
        raise bad_combination(("enable_compress_weight", "compress_weight_conf"), "enable_compress_weight = "
                              f"True together with {c.shown('compress_weight_conf')}",
                              "one of the two ways to compress weights")


def _work_path(c: Combination) -> None:
    if c.is_set("aoe_mode"):
        check_directory("work_path", c.values["work_path"], f"aoe_mode = {c.values['aoe_mode']!r} writes there")


def _data_pre_proc(c: Combination) -> None:
    if c.on("enable_data_pre_proc") and c.environ.get("ASCEND_TDT_UNINIT") == "1":
        raise bad_combination(("enable_data_pre_proc",), "enable_data_pre_proc = True while the environment "
                              "sets ASCEND_TDT_UNINIT=1", "enable_data_pre_proc = True only with "
                              "ASCEND_TDT_UNINIT unset or 0")


RULES: tuple[Callable[[Combination], None], ...] = (
    _dynamic_together, _gears_fit_shape, _mix_without_dynamic, _dump_path, _profiling_options, _training_trace,
    _memory_total, _implmode_list,
    _mixlist_precision, _in_out_pair_mix, _single_iteration, _compress_weight, _work_path, _data_pre_proc,
)


def check_combinations(combination: Combination) -> None:
    """Raise the error of the first rule the options break."""
    for rule in RULES:
        rule(combination)
