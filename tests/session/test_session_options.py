"""Tests of the NpuOptimizer session options: every option of the reference's
session documentation with a good value, its documented bad values and the
combination rules; unknown keys and wrong value kinds; reading ConfigProto
objects, text and binary files; the reference's defaults; ``config check``."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from scopefusion.cli.config_check import config_check
from scopefusion.core.errors import OptionError
from scopefusion.core.options import (
    ACTED_ON,
    OPTION_BY_NAME,
    OPTION_NAMES,
    DimRange,
    InOutPair,
    InputShape,
    NpuOptions,
    RawValue,
    SessionOptionError,
    ShapeRangeInput,
    StepRange,
    build_npu_options,
    npu_options,
    npu_options_from_config,
    read_npu_options,
    render_value,
)

DIR = "<dir>"          # replaced by an existing writable directory
MISSING = "<missing>"  # replaced by a path that does not exist
FILE = "<file>"        # replaced by a regular file

#: The options of the reference's session documentation, in its order, with
#: the AttrValue field each takes.
SEED_004 = {
    "use_off_line": "b", "enable_data_pre_proc": "b", "iterations_per_loop": "i", "profiling_mode": "b",
    "profiling_options": "s", "enable_dump": "b", "dump_path": "s", "dump_step": "s", "dump_mode": "s",
    "enable_dump_debug": "b", "dump_debug_mode": "s", "precision_mode": "s", "variable_format_optimize": "b",
    "mix_compile_mode": "b", "hcom_parallel": "b", "graph_memory_max_size": "s", "variable_memory_max_size": "s",
    "auto_tune_mode": "s", "stream_max_parallel_num": "s", "is_tailing_optimization": "b", "graph_run_mode": "i",
    "op_debug_level": "i", "enable_scope_fusion_passes": "s", "enable_exception_dump": "i",
    "op_select_implmode": "s", "optypelist_for_implmode": "s", "input_shape": "s", "dynamic_dims": "s",
    "dynamic_node_type": "i", "aoe_mode": "s", "work_path": "s", "distribute_config": "s",
    "buffer_optimize": "s", "enable_small_channel": "i", "fusion_switch_file": "s",
    "op_compiler_cache_mode": "s", "op_compiler_cache_dir": "s", "debug_dir": "s", "dynamic_input": "b",
    "dynamic_graph_execute_mode": "s", "dynamic_inputs_shape_range": "s", "local_rank_id": "i",
    "local_device_list": "s", "session_device_id": "i", "in_out_pair_flag": "b", "in_out_pair": "s",
    "modify_mixlist": "s", "op_precision_mode": "s", "device_type": "s", "hccl_timeout": "i",
    "op_wait_timeout": "i", "op_execute_timeout": "i",
}
#: Read by the reference adapter or written by its NPURunConfig, not in the documentation's list.
EXTRA = {
    "lower_functional_ops": "b", "job": "s", "task_index": "i", "enable_compress_weight": "b",
    "compress_weight_conf": "s", "hcom_multi_mode": "b", "min_group_size": "b", "enable_reduce_precision": "b",
}
#: The options the project acts on (the rest are recorded).
ACTED = {
    "enable_scope_fusion_passes", "fusion_switch_file", "mix_compile_mode", "in_out_pair", "in_out_pair_flag",
    "input_shape", "dynamic_dims", "dynamic_node_type", "graph_run_mode", "use_off_line", "enable_dump",
    "dump_path", "dump_step", "dump_mode", "enable_dump_debug", "dump_debug_mode", "profiling_mode",
    "profiling_options",
}
#: The reference's defaults as the option would be written (None: no value), from its adapter.
REFERENCE_DEFAULTS: dict[str, Any] = {
    "use_off_line": True, "enable_data_pre_proc": False, "iterations_per_loop": 1, "profiling_mode": False,
    "profiling_options": "", "enable_dump": False, "dump_path": "", "dump_step": "", "dump_mode": "output",
    "enable_dump_debug": False, "dump_debug_mode": "all", "precision_mode": "",
    "variable_format_optimize": True, "mix_compile_mode": False, "hcom_parallel": False,
    "graph_memory_max_size": "", "variable_memory_max_size": "", "auto_tune_mode": "",
    "stream_max_parallel_num": "", "is_tailing_optimization": False, "graph_run_mode": 1, "op_debug_level": 0,
    "enable_scope_fusion_passes": "", "enable_exception_dump": 0, "op_select_implmode": "high_performance",
    "optypelist_for_implmode": "", "input_shape": "", "dynamic_dims": "", "dynamic_node_type": -1,
    "aoe_mode": "", "work_path": "./", "distribute_config": "", "buffer_optimize": "l2_optimize",
    "enable_small_channel": 0, "fusion_switch_file": "", "op_compiler_cache_mode": "",
    "op_compiler_cache_dir": "", "debug_dir": "", "dynamic_input": False,
    "dynamic_graph_execute_mode": "dynamic_execute", "dynamic_inputs_shape_range": "", "local_rank_id": -1,
    "local_device_list": "", "session_device_id": -1, "in_out_pair_flag": True, "in_out_pair": "",
    "modify_mixlist": "", "op_precision_mode": "", "device_type": "default_device_type", "hccl_timeout": None,
    "op_wait_timeout": None, "op_execute_timeout": None, "lower_functional_ops": False, "job": "localhost",
    "task_index": 0, "enable_compress_weight": False, "compress_weight_conf": "", "hcom_multi_mode": False,
    "min_group_size": None, "enable_reduce_precision": False,
}
#: Reference defaults that are refused when given explicitly (the reference refuses them too, except
#: in_out_pair "", which it reads as not set).
DEFAULTS_REFUSED_WHEN_GIVEN = {"dump_step", "input_shape", "dynamic_dims", "dynamic_node_type", "aoe_mode",
                               "dynamic_inputs_shape_range", "local_rank_id", "local_device_list",
                               "session_device_id", "in_out_pair"}

DYNAMIC = {"input_shape": "data:1,1,40,-1;label:1,-1;mask:-1,-1", "dynamic_dims": "20,20,1,1;40,40,2,2;80,60,4,4",
           "dynamic_node_type": 0}
SHAPES = (InputShape("data", (1, 1, 40, -1)), InputShape("label", (1, -1)), InputShape("mask", (-1, -1)))
GEARS = ((20, 20, 1, 1), (40, 40, 2, 2), (80, 60, 4, 4))
PROFILING = ('{"output": "/tmp/profiling", "training_trace": "on", "task_trace": "on", "aicpu": "off", '
             '"fp_point": "resnet_model/conv2d/Conv2D", "bp_point": "gradients/AddN_70", '
             '"aic_metrics": "PipeUtilization"}')
SHAPE_RANGE = "getnext:[128 ,3~5, 2~128, -1],[64 ,3~5, 2~128, -1];data:[128 ,3~5, 2~128, -1]"
PAIRS = str([[["import/conv2d_1/convolution"], ["import/conv2d_59/BiasAdd", "import/conv2d_67/BiasAdd"]]])


def _range_shape(first: int) -> tuple[DimRange, ...]:
    return (DimRange(first, first), DimRange(3, 5), DimRange(2, 128), DimRange(None, None))


# (option, value given, typed value expected, other options the value needs)
GOOD: list[tuple[str, Any, Any, dict[str, Any]]] = [
    ("use_off_line", False, False, {}),
    ("enable_data_pre_proc", True, True, {}),
    ("iterations_per_loop", 10, 10, {}),
    ("profiling_mode", True, True, {"profiling_options": '{"output": "/tmp/p"}'}),
    ("profiling_options", PROFILING, {"output": "/tmp/profiling", "training_trace": "on", "task_trace": "on",
                                      "aicpu": "off", "fp_point": "resnet_model/conv2d/Conv2D",
                                      "bp_point": "gradients/AddN_70", "aic_metrics": "PipeUtilization"}, {}),
    ("profiling_options", '{"output": "out", "msproftx": "on"}', {"output": "out", "msproftx": "on"}, {}),
    ("enable_dump", True, True, {"dump_path": DIR}),
    ("dump_path", DIR, DIR, {"enable_dump": True}),
    ("dump_path", MISSING, MISSING, {}),   # checked only when a dump is on
    ("dump_step", "0|5|10-20", (StepRange(0, 0), StepRange(5, 5), StepRange(10, 20)), {}),
    ("dump_step", "|".join(str(i) for i in range(100)), tuple(StepRange(i, i) for i in range(100)), {}),
    ("dump_mode", "all", "all", {}),
    ("dump_mode", "input", "input", {}),
    ("enable_dump_debug", True, True, {"dump_path": DIR}),
    ("dump_debug_mode", "aicore_overflow", "aicore_overflow", {}),
    ("dump_debug_mode", "atomic_overflow", "atomic_overflow", {}),
    ("precision_mode", "allow_mix_precision", "allow_mix_precision", {}),
    ("precision_mode", "must_keep_origin_dtype", "must_keep_origin_dtype", {}),
    ("variable_format_optimize", False, False, {}),
    ("mix_compile_mode", True, True, {}),
    ("hcom_parallel", True, True, {}),
    ("graph_memory_max_size", str(26 * 1024 ** 3), 26 * 1024 ** 3, {}),
    ("graph_memory_max_size", str(31 * 1024 ** 3), 31 * 1024 ** 3, {"variable_memory_max_size": "0"}),
    ("variable_memory_max_size", str(5 * 1024 ** 3), 5 * 1024 ** 3, {}),
    ("auto_tune_mode", "RL,GA", ("RL", "GA"), {}),
    ("stream_max_parallel_num", "DNN_VM_TF:10,DNN_V100:1", (("DNN_VM_TF", 10), ("DNN_V100", 1)), {}),
    ("is_tailing_optimization", True, True, {}),
    ("graph_run_mode", 0, 0, {}),
    ("op_debug_level", 4, 4, {}),
    ("enable_scope_fusion_passes", "ScopeLayerNormPass, ScopeClipBoxesPass,",
     ("ScopeLayerNormPass", "ScopeClipBoxesPass"), {}),
    ("enable_exception_dump", 2, 2, {}),
    ("op_select_implmode", "high_precision", "high_precision", {}),
    ("op_select_implmode", "high_performance_for_all", "high_performance_for_all", {}),
    ("optypelist_for_implmode", "Pooling,SoftmaxV2", ("Pooling", "SoftmaxV2"),
     {"op_select_implmode": "high_precision"}),
    ("input_shape", DYNAMIC["input_shape"], SHAPES, {k: v for k, v in DYNAMIC.items() if k != "input_shape"}),
    ("input_shape", "x/in:0;y:2,-1;", (InputShape("x/in", ()), InputShape("y", (2, -1))),
     {"dynamic_dims": "3;4", "dynamic_node_type": 1}),
    ("dynamic_dims", DYNAMIC["dynamic_dims"], GEARS, {k: v for k, v in DYNAMIC.items() if k != "dynamic_dims"}),
    ("dynamic_node_type", 1, 1, {k: v for k, v in DYNAMIC.items() if k != "dynamic_node_type"}),
    ("aoe_mode", "2", "2", {"work_path": DIR}),
    ("work_path", DIR, DIR, {"aoe_mode": "1"}),
    ("distribute_config", "cluster.json", "cluster.json", {}),
    ("buffer_optimize", "off_optimize", "off_optimize", {}),
    ("enable_small_channel", 1, 1, {}),
    ("fusion_switch_file", "/home/test/fusion_switch.cfg", "/home/test/fusion_switch.cfg", {}),
    ("op_compiler_cache_mode", "force", "force", {}),
    ("op_compiler_cache_dir", "/home/test/kernel_cache", "/home/test/kernel_cache", {}),
    ("debug_dir", "/home/test", "/home/test", {}),
    ("dynamic_input", True, True, {}),
    ("dynamic_graph_execute_mode", "lazy_recompile", "lazy_recompile", {}),
    ("dynamic_inputs_shape_range", SHAPE_RANGE,
     (ShapeRangeInput("getnext", (_range_shape(128), _range_shape(64))),
      ShapeRangeInput("data", (_range_shape(128),))), {}),
    ("dynamic_inputs_shape_range", "data:[]", (ShapeRangeInput("data", ((),)),), {}),
    ("local_rank_id", 7, 7, {}),
    ("local_device_list", "0,1", (0, 1), {}),
    ("session_device_id", 0, 0, {}),
    ("in_out_pair_flag", False, False, {}),
    ("in_out_pair", PAIRS, (InOutPair(("import/conv2d_1/convolution",),
                                      ("import/conv2d_59/BiasAdd", "import/conv2d_67/BiasAdd")),),
     {"mix_compile_mode": True}),
    ("modify_mixlist", "/home/test/ops_info.json", "/home/test/ops_info.json",
     {"precision_mode": "allow_mix_precision"}),
    ("op_precision_mode", "/home/test/op_precision.ini", "/home/test/op_precision.ini", {}),
    ("device_type", "default_device_type", "default_device_type", {}),
    ("hccl_timeout", 600, 600, {}),
    ("op_wait_timeout", 120, 120, {}),
    ("op_execute_timeout", 0, 0, {}),
    ("lower_functional_ops", True, True, {}),
    ("job", "worker", "worker", {}),
    ("task_index", 3, 3, {}),
    ("enable_compress_weight", True, True, {}),
    ("compress_weight_conf", "/home/test/compress.cfg", "/home/test/compress.cfg", {}),
    ("hcom_multi_mode", True, True, {}),
    ("min_group_size", True, True, {}),
    ("enable_reduce_precision", True, True, {}),
]

# (option, bad value, other options, the problem the message states, what it says is allowed)
BAD: list[tuple[str, Any, dict[str, Any], str, str]] = [
    ("iterations_per_loop", 0, {}, "is below 1", "a whole number >= 1"),
    ("iterations_per_loop", -4, {}, "is below 1", "a whole number >= 1"),
    ("profiling_options", "{output: x}", {}, "is not valid JSON", "a JSON object"),
    ("profiling_options", "[1, 2]", {}, "is a JSON list, not an object", "a JSON object"),
    ("profiling_options", '{"training_trace": "off"}', {}, "gives 'training_trace' the value 'off'",
     "training_trace may only be \"on\""),
    ("profiling_options", '{"aic_metrics": "Cache"}', {}, "gives 'aic_metrics' the value 'Cache'",
     "PipeUtilization"),
    ("profiling_options", '{"output": "a", "output": "b"}', {}, "has the JSON key 'output' twice",
     "a JSON object"),
    ("profiling_options", '{"output": 3}', {}, "gives 'output' the JSON int 3, not a string", "a JSON object"),
    ("dump_path", MISSING, {"enable_dump": True}, "does not exist",
     "an existing directory you can read and write"),
    ("dump_path", FILE, {"enable_dump_debug": True}, "is not a directory",
     "an existing directory you can read and write"),
    ("dump_step", "0|5|x", {}, "has the item 'x', which is neither a step N nor a range N-M", "'0|5|10-20'"),
    ("dump_step", "0,5", {}, "has the item '0,5'", "separated by '|'"),
    ("dump_step", "20-10", {}, "has the range '20-10', whose first step is not below its last", "(N < M)"),
    ("dump_step", "10-10", {}, "whose first step is not below its last", "(N < M)"),
    ("dump_step", "|".join(str(i) for i in range(101)), {}, "has 101 items, more than 100", "at most 100 items"),
    ("dump_step", "0||5", {}, "has an empty step", "'0|5|10-20'"),
    ("dump_step", "0|5|", {}, "has an empty step", "'0|5|10-20'"),
    ("dump_step", "", {}, "is empty", "'0|5|10-20'"),
    ("dump_step", "0|5|x", {"enable_dump": False}, "neither a step", "'0|5|10-20'"),
    ("dump_mode", "everything", {}, "is not one of the allowed values", "input, output, all"),
    ("dump_mode", "", {}, "is not one of the allowed values", "input, output, all"),
    ("dump_debug_mode", "overflow", {}, "is not one of the allowed values",
     "aicore_overflow, atomic_overflow, all"),
    ("precision_mode", "fp16", {}, "is not one of the allowed values", "allow_fp32_to_fp16, force_fp16"),
    ("graph_memory_max_size", "26G", {}, "has '26G' as the size, which is not a whole number",
     "a size in bytes from 0 to 274877906944"),
    ("graph_memory_max_size", "274877906945", {}, "is above the maximum", "from 0 to 274877906944"),
    ("variable_memory_max_size", "-1", {}, "which is not a whole number", "from 0 to 274877906944"),
    ("auto_tune_mode", "RL,XX", {}, "names the tuning mode 'XX'", "RL, GA or 'RL,GA'"),
    ("stream_max_parallel_num", "DNN_VM_TF=10", {}, "has the item 'DNN_VM_TF=10', which is not ENGINE:N",
     "'DNN_VM_TF:10,DNN_V100:1'"),
    ("stream_max_parallel_num", "DNN_V100:0", {}, "gives DNN_V100 0 streams", "N >= 1"),
    ("stream_max_parallel_num", "A:1,A:2", {}, "gives A twice", "ENGINE:N"),
    ("graph_run_mode", 2, {}, "is not one of the allowed values", "0 (online inference) or 1 (training)"),
    ("graph_run_mode", -1, {}, "is not one of the allowed values", "0 (online inference) or 1 (training)"),
    ("op_debug_level", 5, {}, "is outside 0..4", "0, 1, 2, 3 or 4"),
    ("op_debug_level", -1, {}, "is outside 0..4", "0, 1, 2, 3 or 4"),
    ("enable_exception_dump", 3, {}, "is outside 0..2", "0, 1 or 2"),
    ("op_select_implmode", "fast", {}, "is not one of the allowed values",
     "high_precision, high_performance, high_precision_for_all, high_performance_for_all"),
    ("op_select_implmode", "", {}, "is not one of the allowed values", "high_precision, high_performance"),
    ("input_shape", "", {}, "is empty", "name:d1,d2,..."),
    ("input_shape", "data", {}, "has the item 'data', which is not name:d1,d2,...", "name:d1,d2,..."),
    ("input_shape", "data:", {}, "gives no dimension in 'data:'", "name:0"),
    ("input_shape", "data:1,x", {}, "has the dimension 'x' in 'data:1,x'", "-1 (dynamic)"),
    ("input_shape", "data:1,-2", {}, "has the dimension '-2'", "-1 (dynamic)"),
    ("input_shape", "a:1,-1;a:2,-1", {}, "gives the input 'a' twice", "name:d1,d2,..."),
    ("input_shape", "a:1;;b:2", {}, "has an empty input", "separated by ';'"),
    ("dynamic_dims", "", {}, "is empty", "gears of whole numbers separated by ';'"),
    ("dynamic_dims", "1,x", {}, "has 'x' in gear 1, which is not a whole number", "gears of whole numbers"),
    ("dynamic_dims", "1,-1", {}, "has '-1' in gear 1, which is not a whole number", "gears of whole numbers"),
    ("dynamic_dims", "1,2;3", {}, "has 1 value(s) in gear 2 but 2 in gear 1", "one value per -1 of input_shape"),
    ("dynamic_node_type", 2, {}, "is not one of the allowed values", "0 (dataset inputs are dynamic) or 1"),
    ("dynamic_node_type", -1, {}, "is not one of the allowed values", "0 (dataset inputs are dynamic) or 1"),
    ("aoe_mode", "5", {}, "is not one of the allowed values", "'1', '2', '3', '4'"),
    ("aoe_mode", "", {}, "is empty", "'1', '2', '3', '4'"),
    ("work_path", MISSING, {"aoe_mode": "1"}, "does not exist", "an existing directory you can read and write"),
    ("work_path", "", {}, "is empty", "an existing directory"),
    ("buffer_optimize", "on", {}, "is not one of the allowed values", "l2_optimize, off_optimize"),
    ("enable_small_channel", 2, {}, "is not one of the allowed values", "0 or 1"),
    ("op_compiler_cache_mode", "on", {}, "is not one of the allowed values", "enable, disable, force"),
    ("dynamic_graph_execute_mode", "static", {}, "is not one of the allowed values",
     "lazy_recompile, dynamic_execute"),
    ("dynamic_inputs_shape_range", "input:[1,2]", {}, "names the input kind 'input'", "'data:' and/or 'getnext:'"),
    ("dynamic_inputs_shape_range", "data[1,2]", {}, "has the item 'data[1,2]', which is not kind:[shape]",
     "'data:' and/or 'getnext:'"),
    ("dynamic_inputs_shape_range", "data:[1];data:[2]", {}, "gives 'data' twice", "'data:' and/or 'getnext:'"),
    ("dynamic_inputs_shape_range", "data:[1];getnext:[2];data:[3]", {}, "has 3 input kinds, more than 2",
     "the two separated by ';'"),
    ("dynamic_inputs_shape_range", "data:[5~3]", {},
     "has the range '5~3' in data, whose low end is above its high end", "LOW~HIGH"),
    ("dynamic_inputs_shape_range", "data:[1,a]", {}, "has the dimension 'a' in data", "N, LOW~HIGH or -1"),
    ("dynamic_inputs_shape_range", "data:1,2", {}, "has '1,2' in data, which is not a shape", "[d1,d2,...]"),
    ("dynamic_inputs_shape_range", "data:[1] [2]", {}, "after a shape in data", "separated by ','"),
    ("dynamic_inputs_shape_range", "", {}, "is empty", "'data:' and/or 'getnext:'"),
    ("local_rank_id", 8, {}, "is outside 0..7", "0 to 7"),
    ("local_rank_id", -1, {}, "is outside 0..7", "0 to 7"),
    ("local_device_list", "0;1", {}, "has '0;1' as a device, which is not a whole number", "e.g. '0,1,3'"),
    ("local_device_list", "0,1,", {}, "has an empty device", "e.g. '0,1,3'"),
    ("local_device_list", "0,0", {}, "lists device 0 twice", "e.g. '0,1,3'"),
    ("local_device_list", "", {}, "is empty", "e.g. '0,1,3'"),
    ("session_device_id", -1, {}, "is below 0", "a device id >= 0"),
    ("in_out_pair", "[[['a'], ['b']]", {"mix_compile_mode": True}, "is not a Python literal",
     "[in_nodes, out_nodes]"),
    ("in_out_pair", "{'a': ['b']}", {"mix_compile_mode": True}, "is a dict, not a list of pairs",
     "[in_nodes, out_nodes]"),
    ("in_out_pair", "[]", {"mix_compile_mode": True}, "has no pair", "[in_nodes, out_nodes]"),
    ("in_out_pair", "[[['a']]]", {"mix_compile_mode": True}, "has 1 item(s) as pair 1, not two lists",
     "[in_nodes, out_nodes]"),
    ("in_out_pair", "[[['a'], ['b'], ['c']]]", {"mix_compile_mode": True}, "has 3 item(s) as pair 1",
     "[in_nodes, out_nodes]"),
    ("in_out_pair", "[[['a'], ['b']], 'c']", {"mix_compile_mode": True}, "has a str as pair 2",
     "[in_nodes, out_nodes]"),
    ("in_out_pair", "[[['a'], 'b']]", {"mix_compile_mode": True}, "has a str as the out_nodes of pair 1",
     "[in_nodes, out_nodes]"),
    ("in_out_pair", "[[['a'], [1]]]", {"mix_compile_mode": True}, "has 1 among the out_nodes of pair 1",
     "node-name lists"),
    ("in_out_pair", "[[[], ['b']]]", {"mix_compile_mode": True}, "has no in_nodes in pair 1", "node-name lists"),
    ("in_out_pair", "", {"mix_compile_mode": True}, "is empty", "[in_nodes, out_nodes]"),
    ("device_type", "", {}, "is empty", "a device type name"),
    ("hccl_timeout", -1, {}, "is below 0", "seconds, >= 0"),
    ("op_wait_timeout", -5, {}, "is below 0", "seconds, >= 0"),
    ("op_execute_timeout", -1, {}, "is below 0", "seconds, >= 0"),
    ("job", "", {}, "is empty", "a job name"),
    ("task_index", -1, {}, "is below 0", "a task index >= 0"),
]

# (options given, the options the error names, what it says is wrong, what it says is allowed)
COMBINATIONS: list[tuple[dict[str, Any], tuple[str, ...], str, str]] = [
    ({"input_shape": "data:1,-1"}, ("input_shape", "dynamic_dims", "dynamic_node_type"),
     "input_shape = 'data:1,-1' set without dynamic_dims and dynamic_node_type", "all three together, or none"),
    ({"dynamic_dims": "1;2", "dynamic_node_type": 0}, ("input_shape", "dynamic_dims", "dynamic_node_type"),
     "dynamic_dims = '1;2', dynamic_node_type = 0 set without input_shape", "all three together, or none"),
    ({"dynamic_node_type": 1}, ("input_shape", "dynamic_dims", "dynamic_node_type"),
     "dynamic_node_type = 1 set without input_shape and dynamic_dims", "all three together, or none"),
    ({"input_shape": "data:1,-1,-1", "dynamic_dims": "1;2", "dynamic_node_type": 0},
     ("dynamic_dims", "input_shape"),
     "gear 1 of dynamic_dims = '1;2' has 1 value(s) but input_shape has 2 dynamic dimension(s)",
     "exactly 2 value(s) in every gear"),
    ({"input_shape": "data:1,2", "dynamic_dims": "1;2", "dynamic_node_type": 0}, ("input_shape", "dynamic_dims"),
     "input_shape = 'data:1,2' has no dynamic dimension (-1)", "an input_shape with at least one -1"),
    ({**DYNAMIC, "mix_compile_mode": True}, ("mix_compile_mode", "input_shape", "dynamic_dims"),
     "mix_compile_mode = True cannot be used with a dynamic configuration", "either mix_compile_mode or"),
    ({"enable_dump": True}, ("dump_path", "enable_dump"), "enable_dump = True but dump_path is not set",
     "dump_path set to an existing directory you can read and write"),
    ({"enable_dump_debug": True, "dump_path": ""}, ("dump_path", "enable_dump_debug"),
     "enable_dump_debug = True but dump_path is not set", "dump_path set to an existing directory"),
    ({"profiling_mode": True}, ("profiling_options", "profiling_mode"),
     "profiling_mode = True but profiling_options is not set", "profiling_options set to the profiler's JSON"),
    ({"optypelist_for_implmode": "Pooling"}, ("optypelist_for_implmode", "op_select_implmode"),
     "optypelist_for_implmode = 'Pooling' is set but op_select_implmode is not", "op_select_implmode set too"),
    ({"modify_mixlist": "/home/test/ops_info.json"}, ("modify_mixlist", "precision_mode"),
     ("modify_mixlist = '/home/test/ops_info.json' needs a mixed precision mode but precision_mode = "
      "'allow_fp32_to_fp16' (default)"), "precision_mode set to allow_mix_precision"),
    ({"modify_mixlist": "m.json", "precision_mode": "force_fp16"}, ("modify_mixlist", "precision_mode"),
     "needs a mixed precision mode but precision_mode = 'force_fp16'",
     "precision_mode set to allow_mix_precision"),
    ({"in_out_pair": PAIRS}, ("in_out_pair", "mix_compile_mode"),
     "in_out_pair is set but mix_compile_mode = False (default)", "mix_compile_mode = True with in_out_pair"),
    ({"in_out_pair": PAIRS, "mix_compile_mode": False}, ("in_out_pair", "mix_compile_mode"),
     "in_out_pair is set but mix_compile_mode = False", "mix_compile_mode = True with in_out_pair"),
    ({"iterations_per_loop": 2, "dynamic_input": True}, ("iterations_per_loop", "dynamic_input"),
     "iterations_per_loop = 2 with dynamic_input = True", "iterations_per_loop = 1 when dynamic_input is True"),
    ({"iterations_per_loop": 10, "mix_compile_mode": True}, ("iterations_per_loop", "mix_compile_mode"),
     "iterations_per_loop = 10 with mix_compile_mode = True", "iterations_per_loop = 1 when mix_compile_mode"),
    ({"enable_compress_weight": True, "compress_weight_conf": "/c.cfg"},
     ("enable_compress_weight", "compress_weight_conf"),
     "enable_compress_weight = True together with compress_weight_conf = '/c.cfg'", "one of the two ways"),
]


# ------------------------------------------------------------------ helpers

@pytest.fixture
def places(tmp_path: Path) -> dict[str, str]:
    """The stand-ins of the tables mapped to real paths."""
    regular = tmp_path / "regular.txt"
    regular.write_text("not a directory", encoding="utf-8")
    return {DIR: str(tmp_path), MISSING: str(tmp_path / "missing"), FILE: str(regular)}


def resolve(value: Any, places: dict[str, str]) -> Any:
    """A table value with its stand-in replaced."""
    return places.get(value, value) if isinstance(value, str) else value


def build(values: dict[str, Any], places: dict[str, str] | None = None, environ: dict[str, str] | None = None,
          strict: bool = False) -> NpuOptions:
    """Options from Python values, stand-ins resolved, with a clean environment."""
    places = places or {}
    return npu_options({k: resolve(v, places) for k, v in values.items()}, environ=environ or {}, strict=strict)


def error_of(values: dict[str, Any], places: dict[str, str] | None = None,
             environ: dict[str, str] | None = None, strict: bool = False) -> SessionOptionError:
    """The error building the options raises; it must be one line."""
    with pytest.raises(SessionOptionError) as info:
        build(values, places, environ, strict)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message
    assert isinstance(info.value, OptionError)
    return info.value


def shown(value: Any) -> str:
    """How a message quotes a given value."""
    return repr(value)


def table_rows(output: str) -> dict[str, list[str]]:
    """The rows of a printed rich table: option name -> the other cells."""
    rows = {}
    for line in output.splitlines():
        line = line.replace("┃", "│")  # the header row's border
        if line.startswith("│"):
            cells = [cell.strip() for cell in line.strip("│").split("│")]
            rows[cells[0]] = cells[1:]
    return rows


# ------------------------------------------------------- the option table

def test_the_table_holds_every_option_of_the_documentation_in_order() -> None:
    assert list(OPTION_NAMES) == list(SEED_004) + list(EXTRA)
    assert [f.name for f in fields(NpuOptions)] == [*OPTION_NAMES, "given", "unknown", "warnings"]
    for name, kind in {**SEED_004, **EXTRA}.items():
        assert OPTION_BY_NAME[name].kind == kind, name


def test_acted_on_and_recorded() -> None:
    assert ACTED_ON == ACTED
    for name, spec in OPTION_BY_NAME.items():
        assert spec.use == ("acted on" if name in ACTED else "recorded")
        assert spec.acted_on is (name in ACTED)


def test_every_option_has_a_good_case_and_every_checked_option_a_bad_one() -> None:
    assert {case[0] for case in GOOD} == set(OPTION_NAMES)
    # bools and free text take any value of their kind (their mistakes are kinds and combinations)
    free = {name for name, spec in OPTION_BY_NAME.items() if spec.kind == "b"}
    free |= {"distribute_config", "fusion_switch_file", "op_compiler_cache_dir", "debug_dir", "modify_mixlist",
             "op_precision_mode", "compress_weight_conf", "enable_scope_fusion_passes", "optypelist_for_implmode"}
    assert set(OPTION_NAMES) - free == {case[0] for case in BAD}


# -------------------------------------------------------- good and bad values

@pytest.mark.parametrize("name, given, expected, others", GOOD, ids=[f"{c[0]}-{i}" for i, c in enumerate(GOOD)])
def test_good_value_is_accepted_and_typed(name: str, given: Any, expected: Any, others: dict[str, Any],
                                          places: dict[str, str]) -> None:
    options = build({name: given, **others}, places)
    assert getattr(options, name) == resolve(expected, places)
    assert options.source(name) == "set"
    assert options.given[name] == resolve(given, places)


@pytest.mark.parametrize("name, given, others, problem, allowed", BAD,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD)])
def test_bad_value_is_one_error_naming_option_value_and_allowed(name: str, given: Any, others: dict[str, Any],
                                                                problem: str, allowed: str,
                                                                places: dict[str, str]) -> None:
    exc = error_of({name: given, **others}, places)
    message = str(exc)
    value = resolve(given, places)
    assert message.startswith(f"NpuOptimizer option {name}: {shown(value)[:100]}")
    assert problem in message
    assert allowed in message.split("; allowed: ", 1)[1]
    assert exc.option == name and exc.options == (name,)


@pytest.mark.parametrize("values, named, problem, allowed", COMBINATIONS,
                         ids=[f"{'+'.join(c[1])}-{i}" for i, c in enumerate(COMBINATIONS)])
def test_bad_combination_names_the_options(values: dict[str, Any], named: tuple[str, ...], problem: str,
                                           allowed: str) -> None:
    exc = error_of(values)
    message = str(exc)
    assert message.startswith(f"NpuOptimizer options {', '.join(named)}: ")
    assert problem in message
    assert allowed in message.split("; allowed: ", 1)[1]
    assert exc.options == named


def test_data_pre_proc_is_refused_while_the_tdt_is_uninitialised() -> None:
    message = str(error_of({"enable_data_pre_proc": True}, environ={"ASCEND_TDT_UNINIT": "1"}))
    assert message == ("NpuOptimizer options enable_data_pre_proc: enable_data_pre_proc = True while the "
                       "environment sets ASCEND_TDT_UNINIT=1; allowed: enable_data_pre_proc = True only with "
                       "ASCEND_TDT_UNINIT unset or 0")
    assert build({"enable_data_pre_proc": True}, environ={"ASCEND_TDT_UNINIT": "0"}).enable_data_pre_proc


def test_dump_path_must_be_writable(places: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    refused = places[DIR]
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if path == refused else real_access(path, mode))
    message = str(error_of({"enable_dump": True, "dump_path": DIR}, places))
    assert message.startswith(f"NpuOptimizer option dump_path: {refused!r} is not readable and writable")
    assert "enable_dump = True writes there" in message


def test_combinations_that_are_fine() -> None:
    options = build({"enable_compress_weight": False, "compress_weight_conf": "/c.cfg"})
    assert options.compress_weight_conf == "/c.cfg"
    assert build({"iterations_per_loop": 1, "dynamic_input": True, "mix_compile_mode": True}).dynamic_input
    assert build({"profiling_options": '{"output": "o"}'}).profiling_mode is False
    options = build({"op_select_implmode": "high_precision", "optypelist_for_implmode": "LRN"})
    assert options.optypelist_for_implmode == ("LRN",)
    options = build({"modify_mixlist": "m.json", "precision_mode": "allow_mix_precision_bf16"})
    assert options.modify_mixlist == "m.json"


# -------------------------------------------------- unknown keys, wrong kinds

def test_unknown_key_suggests_close_matches() -> None:
    exc = error_of({"enable_dumpp": True}, strict=True)
    assert str(exc).startswith("NpuOptimizer option enable_dumpp (did you mean enable_dump?)")
    assert ": unknown; allowed: one of the 60 options" in str(exc)
    assert exc.options == ("enable_dumpp",)
    assert "Dump_Path (did you mean dump_path?)" in str(error_of({"Dump_Path": "/tmp"}, strict=True))
    assert str(error_of({"xyz": 1}, strict=True)).startswith(
        "NpuOptimizer option xyz: unknown; allowed: one of the 60 options")


def test_several_unknown_keys_are_named_together() -> None:
    exc = error_of({"precison_mode": "force_fp16", "totally_made_up": 1}, strict=True)
    message = str(exc)
    assert message.startswith("NpuOptimizer options ")
    assert "precison_mode (did you mean precision_mode or op_precision_mode?)" in message
    assert "totally_made_up: unknown" in message
    assert set(exc.options) == {"precison_mode", "totally_made_up"}


WRONG_KINDS = {"b": (RawValue("i", 1), "an int (.i) = 1"), "i": (RawValue("b", True), "a bool (.b) = True"),
               "s": (RawValue("i", 5), "an int (.i) = 5")}
KIND_ALLOWED = {"b": "a bool (.b)", "i": "an int (.i)", "s": "a string (.s)"}


@pytest.mark.parametrize("name", OPTION_NAMES)
def test_wrong_value_kind_is_refused(name: str) -> None:
    kind = {**SEED_004, **EXTRA}[name]
    raw, described = WRONG_KINDS[kind]
    with pytest.raises(SessionOptionError) as info:
        build_npu_options({name: raw}, environ={})
    message = str(info.value)
    assert message.startswith(f"NpuOptimizer option {name}: given {described}; allowed: {KIND_ALLOWED[kind]} "
                              f"(parameter_map['{name}'].{kind} = ")
    assert info.value.options == (name,)


@pytest.mark.parametrize("raw, described", [(RawValue("f", 1.5), "a float (.f) = 1.5"),
                                            (RawValue("list", None), "a list (.list)"),
                                            (RawValue(None, None), "no value")])
def test_other_value_kinds_are_refused(raw: RawValue, described: str) -> None:
    with pytest.raises(SessionOptionError, match=r"option graph_run_mode: given " + described.replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.") + "; allowed: an int"):
        build_npu_options({"graph_run_mode": raw}, environ={})


def test_python_values_that_are_no_option_kind() -> None:
    with pytest.raises(SessionOptionError, match=r"option dump_path: an NpuOptimizer option value is a bool, int "
                       r"or str, not list"):
        npu_options(dump_path=["/tmp"])
    with pytest.raises(SessionOptionError, match=r"option job: the bytes b'\\xff\\xfe' are not UTF-8 text"):
        npu_options(job=b"\xff\xfe")


# ------------------------------------------------------------ the defaults

def test_defaults_are_the_references() -> None:
    assert {name: spec.default for name, spec in OPTION_BY_NAME.items()} == REFERENCE_DEFAULTS


def test_no_options_means_the_typed_defaults() -> None:
    options = build({})
    assert options == NpuOptions()
    assert options.given == {}
    assert options.precision_mode == "allow_fp32_to_fp16"
    assert options.op_select_implmode == "high_performance"
    assert options.dump_mode == "output" and options.dump_debug_mode == "all" and options.dump_step == ()
    assert options.use_off_line is True and options.in_out_pair_flag is True
    assert options.work_path == "./" and options.job == "localhost"
    assert options.device_type == "default_device_type"
    assert options.dynamic_node_type is None and options.local_rank_id is None
    assert options.session_device_id is None
    assert all(options.source(name) == "default" for name in OPTION_NAMES)


def test_precision_mode_default_follows_graph_run_mode() -> None:
    assert build({"graph_run_mode": 0}).precision_mode == "force_fp16"
    assert build({"graph_run_mode": 1}).precision_mode == "allow_fp32_to_fp16"
    assert build({"graph_run_mode": 0, "precision_mode": ""}).precision_mode == "force_fp16"
    assert build({"graph_run_mode": 0, "precision_mode": "force_fp32"}).precision_mode == "force_fp32"


@pytest.mark.parametrize("name", [n for n, d in REFERENCE_DEFAULTS.items()
                                  if d is not None and n not in DEFAULTS_REFUSED_WHEN_GIVEN])
def test_giving_the_default_changes_nothing(name: str) -> None:
    options = build({name: REFERENCE_DEFAULTS[name]})
    assert getattr(options, name) == getattr(NpuOptions(), name)
    assert options.source(name) == "set"


@pytest.mark.parametrize("name", sorted(DEFAULTS_REFUSED_WHEN_GIVEN))
def test_defaults_that_mean_not_set_are_refused_when_given(name: str) -> None:
    others = {"mix_compile_mode": True} if name == "in_out_pair" else {}
    exc = error_of({name: REFERENCE_DEFAULTS[name], **others})
    assert exc.option == name


# ------------------------------------------------------------ reading configs

@pytest.fixture(scope="module")
def tf() -> Any:
    import tensorflow

    return tensorflow


def seed_config(tf: Any, **params: Any) -> Any:
    """A ConfigProto built like the documentation's snippet, plus ``params``."""
    from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

    config = tf.compat.v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["use_off_line"].b = True
    custom_op.parameter_map["enable_scope_fusion_passes"].s = tf.compat.as_bytes("DecodeBboxV2ScopeFusionPass")
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    for name, value in params.items():
        attr = custom_op.parameter_map[name]
        if isinstance(value, bool):
            attr.b = value
        elif isinstance(value, int):
            attr.i = value
        else:
            attr.s = tf.compat.as_bytes(value)
    return config


def test_reading_a_tf_config_proto(tf: Any) -> None:
    options = npu_options_from_config(seed_config(tf, session_device_id=1, dump_mode="all"), environ={})
    assert options.use_off_line is True
    assert options.enable_scope_fusion_passes == ("DecodeBboxV2ScopeFusionPass",)
    assert options.session_device_id == 1 and options.dump_mode == "all"
    assert set(options.given) == {"use_off_line", "enable_scope_fusion_passes", "session_device_id", "dump_mode"}


def test_config_proto_errors_name_the_option(tf: Any) -> None:
    with pytest.raises(SessionOptionError, match=r"^NpuOptimizer option graph_run_mode: 2 is not one of"):
        npu_options_from_config(seed_config(tf, graph_run_mode=2))
    config = seed_config(tf)
    config.graph_options.rewrite_options.custom_optimizers[0].parameter_map["dump_mode"].list.s.append(b"all")
    with pytest.raises(SessionOptionError, match=r"option dump_mode: given a list \(\.list\); allowed: a string"):
        npu_options_from_config(config)
    config = seed_config(tf)
    config.graph_options.rewrite_options.custom_optimizers[0].parameter_map["dump_path"].s = b"\xff/dump"
    with pytest.raises(SessionOptionError, match=r"option dump_path: b'\\xff/dump' is not UTF-8 text"):
        npu_options_from_config(config)


def test_several_entries_are_merged_unless_they_contradict(tf: Any) -> None:
    config = seed_config(tf)
    second = config.graph_options.rewrite_options.custom_optimizers.add()
    second.name = "NpuOptimizer"
    second.parameter_map["use_off_line"].b = True
    second.parameter_map["graph_run_mode"].i = 0
    options = npu_options_from_config(config, environ={})
    assert options.graph_run_mode == 0 and options.enable_scope_fusion_passes == ("DecodeBboxV2ScopeFusionPass",)
    second.parameter_map["enable_scope_fusion_passes"].s = b"ScopeLayerNormPass"
    with pytest.raises(SessionOptionError) as info:
        npu_options_from_config(config)
    assert str(info.value) == ("NpuOptimizer option enable_scope_fusion_passes: given a string (.s) = "
                               "'DecodeBboxV2ScopeFusionPass' in NpuOptimizer entry 1 and a string (.s) = "
                               "'ScopeLayerNormPass' in entry 2; allowed: one value (the same in every "
                               "NpuOptimizer entry)")
    assert info.value.option == "enable_scope_fusion_passes"


def test_a_config_without_npu_optimizer(tf: Any) -> None:
    config = tf.compat.v1.ConfigProto()
    with pytest.raises(SessionOptionError, match=r"^no custom optimizer named NpuOptimizer in the ConfigProto "
                       r"\(its custom optimizers: none\); allowed: a custom_optimizers entry"):
        npu_options_from_config(config)
    for name in ("MyOptimizer", "npuOptimizer"):
        config.graph_options.rewrite_options.custom_optimizers.add().name = name
    with pytest.raises(SessionOptionError, match=r"\(its custom optimizers: 'MyOptimizer', 'npuOptimizer'\) "
                       r"\('npuOptimizer' is not spelled 'NpuOptimizer'\)"):
        npu_options_from_config(config)


def test_objects_are_duck_typed() -> None:
    from tensorflow.core.framework.attr_value_pb2 import AttrValue

    entry = SimpleNamespace(name="NpuOptimizer", parameter_map={"dump_step": AttrValue(s=b"1|3"),
                                                                "graph_run_mode": AttrValue(i=0)})
    rewrite_options = SimpleNamespace(custom_optimizers=[entry])
    config = SimpleNamespace(graph_options=SimpleNamespace(rewrite_options=rewrite_options))
    options = npu_options_from_config(config, environ={})
    assert options.dump_step == (StepRange(1, 1), StepRange(3, 3)) and options.graph_run_mode == 0
    with pytest.raises(SessionOptionError, match=r"^a dict is not a ConfigProto: it has no graph_options"):
        npu_options_from_config({"graph_options": {}})


def test_reading_text_and_binary_files(tf: Any, tmp_path: Path) -> None:
    from google.protobuf import text_format

    config = seed_config(tf, in_out_pair=PAIRS, mix_compile_mode=True, in_out_pair_flag=False)
    text_file = tmp_path / "session.pbtxt"
    text_file.write_text("# the session of the inference service\n" + text_format.MessageToString(config),
                         encoding="utf-8")
    binary_file = tmp_path / "session.bin"
    binary_file.write_bytes(config.SerializeToString())
    expected = npu_options_from_config(config, environ={})
    assert expected.in_out_pair[0].outputs == ("import/conv2d_59/BiasAdd", "import/conv2d_67/BiasAdd")
    assert read_npu_options(text_file, environ={}) == expected
    assert read_npu_options(binary_file, environ={}) == expected
    renamed = tmp_path / "session.pb"           # the form is read from the content
    renamed.write_bytes(text_file.read_bytes())
    assert read_npu_options(renamed, environ={}) == expected


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.pbtxt"
    with pytest.raises(SessionOptionError, match=rf"^{re.escape(str(missing))}: cannot read the session configuration"):
        read_npu_options(missing)
    empty = tmp_path / "empty.pbtxt"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(SessionOptionError, match=rf"^{re.escape(str(empty))}: the file is empty"):
        read_npu_options(empty)
    wrong = tmp_path / "wrong.pbtxt"
    wrong.write_text("graph_options { rewrite_options { custom_optimizer { name: 'NpuOptimizer' } } }\n",
                     encoding="utf-8")
    with pytest.raises(SessionOptionError,
                       match=rf"^{re.escape(str(wrong))}: not a ConfigProto \(as text: 1:.*custom_optimizer.*"
                       r"\); allowed: a ConfigProto in text \(\.pbtxt\) or binary form$"):
        read_npu_options(wrong)
    garbage = tmp_path / "garbage.pb"
    garbage.write_bytes(b"\xff\xff\xff")
    with pytest.raises(SessionOptionError, match=rf"^{re.escape(str(garbage))}: not a ConfigProto \(as binary: .*; "
                       r"as text: .*\); allowed: a ConfigProto"):
        read_npu_options(garbage)
    bad = tmp_path / "bad.pbtxt"
    bad.write_text('graph_options { rewrite_options { custom_optimizers { name: "NpuOptimizer" parameter_map '
                   '{ key: "dump_step" value { s: "5-1" } } } } }\n', encoding="utf-8")
    with pytest.raises(SessionOptionError,
                       match=rf"^{re.escape(str(bad))}: NpuOptimizer option dump_step: '5-1' has the range") as info:
        read_npu_options(bad)
    assert info.value.option == "dump_step"


def test_the_package_does_not_import_tensorflow() -> None:
    code = ("import sys, scopefusion.core.options as s; s.npu_options(dump_step='1|2', graph_run_mode=0); "
            "print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# ------------------------------------------------------------ rendering

def test_values_are_rendered_in_their_syntax(places: dict[str, str]) -> None:
    options = build({**DYNAMIC, "dump_step": "0|5|10-20", "dynamic_inputs_shape_range": SHAPE_RANGE,
                     "stream_max_parallel_num": "DNN_VM_TF:10,DNN_V100:1", "local_device_list": "0,1"})
    assert render_value("dump_step", options.dump_step) == "0|5|10-20"
    assert render_value("input_shape", options.input_shape) == DYNAMIC["input_shape"]
    assert render_value("dynamic_dims", options.dynamic_dims) == DYNAMIC["dynamic_dims"]
    assert render_value("dynamic_inputs_shape_range", options.dynamic_inputs_shape_range) == \
        "getnext:[128,3~5,2~128,-1],[64,3~5,2~128,-1];data:[128,3~5,2~128,-1]"
    assert render_value("stream_max_parallel_num", options.stream_max_parallel_num) == "DNN_VM_TF:10,DNN_V100:1"
    assert render_value("local_device_list", options.local_device_list) == "0,1"
    assert render_value("dump_step", ()) == "every step" and render_value("dump_path", None) == "not set"
    pairs = build({"in_out_pair": PAIRS, "mix_compile_mode": True}).in_out_pair
    assert render_value("in_out_pair", pairs) == PAIRS


# ------------------------------------------------------------ config check

CHECKED_CONFIG = """\
# session options of the inference service
graph_options {
  rewrite_options {
    remapping: OFF
    custom_optimizers {
      name: "NpuOptimizer"
      parameter_map { key: "use_off_line" value { b: true } }
      parameter_map { key: "enable_scope_fusion_passes" value { s: "ScopeLayerNormPass" } }
      parameter_map { key: "enable_dump" value { b: true } }
      parameter_map { key: "dump_path" value { s: "%s" } }
      parameter_map { key: "dump_step" value { s: "0|5|10-20" } }
      parameter_map { key: "precision_mode" value { s: "allow_mix_precision" } }
      parameter_map { key: "hccl_timeout" value { i: 600 } }
    }
  }
}
"""


def test_config_check_prints_the_effective_options(tmp_path: Path) -> None:
    path = tmp_path / "session.pbtxt"
    path.write_text(CHECKED_CONFIG % tmp_path, encoding="utf-8")
    out = io.StringIO()
    assert config_check(path, console=Console(file=out, width=200, color_system=None)) == 0
    printed = out.getvalue()
    rows = table_rows(printed)
    assert list(rows) == ["option", *OPTION_NAMES]
    assert rows["option"] == ["value", "default or set", "use"]
    assert rows["use_off_line"] == ["True", "set", "acted on"]
    assert rows["enable_scope_fusion_passes"] == ["ScopeLayerNormPass", "set", "acted on"]
    assert rows["enable_dump"] == ["True", "set", "acted on"]
    assert rows["dump_path"] == [str(tmp_path), "set", "acted on"]
    assert rows["dump_step"] == ["0|5|10-20", "set", "acted on"]
    assert rows["dump_mode"] == ["output", "default", "acted on"]
    assert rows["precision_mode"] == ["allow_mix_precision", "set", "recorded"]
    assert rows["hccl_timeout"] == ["600", "set", "recorded"]
    assert rows["input_shape"] == ["not set", "default", "acted on"]
    assert rows["buffer_optimize"] == ["l2_optimize", "default", "recorded"]
    assert f"NpuOptimizer options of {path}" in printed
    assert ("7 option(s) set, 5 of them acted on here (use_off_line, enable_dump, dump_path, dump_step, "
            "enable_scope_fusion_passes); the others are validated and recorded for a back end") in printed


def test_config_check_raises_on_a_bad_configuration(tmp_path: Path) -> None:
    path = tmp_path / "session.pbtxt"
    path.write_text((CHECKED_CONFIG % tmp_path).replace('"enable_dump"', '"enable_dumps"'), encoding="utf-8")
    out = io.StringIO()
    with pytest.raises(SessionOptionError) as info:
        config_check(path, console=Console(file=out, width=200, color_system=None), strict=True)
    assert str(info.value) == (f"{path}: NpuOptimizer option enable_dumps (did you mean enable_dump?): unknown; "
                               "allowed: one of the 60 options the reference's NpuOptimizer reads")
    assert out.getvalue() == ""
