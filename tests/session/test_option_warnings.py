"""Session configurations as real training scripts write them: keys outside the option table are
warnings (errors with strict options), the seed's constraints are one-line errors, and the seed's
defaults are filled in and reported as defaults (in the options, the run's report, the recorded
node and ``config check``)."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from rich.console import Console

import scopefusion
from scopefusion.cli.config_check import config_check
from scopefusion.core.options import SessionOptionError, npu_options
from scopefusion.core.options.record import DEFAULTS_ATTR, UNKNOWN_ATTR, session_attrs

GIB = 1024 ** 3
#: Keys real scripts set that the seed's table does not list.
SCRIPT_KEYS = {"jit_compile": True, "precision_mode_v2": "origin", "op_debug_config": "/tmp/cfg.json",
               "customize_dtypes": "/tmp/dtypes.cfg", "graph_exec_timeout": 600}
CONFIG = """
graph_options {
  rewrite_options {
    custom_optimizers {
      name: "NpuOptimizer"
      parameter_map { key: "use_off_line" value { b: true } }
      parameter_map { key: "jit_compile" value { b: true } }
      parameter_map { key: "graph_exec_timeout" value { i: 600 } }
      parameter_map { key: "enable_dumpp" value { b: true } }
    }
  }
}
"""


# ------------------------------------------------------------------ unknown keys
def test_unknown_keys_are_warnings_naming_them_and_kept():
    options = npu_options({"use_off_line": True, **SCRIPT_KEYS})
    assert dict(options.unknown) == SCRIPT_KEYS
    assert "jit_compile" not in options.given and options.use_off_line
    assert len(options.warnings) == len(SCRIPT_KEYS)
    assert all(any(f"option {key}" in w for w in options.warnings) for key in SCRIPT_KEYS)
    assert all("not in the option table" in w and "\n" not in w for w in options.warnings)


def test_a_typo_still_shows_its_close_match():
    (warning,) = npu_options(enable_dumpp=True).warnings
    assert warning.startswith("NpuOptimizer option enable_dumpp (did you mean enable_dump?): not in the option table")


def test_strict_options_make_unknown_keys_an_error():
    with pytest.raises(SessionOptionError,
                       match=r"option jit_compile \(did you mean mix_compile_mode\?\): unknown; allowed: ") as info:
        npu_options({"jit_compile": True}, strict=True)
    assert info.value.options == ("jit_compile",)


def test_unknown_keys_are_recorded_on_the_options_node():
    attrs = session_attrs(npu_options({"use_off_line": True, **SCRIPT_KEYS}))
    assert attrs[UNKNOWN_ATTR] == ",".join(SCRIPT_KEYS)
    assert attrs["_jit_compile"] == "1" and attrs["_graph_exec_timeout"] == "600"
    assert attrs["_precision_mode_v2"] == "origin"


def test_fuse_with_unknown_keys_runs_with_warnings_and_strict_stops(bert_encoder, registry, tmp_path):
    path = tmp_path / "session.pbtxt"
    path.write_text(CONFIG)
    result = scopefusion.fuse(bert_encoder.graph_def, registry=registry, config=str(path), hints=False)
    assert result.report.fused
    assert result.report.unknown_options == ["enable_dumpp", "graph_exec_timeout", "jit_compile"]
    assert any("enable_dumpp (did you mean enable_dump?)" in w for w in result.report.warnings)
    node = next(n for n in result.graph_def.node if n.name == result.report.options_node)
    assert node.attr[UNKNOWN_ATTR].s == b"enable_dumpp,graph_exec_timeout,jit_compile"
    with pytest.raises(SessionOptionError,
                       match=r"options enable_dumpp \(did you mean enable_dump\?\), graph_exec_timeout .*: unknown"):
        scopefusion.fuse(bert_encoder.graph_def, registry=registry, config=str(path), strict_options=True)


def test_session_with_unknown_keys_warns_and_strict_stops(bert_encoder, registry):
    import tensorflow as tf

    config = tf.compat.v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["jit_compile"].b = True
    custom_op.parameter_map["precision_mode_v2"].s = b"origin"
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(bert_encoder.graph_def, name="")
    with pytest.warns(UserWarning, match="option jit_compile .*: not in the option table"):
        sess = scopefusion.Session(graph=graph, config=config, registry=registry)
    with sess:
        sess.run(bert_encoder.outputs[0], bert_encoder.inputs)
    assert len(sess.report.warnings) == 2 and sess.report.fused_ops
    with pytest.raises(SessionOptionError, match=r"options jit_compile .*, precision_mode_v2 .*: unknown"):
        scopefusion.Session(graph=graph, config=config, registry=registry, strict_options=True)


def test_run_and_config_check_with_strict_options(bert_encoder, tmp_path):
    model = tmp_path / "bert.pb"
    model.write_bytes(bert_encoder.graph_def.SerializeToString())
    path = tmp_path / "session.pbtxt"
    path.write_text(CONFIG)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "scopefusion", *args], check=False, capture_output=True,
                              text=True, env=env)

    ran = cli("run", str(model), "--config", str(path), "-o", str(tmp_path / "out.pb"), "--no-hints")
    assert ran.returncode == 0, ran.stderr
    assert "scopefusion: warning: NpuOptimizer option jit_compile (did you mean mix_compile_mode?): not in the " \
        "option table" in ran.stderr
    strict = cli("run", str(model), "--config", str(path), "-o", str(tmp_path / "out2.pb"), "--strict-options")
    assert strict.returncode == 2 and not (tmp_path / "out2.pb").exists()  # a usage error
    assert strict.stderr.count("\n") == 1 and "enable_dumpp (did you mean enable_dump?)" in strict.stderr
    checked = cli("config", "check", str(path))
    assert checked.returncode == 0 and "warning: NpuOptimizer option graph_exec_timeout" in checked.stdout
    assert cli("config", "check", str(path), "--strict-options").returncode == 2


# ------------------------------------------------------------------ the seed's constraints
BAD = [
    ({"graph_memory_max_size": str(27 * GIB)}, ("graph_memory_max_size", "variable_memory_max_size"),
     f"variable_memory_max_size = {5 * GIB} (default) add up to {32 * GIB} bytes"),
    ({"graph_memory_max_size": str(20 * GIB), "variable_memory_max_size": str(12 * GIB)},
     ("graph_memory_max_size", "variable_memory_max_size"), "at most 33285996544 bytes (31 GiB) together"),
    ({"stream_max_parallel_num": "DNN_VM_TF:14"}, ("stream_max_parallel_num",),
     "gives DNN_VM_TF (AICPU) 14 streams; at most 13"),
    ({"stream_max_parallel_num": "DNN_VM_TF:10,DNN_V100:4"}, ("stream_max_parallel_num",),
     "gives DNN_V100 (AICORE) 4 streams; at most 3"),
    ({"op_select_implmode": "high_precision", "optypelist_for_implmode": "Pooling,Conv2D"},
     ("optypelist_for_implmode",), ("names the op type 'Conv2D', which has no choice of implementation; allowed: "
     "op types of Pooling, SoftmaxV2, LRN, ROIAlign")),
    ({"input_shape": "data:1,-1", "dynamic_dims": "20", "dynamic_node_type": 1}, ("dynamic_dims",),
     "has a single gear; dynamic gears need at least two"),
    ({"profiling_options": '{"output": "/tmp", "training_trace": "on", "fp_point": "a"}'}, ("profiling_options",),
     '"training_trace": "on" without bp_point'),
    ({"graph_run_mode": 0, "profiling_options": '{"training_trace": "on", "fp_point": "a", "bp_point": "b"}'},
     ("profiling_options", "graph_run_mode"), "training_trace only in training"),
]


@pytest.mark.parametrize(("values", "options", "text"), BAD)
def test_the_seeds_constraints_are_one_line_errors(values, options, text):
    with pytest.raises(SessionOptionError) as info:
        npu_options(values)
    assert info.value.options == options
    assert text in str(info.value) and "\n" not in str(info.value)


def test_the_limits_themselves_are_accepted():
    options = npu_options(graph_memory_max_size=str(26 * GIB), variable_memory_max_size=str(5 * GIB),
                          stream_max_parallel_num="DNN_VM_TF:13,DNN_V100:3", op_select_implmode="high_precision",
                          optypelist_for_implmode="Pooling,SoftmaxV2,LRN,ROIAlign")
    assert options.stream_max_parallel_num == (("DNN_VM_TF", 13), ("DNN_V100", 3))
    assert options.graph_memory_max_size + options.variable_memory_max_size == 31 * GIB


def test_task_trace_and_aicpu_other_than_on_off_count_as_off():
    options = npu_options(profiling_options='{"output": "/tmp", "task_trace": "yes", "aicpu": "on"}')
    assert options.profiling_options == {"output": "/tmp", "task_trace": "off", "aicpu": "on"}
    assert options.warnings == (("NpuOptimizer option profiling_options: 'task_trace' is 'yes', not on or off; "
                                "counted as off"),)


# ------------------------------------------------------------------ the seed's defaults
def test_defaults_are_filled_in_and_marked():
    options = npu_options(graph_memory_max_size=str(8 * GIB))
    assert options.graph_memory_max_size == 8 * GIB and options.variable_memory_max_size == 5 * GIB
    assert options.op_compiler_cache_mode == "disable"
    assert options.op_compiler_cache_dir == os.path.join(os.path.expanduser("~"), "atc_data")
    assert options.debug_dir == os.getcwd()
    assert options.stream_max_parallel_num == (("DNN_VM_TF", 1), ("DNN_V100", 1))
    assert options.defaults_filled() == ["variable_memory_max_size", "op_compiler_cache_mode",
                                         "op_compiler_cache_dir", "debug_dir", "stream_max_parallel_num"]
    attrs = session_attrs(options)
    assert attrs[DEFAULTS_ATTR] == ",".join(options.defaults_filled())
    assert attrs["_variable_memory_max_size"] == str(5 * GIB) and attrs["_graph_memory_max_size"] == str(8 * GIB)
    assert attrs["_op_compiler_cache_mode"] == "disable"
    assert attrs["_stream_max_parallel_num"] == "DNN_VM_TF:1,DNN_V100:1"


def test_defaults_in_the_report_and_config_check(bert_encoder, registry, tmp_path):
    path = tmp_path / "session.pbtxt"
    path.write_text(CONFIG.replace('parameter_map { key: "jit_compile" value { b: true } }',
                                   f'parameter_map {{ key: "graph_memory_max_size" value {{ s: "{8 * GIB}" }} }}'))
    result = scopefusion.fuse(bert_encoder.graph_def, registry=registry, config=str(path), hints=False)
    assert result.report.default_options["variable_memory_max_size"] == str(5 * GIB)
    assert result.report.default_options["op_compiler_cache_mode"] == "disable"
    assert "graph_memory_max_size" not in result.report.default_options
    out = io.StringIO()
    assert config_check(path, console=Console(file=out, width=250, color_system=None)) == 0
    printed = out.getvalue()
    assert f"variable_memory_max_size = {5 * GIB}" in printed and "op_compiler_cache_mode = disable" in printed
    assert "defaults filled in (the seed's, not set by the configuration)" in printed
    assert "acted on by scopefusion.Session only (they need the graph to run): profiling_mode," in printed
    assert "not acted on by scopefusion.Session (recorded): input_shape, dynamic_dims, dynamic_node_type" in printed
    assert "acted on by run, partition and fuse(): use_off_line," in printed
    row = next(line for line in printed.splitlines() if line.startswith("│ variable_memory_max_size"))
    assert str(5 * GIB) in row and "default" in row
