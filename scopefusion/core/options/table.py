"""The table of NpuOptimizer options: kind, reference default, syntax, allowed
values and whether this project acts on each.

The options are those of the reference's session documentation (seed 004),
in its order, then the few the reference adapter also reads and its
``NPURunConfig`` writes (``lower_functional_ops``, ``job``, ``task_index``,
``enable_compress_weight``, ``compress_weight_conf``, ``hcom_multi_mode``,
``min_group_size``, ``enable_reduce_precision``), so that configurations the
reference's own estimator produces are accepted.
"""
from __future__ import annotations

from .errors import ValueProblem
from .in_out_pair import IN_OUT_PAIR_SYNTAX, parse_in_out_pair
from .profiling import PROFILING_SYNTAX, parse_profiling_options
from .spec import (
    EMPTY_IS_ERROR,
    EMPTY_IS_UNSET,
    EMPTY_IS_VALUE,
    OptionSpec,
    at_least,
    between,
    flag,
    one_of,
    text,
)
from .syntax import (
    parse_byte_size,
    parse_device_list,
    parse_dump_step,
    parse_dynamic_dims,
    parse_engine_parallelism,
    parse_input_shape,
    parse_name_list,
    parse_shape_ranges,
)

PRECISION_MODES = ("allow_fp32_to_fp16", "force_fp16", "force_fp32", "must_keep_origin_dtype",
                   "allow_mix_precision", "cube_fp16in_fp32out", "allow_mix_precision_fp16",
                   "allow_mix_precision_bf16", "allow_fp32_to_bf16")
MIX_PRECISION_MODES = ("allow_mix_precision", "allow_mix_precision_fp16", "allow_mix_precision_bf16")
IMPL_MODES = ("high_precision", "high_performance", "high_precision_for_all", "high_performance_for_all")
AUTO_TUNE_MODES = ("RL", "GA")
#: The op types whose implementation ``optypelist_for_implmode`` may choose (the seed's list).
IMPLMODE_OP_TYPES = ("Pooling", "SoftmaxV2", "LRN", "ROIAlign")

_BOOL = "True or False"
_DIRECTORY = "an existing directory you can read and write"


def parse_auto_tune_mode(value: str) -> tuple[str, ...]:
    """``"RL,GA"`` -> ``("RL", "GA")``: tuning modes, comma-separated."""
    modes = parse_name_list(value)
    for mode in modes:
        if mode not in AUTO_TUNE_MODES:
            raise ValueProblem(f"names the tuning mode {mode!r}")
    return modes


def parse_implmode_op_types(value: str) -> tuple[str, ...]:
    """``"Pooling,SoftmaxV2"`` -> ``("Pooling", "SoftmaxV2")``: op types of :data:`IMPLMODE_OP_TYPES`."""
    types = parse_name_list(value)
    for op_type in types:
        if op_type not in IMPLMODE_OP_TYPES:
            raise ValueProblem(f"names the op type {op_type!r}, which has no choice of implementation")
    return types


def _b(name: str, default: bool | None, acted_on: bool, allowed: str = _BOOL, note: str = "") -> OptionSpec:
    return OptionSpec(name, "b", default, flag, allowed, acted_on, note=note)


def _choice(name: str, default: str, values: tuple[str, ...], acted_on: bool, empty: str = EMPTY_IS_VALUE,
            note: str = "") -> OptionSpec:
    allowed = ", ".join(repr(v) if v.isdigit() else v for v in values)
    return OptionSpec(name, "s", default, one_of(*values), allowed, acted_on, empty=empty, note=note)


def _path(name: str, default: str, allowed: str, empty: str = EMPTY_IS_UNSET, note: str = "") -> OptionSpec:
    return OptionSpec(name, "s", default, text, allowed, False, empty=empty, note=note)


OPTIONS: tuple[OptionSpec, ...] = (
    _b("use_off_line", True, True, "True (partition the graph for the device) or False (everything on the host)"),
    _b("enable_data_pre_proc", False, False, note="True is refused while ASCEND_TDT_UNINIT=1"),
    OptionSpec("iterations_per_loop", "i", 1, at_least(1), "a whole number >= 1 (only 1 with dynamic_input "
               "or mix_compile_mode)", False),
    _b("profiling_mode", False, True, "True (needs profiling_options) or False"),
    OptionSpec("profiling_options", "s", "", parse_profiling_options, PROFILING_SYNTAX, True, EMPTY_IS_UNSET),
    _b("enable_dump", False, True, "True (needs dump_path) or False"),
    OptionSpec("dump_path", "s", "", text, f"{_DIRECTORY} (checked when enable_dump or enable_dump_debug "
               "is True)", True, EMPTY_IS_UNSET),
    OptionSpec("dump_step", "s", "", parse_dump_step, "steps N and ranges N-M (N < M) separated by '|', at "
               "most 100 items, e.g. '0|5|10-20'; leave it out to dump every step", True, EMPTY_IS_ERROR),
    _choice("dump_mode", "output", ("input", "output", "all"), True),
    _b("enable_dump_debug", False, True, "True (needs dump_path) or False"),
    _choice("dump_debug_mode", "all", ("aicore_overflow", "atomic_overflow", "all"), True),
    _choice("precision_mode", "", PRECISION_MODES, False, EMPTY_IS_UNSET,
            note="default: allow_fp32_to_fp16 when graph_run_mode is 1, else force_fp16"),
    _b("variable_format_optimize", True, False),
    _b("mix_compile_mode", False, True),
    _b("hcom_parallel", False, False),
    OptionSpec("graph_memory_max_size", "s", "", parse_byte_size, "a size in bytes from 0 to 274877906944 "
               "(256 GiB), written as a decimal string; with variable_memory_max_size at most 31 GiB (default 26 GiB)",
               False, EMPTY_IS_UNSET),
    OptionSpec("variable_memory_max_size", "s", "", parse_byte_size, "a size in bytes from 0 to 274877906944 "
               "(256 GiB), written as a decimal string; with graph_memory_max_size at most 31 GiB (default 5 GiB)",
               False, EMPTY_IS_UNSET),
    OptionSpec("auto_tune_mode", "s", "", parse_auto_tune_mode, "RL, GA or 'RL,GA'", False, EMPTY_IS_UNSET),
    OptionSpec("stream_max_parallel_num", "s", "", parse_engine_parallelism, "ENGINE:N pairs (N >= 1) "
               "separated by ',', e.g. 'DNN_VM_TF:10,DNN_V100:1'; DNN_VM_TF (AICPU) 1 to 13, DNN_V100 (AICORE) 1 to 3; "
               "default 1 each", False, EMPTY_IS_UNSET),
    _b("is_tailing_optimization", False, False),
    OptionSpec("graph_run_mode", "i", 1, one_of(0, 1), "0 (online inference) or 1 (training)", True),
    OptionSpec("op_debug_level", "i", 0, between(0, 4), "0, 1, 2, 3 or 4", False),
    OptionSpec("enable_scope_fusion_passes", "s", "", parse_name_list, "scope fusion pass names separated "
               "by ','", True, EMPTY_IS_UNSET),
    OptionSpec("enable_exception_dump", "i", 0, between(0, 2), "0, 1 or 2", False),
    _choice("op_select_implmode", "high_performance", IMPL_MODES, False),
    OptionSpec("optypelist_for_implmode", "s", "", parse_implmode_op_types, f"op types of "
               f"{', '.join(IMPLMODE_OP_TYPES)} separated by ',' (needs op_select_implmode)", False, EMPTY_IS_UNSET),
    OptionSpec("input_shape", "s", "", parse_input_shape, "name:d1,d2,... items separated by ';', a "
               "dimension being a whole number or -1 (dynamic), a scalar written name:0, e.g. "
               "'data:1,-1;label:1' (together with dynamic_dims and dynamic_node_type)", True, EMPTY_IS_ERROR),
    OptionSpec("dynamic_dims", "s", "", parse_dynamic_dims, "gears of whole numbers separated by ';' (at "
               "least two), each with one value per -1 of input_shape, e.g. '20,20;40,40'", True, EMPTY_IS_ERROR),
    OptionSpec("dynamic_node_type", "i", -1, one_of(0, 1), "0 (dataset inputs are dynamic) or 1 "
               "(placeholder inputs are dynamic)", True),
    _choice("aoe_mode", "", ("1", "2", "3", "4"), False, EMPTY_IS_ERROR),
    _path("work_path", "./", f"{_DIRECTORY} (checked when aoe_mode is set)", EMPTY_IS_ERROR),
    _path("distribute_config", "", "text passed to the tuner with aoe_mode"),
    _choice("buffer_optimize", "l2_optimize", ("l2_optimize", "off_optimize"), False),
    OptionSpec("enable_small_channel", "i", 0, one_of(0, 1), "0 or 1", False),
    OptionSpec("fusion_switch_file", "s", "", text, "the path of a fusion switch file", True, EMPTY_IS_UNSET),
    _choice("op_compiler_cache_mode", "", ("enable", "disable", "force"), False, EMPTY_IS_UNSET),
    _path("op_compiler_cache_dir", "", "a directory for the op compile cache"),
    _path("debug_dir", "", "a directory for op compile debug files"),
    _b("dynamic_input", False, False),
    _choice("dynamic_graph_execute_mode", "dynamic_execute", ("lazy_recompile", "dynamic_execute"), False),
    OptionSpec("dynamic_inputs_shape_range", "s", "", parse_shape_ranges, "'data:' and/or 'getnext:' each "
               "followed by shapes [d1,d2,...] separated by ',', the two separated by ';', a dimension being N, "
               "LOW~HIGH or -1, e.g. 'getnext:[128,3~5,-1],[64];data:[]'", False, EMPTY_IS_ERROR),
    OptionSpec("local_rank_id", "i", -1, between(0, 7), "0 to 7", False),
    OptionSpec("local_device_list", "s", "", parse_device_list, "device ids separated by ',', e.g. '0,1,3'",
               False, EMPTY_IS_ERROR),
    OptionSpec("session_device_id", "i", -1, at_least(0), "a device id >= 0", False),
    _b("in_out_pair_flag", True, True, "True (the nodes of in_out_pair go to the device) or False (they stay "
       "on the host)"),
    OptionSpec("in_out_pair", "s", "", parse_in_out_pair, f"{IN_OUT_PAIR_SYNTAX} (needs mix_compile_mode True)",
               True, EMPTY_IS_ERROR),
    _path("modify_mixlist", "", "the path of a JSON mix list (needs precision_mode "
          f"{' or '.join(MIX_PRECISION_MODES)})"),
    _path("op_precision_mode", "", "the path of an .ini file of op=mode lines"),
    _path("device_type", "default_device_type", "a device type name", EMPTY_IS_ERROR),
    OptionSpec("hccl_timeout", "i", None, at_least(0), "seconds, >= 0", False),
    OptionSpec("op_wait_timeout", "i", None, at_least(0), "seconds, >= 0", False),
    OptionSpec("op_execute_timeout", "i", None, at_least(0), "seconds, >= 0", False),
    _b("lower_functional_ops", False, False),
    _path("job", "localhost", "a job name such as localhost, worker or ps", EMPTY_IS_ERROR),
    OptionSpec("task_index", "i", 0, at_least(0), "a task index >= 0", False),
    _b("enable_compress_weight", False, False, "True (not with compress_weight_conf) or False"),
    _path("compress_weight_conf", "", "the path of a weight compression config (not with "
          "enable_compress_weight True)"),
    _b("hcom_multi_mode", False, False),
    _b("min_group_size", None, False, note="written by NPURunConfig; the reference reads no value from it"),
    _b("enable_reduce_precision", False, False, note="written by NPURunConfig"),
)

OPTION_BY_NAME: dict[str, OptionSpec] = {spec.name: spec for spec in OPTIONS}
OPTION_NAMES: tuple[str, ...] = tuple(OPTION_BY_NAME)
#: The options this project acts on; the others are validated and recorded for a back end.
ACTED_ON: frozenset[str] = frozenset(spec.name for spec in OPTIONS if spec.acted_on)
#: The acted-on options only ``scopefusion.Session`` acts on: dumps and profiles need the graph to run;
#: ``run`` and ``fuse()`` write a graph and run nothing.
SESSION_ONLY: frozenset[str] = frozenset({
    "enable_dump", "dump_path", "dump_step", "dump_mode", "enable_dump_debug", "dump_debug_mode", "profiling_mode",
    "profiling_options",
})
