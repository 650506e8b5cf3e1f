"""Robustness of the command line: outputs (standard output, special files,
links, unwritable directories, all-or-nothing writes, long names, signals,
defaults, extensions) and the details a new user runs into (signatures, Keras
files, TensorFlow's causes, feeds, option values, table widths, native noise,
API parameter names, plugins that are installed but not loaded)."""
from __future__ import annotations

import io
import json
import os
import pty
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from tests.helpers.installed_plugins import cli
from rich.console import Console
from rich.text import Text

import scopefusion
from scopefusion import OptionError, load_model, save_graph
from scopefusion.cli import EXAMPLE_MODEL, main
from scopefusion.cli.console import list_rows, print_list, print_summary, print_verification
from scopefusion.core.graph_fusion.switch import FusionSwitch
from scopefusion.plugins.registry import NO_AUTOLOAD_ENV

TIMEOUT = 300


def _quiet_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no TF_CPP_MIN_LOG_LEVEL of the test session."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(extra)
    return env


def _scopefusion(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scopefusion.cli", *args], cwd=cwd, env=_quiet_env(),
                          capture_output=True, timeout=TIMEOUT, **kwargs)


def _one_error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("scopefusion: error:"), lines
    return lines[0]


def _model(tmp_path: Path, name: str = "m.pb") -> Path:
    model = tmp_path / name
    model.write_bytes(EXAMPLE_MODEL.read_bytes())
    return model


# ======================================================================= outputs
def test_dash_writes_the_graph_to_standard_output(tmp_path):
    proc = _scopefusion("run", str(EXAMPLE_MODEL), "-o", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    graph, fmt = scopefusion.core.graph.io.parse_graph_def(proc.stdout)
    # the 5 layer norms, 4 of them with their residual add (AddLayerNorm)
    assert fmt == "pb" and sum(n.op in ("LayerNorm", "AddLayerNorm") for n in graph.node) == 5
    assert b"wrote standard output (fused form)" in proc.stderr  # the summary moved to standard error
    assert list(tmp_path.iterdir()) == []
    text = _scopefusion("run", str(EXAMPLE_MODEL), "-o", "-", "--output-format", "pbtxt", cwd=tmp_path)
    assert text.returncode == 0 and text.stdout.startswith(b"node {")


def test_binary_to_a_terminal_is_refused(tmp_path):
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "scopefusion.cli", "run", str(EXAMPLE_MODEL), "-o", "-"],
                              stdout=follower, stderr=subprocess.PIPE, cwd=tmp_path, env=_quiet_env(),
                              timeout=TIMEOUT)
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 2
    line = proc.stderr.decode().strip()
    assert line.startswith("scopefusion: error: -o -: refusing to write a binary GraphDef to a terminal")
    assert "-o fused.pbtxt" in line and "--output-format pbtxt" in line


def _special_files(tmp_path: Path) -> list[Path]:
    fifo = tmp_path / "fifo.pb"
    os.mkfifo(fifo)
    link = tmp_path / "link-to-fifo.pb"
    link.symlink_to(fifo)
    files = [fifo, link]
    if os.geteuid() == 0:  # a character device like /dev/null, made here
        device = tmp_path / "null.pb"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        files.append(device)
    return files


def test_special_files_are_refused_not_replaced(tmp_path, capsys):
    for special in _special_files(tmp_path):
        kind = os.stat(special).st_mode
        for option in ("-o", "--report"):
            argv = ["run", str(EXAMPLE_MODEL), "-o", str(tmp_path / "o.pb"), option, str(special)]
            assert main(argv) == 2
            line = _one_error(capsys)
            assert "refusing to replace it" in line and ("FIFO" in line or "character device" in line), line
            assert os.stat(special).st_mode == kind  # still the special file
    assert not (tmp_path / "o.pb").exists()


def test_a_symlink_is_written_through_and_kept(tmp_path, capsys):
    target = tmp_path / "store" / "fused.pb"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "latest.pb"
    link.symlink_to(target)
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert load_model(target).graph_def.node  # the target holds the fused graph
    assert sorted(p.name for p in target.parent.iterdir()) == ["fused.pb"]  # no temporary file left


def test_an_unwritable_directory_is_an_error_before_the_model_is_read(tmp_path, capsys):
    bad_model = tmp_path / "bad.pb"
    bad_model.write_bytes(b"\x01\x02 not a graph")
    if os.geteuid() == 0:
        directory = Path("/sys")  # not even root creates files there
    else:
        directory = tmp_path / "read-only"
        directory.mkdir()
        directory.chmod(0o555)
    report = ["-o", str(tmp_path / "o.pb"), "--report", str(directory / "r.json")]
    for argv in (["-o", str(directory / "o.pb")], report):
        assert main(["run", str(bad_model), *argv]) == 2
        line = _one_error(capsys)
        assert f"cannot write the {'report' if '--report' in argv else 'output'} in directory {directory}" in line
    assert not (tmp_path / "o.pb").exists()


def test_a_report_that_fails_after_the_output_leaves_no_new_output(tmp_path, capsys, monkeypatch):
    out, report = tmp_path / "o.pb", tmp_path / "r.json"
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst) == report:
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(out), "--report", str(report)]) == 3
    assert "No space left on device" in _one_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # neither file, no temporary file
    out.write_bytes(b"the previous output")
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(out), "--report", str(report)]) == 3
    capsys.readouterr()
    assert out.read_bytes() == b"the previous output"  # put back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.pb"]


def test_a_verification_error_writes_nothing_and_a_mismatch_keeps_the_output(tmp_path, capsys):
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, not_an_input=np.zeros(3, np.float32))
    out, report = tmp_path / "o.pb", tmp_path / "r.json"
    argv = ["run", str(EXAMPLE_MODEL), "-o", str(out), "--report", str(report), "--verify"]
    assert main([*argv, "--feeds", str(feeds)]) == 2
    assert "--feeds: 'not_an_input:0' is not an input of the graph" in _one_error(capsys)
    assert not out.exists() and not report.exists()
    assert main([*argv, "--atol", "0", "--rtol", "0", "--runs", "1"]) == 1  # a mismatch, by design
    assert "verification failed" in capsys.readouterr().err
    assert load_model(out).graph_def.node and json.loads(report.read_text())["passes"]


def test_an_output_name_of_the_longest_length_works(tmp_path, capsys):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    out = tmp_path / ("f" * (limit - 3) + ".pb")
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(out)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


#: The command, with the fsync of each written file held until a signal arrives: the file's bytes
#: are written (a marker file tells the test so) and the rename has not happened yet.
_HELD_AT_FSYNC = """
import os, sys, time
from pathlib import Path
from scopefusion import cli
marker, real_fsync = Path(sys.argv[1]), os.fsync
def held(fd):
    marker.write_text(str(os.fstat(fd).st_size))
    time.sleep(120)
    real_fsync(fd)
os.fsync = held
sys.exit(cli.main(sys.argv[2:]))
"""


def test_sigterm_while_writing_leaves_no_temporary_file(tmp_path):
    work, marker = tmp_path / "out", tmp_path / "writing"
    work.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _HELD_AT_FSYNC, str(marker), "run", str(EXAMPLE_MODEL),
                             "-o", str(work / "o.pb")],
                            cwd=tmp_path, env=_quiet_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + TIMEOUT
    try:
        while not marker.exists() or not marker.read_text():
            assert proc.poll() is None, f"finished before writing: {proc.stderr.read().decode()[-500:]}"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        written = list(work.iterdir())
        assert len(written) == 1 and written[0].name.endswith(".tmp")
        assert written[0].stat().st_size == int(marker.read_text()) > 0  # the graph, not yet renamed
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGTERM
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("name,expected", [("net.pbtxt", "net_fused.pbtxt"), ("net.pb", "net_fused.pb"),
                                           ("net.txt", "net_fused.txt"), ("net.graph", "net_fused.pbtxt")])
def test_the_default_output_keeps_the_input_format_and_extension(tmp_path, monkeypatch, capsys, name, expected):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "in" / name
    model.parent.mkdir()
    text = name.endswith(("txt", ".graph"))
    save_graph(load_model(EXAMPLE_MODEL).graph_def, model, fmt="pbtxt" if text else "pb")
    assert main(["run", str(model)]) == 0
    written = tmp_path / expected
    assert load_model(written).format == ("pbtxt" if text else "pb")
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == [expected]


def test_unknown_output_extensions_are_errors(tmp_path, capsys):
    for name in ("out.onnx", "out"):
        assert main(["run", str(EXAMPLE_MODEL), "-o", str(tmp_path / name)]) == 2
        line = _one_error(capsys)
        assert "unknown extension" in line and ".pb or .graphdef (binary) or .pbtxt or .txt (text)" in line
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(tmp_path / "out.onnx"), "--output-format", "pb"]) == 0
    assert load_model(tmp_path / "out.onnx").format == "pb"
    with pytest.raises(OptionError, match="unknown extension '.onnx'"):
        save_graph(load_model(EXAMPLE_MODEL).graph_def, tmp_path / "api.onnx")


# ================================================================== SavedModels
@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    import tensorflow as tf

    class Two(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(np.eye(4, dtype=np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def alpha(self, x):
            return {"y": tf.matmul(x, self.w)}

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def beta(self, x):
            return {"z": tf.nn.relu(x)}

    root = tmp_path_factory.mktemp("saved")
    module = Two()
    tf.saved_model.save(module, str(root / "two"), signatures={
        "alpha": module.alpha.get_concrete_function(), "beta": module.beta.get_concrete_function()})
    tf.saved_model.save(module, str(root / "one"), signatures={"serving_default": module.alpha.get_concrete_function()})
    return root


def test_several_signatures_without_serving_default_are_an_error(saved_models, tmp_path, capsys):
    out = tmp_path / "o.pb"
    assert main(["run", str(saved_models / "two"), "-o", str(out)]) == 3
    line = _one_error(capsys)
    assert "2 signatures and none is serving_default: alpha, beta; choose one with --signature NAME" in line
    assert main(["run", str(saved_models / "two"), "-o", str(out), "--signature", "beta"]) == 0
    assert [n.op for n in load_model(out).graph_def.node].count("Relu") == 1


def test_verify_takes_the_signature_of_the_original(saved_models, tmp_path, capsys):
    out = tmp_path / "beta.pb"
    assert main(["run", str(saved_models / "two"), "-o", str(out), "--signature", "beta"]) == 0
    capsys.readouterr()
    assert main(["verify", str(saved_models / "two"), str(out)]) == 3
    assert "--signature NAME" in _one_error(capsys)
    assert main(["verify", str(saved_models / "two"), str(out), "--signature", "beta"]) == 0
    assert "verified: 1 output(s) match" in capsys.readouterr().out
    assert main(["verify", str(out), str(out), "--signature", "beta"]) == 2
    assert "is not a SavedModel directory" in _one_error(capsys)


def test_loading_a_saved_model_prints_no_native_lines(saved_models, tmp_path):
    proc = _scopefusion("run", str(saved_models / "one"), "-o", str(tmp_path / "o.pb"), "--verify", cwd=tmp_path,
                        text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("SavedModel signature frozen: inputs x:0")
    assert all(line.startswith(("SavedModel signature frozen", "input x: unknown dimensions")) for line in lines), lines


def test_a_plain_directory_is_named_as_not_a_saved_model(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not a model")
    assert main(["run", "."]) == 3
    line = _one_error(capsys)
    assert ".: a directory but not a SavedModel" in line and "overwrite" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("name", ["model.keras", "model.h5"])
def test_keras_files_say_how_to_export_a_saved_model(tmp_path, capsys, name):
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.save(tmp_path / name)
    assert main(["run", str(tmp_path / name), "-o", str(tmp_path / "o.pb")]) == 3
    line = _one_error(capsys)
    assert "a Keras model file, not a GraphDef or SavedModel; export a SavedModel first" in line
    assert f"keras.saving.load_model('{tmp_path / name}', compile=False).export('model_saved')" in line
    assert "tf.saved_model.save(model, 'model_saved')" in line


# ================================================================= verification
def _gather_graph(unused_input: bool = False):
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        ids = tf1.placeholder(tf.int32, [None], name="ids")
        table = tf.constant(np.arange(20, dtype=np.float32).reshape(5, 4))
        tf.identity(tf.gather(table, ids, name="lookup"), name="out")
        if unused_input:  # read by nothing that is fetched: unknown rank, a dtype no random values exist for
            tf.strings.length(tf1.placeholder(tf.string, None, name="comment"), name="comment_length")
    return graph.as_graph_def()


def test_a_failing_run_shows_tensorflows_cause(tmp_path, capsys):
    model = tmp_path / "g.pb"
    save_graph(_gather_graph(), model)
    assert main(["verify", str(model), str(model), "--int-range", "5,9"]) == 3
    line = _one_error(capsys)
    assert "running the original graph failed: InvalidArgumentError at node 'lookup' (GatherV2):" in line
    assert "indices[0] = " in line and "is not in [0, 5)" in line and "Graph execution error" not in line


def test_wrong_feeds_list_the_inputs_it_needs(tmp_path, capsys):
    model = tmp_path / "g.pb"
    save_graph(_gather_graph(), model)
    feeds = tmp_path / "f.npz"
    np.savez(feeds, idz=np.array([1], np.int32))
    assert main(["verify", str(model), str(model), "--feeds", str(feeds)]) == 2
    assert "--feeds: 'idz:0' is not an input of the graph; the inputs it needs: ids" in _one_error(capsys)


def test_only_inputs_the_outputs_depend_on_need_values(tmp_path, capsys):
    model = tmp_path / "g.pb"
    save_graph(_gather_graph(unused_input=True), model)
    argv = ["verify", str(model), str(model), "--verify-outputs", "out", "--int-range", "0,5"]
    assert main(argv) == 0
    assert "verified: 1 output(s) match" in capsys.readouterr().out
    feeds = tmp_path / "f.npz"
    np.savez(feeds, ids=np.array([0, 4], np.int32))
    assert main([*argv, "--feeds", str(feeds)]) == 0


@pytest.mark.parametrize("argv,needle", [
    (["--verify-outputs", "bert/pooler/dense/Tahn"],
     "--verify-outputs: no tensor 'bert/pooler/dense/Tahn': the graph has no node 'bert/pooler/dense/Tahn' "
     "(did you mean 'bert/pooler/dense/Tanh'"),
    (["--verify-outputs", "bert/pooler/dense/Tanh:1"],
     "--verify-outputs: no tensor 'bert/pooler/dense/Tanh:1': node 'bert/pooler/dense/Tanh' (Tanh) has 1 output"),
    (["--atol", "-1"], "--atol: a tolerance must be a finite number >= 0, not -1.0"),
    (["--rtol", "nan"], "--rtol: a tolerance must be a finite number >= 0"),
    (["--runs", "0"], "--runs: must be a whole number of at least 1, not 0"),
    (["--int-range", "5,5"], "--int-range: (5, 5): HI must be greater than LO"),
])
def test_bad_verification_options_are_errors(tmp_path, capsys, argv, needle):
    out = tmp_path / "o.pb"
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(out), "--verify", *argv]) == 2
    assert needle in _one_error(capsys)
    assert not out.exists()


def test_api_errors_name_the_parameters(tmp_path):
    graph = load_model(EXAMPLE_MODEL).graph_def
    with pytest.raises(OptionError, match=r"^int_range: \(5, 5\): HI must be greater than LO"):
        scopefusion.verify(graph, graph, fused_ops={}, int_range=(5, 5))
    with pytest.raises(OptionError, match=r"^atol: "):
        scopefusion.verify(graph, graph, fused_ops={}, atol=-1.0)
    with pytest.raises(OptionError, match=r"^input_shapes: item 'ids' is not name:d1,d2"):
        scopefusion.verify(graph, graph, fused_ops={}, input_shapes="ids")
    with pytest.raises(OptionError, match=r"^emit: must be one of fused, tf, not 'onnx'"):
        scopefusion.fuse(graph, emit="onnx")
    with pytest.raises(OptionError, match=r"^outputs: no tensor 'bert/pooler/dense/Tanh:3'"):
        scopefusion.fuse(graph, outputs="bert/pooler/dense/Tanh:3")
    for message in _api_messages(graph):
        assert "--" not in message, message


def _api_messages(graph) -> list[str]:
    messages = []
    for call in (lambda: scopefusion.verify(graph, graph, fused_ops={}, runs=0),
                 lambda: scopefusion.verify(graph, graph, fused_ops={}, input_shapes="nope:1"),
                 lambda: scopefusion.fuse(graph, enable_scope_fusion_passes="NoSuchPass")):
        with pytest.raises(OptionError) as info:
            call()
        messages.append(str(info.value))
    return messages


# ====================================================================== options
def test_outputs_port_must_exist(tmp_path, capsys):
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(tmp_path / "o.pb"), "--outputs", "bert/pooler/dense/Tanh:3"]) == 2
    assert "--outputs: no tensor 'bert/pooler/dense/Tanh:3': node 'bert/pooler/dense/Tanh' (Tanh) has 1 output" in \
        _one_error(capsys)
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(tmp_path / "o.pb"), "--outputs", "bert/pooler/dense/Tanh:0"]) == 0


def test_repeated_enable_options_accumulate(capsys):
    assert main(["list", "--json", "--enable_scope_fusion_passes", "ScopeInstanceNormPass",
                 "--enable-scope-fusion-passes", "ScopeClipBoxesPass"]) == 0
    enabled = {p["name"] for p in json.loads(capsys.readouterr().out)["passes"] if p["enabled"] and not p["general"]}
    assert enabled == {"ScopeInstanceNormPass", "ScopeClipBoxesPass"}


# ======================================================================== tables
def _printed_lines(print_function, *args) -> list[str]:
    out = Console(width=80, force_terminal=True, file=io.StringIO(), highlight=False, soft_wrap=True)
    print_function(*args, out)
    return [Text.from_ansi(line).plain for line in out.file.getvalue().splitlines()]


def _table_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line[:1] in "┏┃┡│└"]


def test_tables_fit_80_columns_and_names_stay_whole(registry):
    result = scopefusion.fuse(EXAMPLE_MODEL, registry=registry, enable_scope_fusion_passes="ScopeInstanceNormPass")
    lines = _printed_lines(print_summary, result.report)
    assert all(len(line) <= 80 for line in _table_lines(lines)), lines
    idle = next(line for line in lines if line.startswith("nothing to try in this graph"))
    for p in result.report.passes:  # in the table, or named whole among the passes with nothing to try
        assert any(f"│ {p.name} " in line for line in lines) or f" {p.name}," in idle or f" {p.name} (" in idle, p.name
    rows = list_rows(registry, ["ScopeInstanceNormPass"], FusionSwitch.default())
    lines = _printed_lines(print_list, rows, True)
    assert all(len(line) <= 80 for line in _table_lines(lines)), lines
    for name in registry.pass_names() + registry.graph_pass_names():
        assert any(f"│ {name} " in line for line in lines), name
    graph = load_model(EXAMPLE_MODEL).graph_def
    verified = scopefusion.verify(graph, result.fused_graph_def, fused_ops=registry.fused_ops, runs=1)
    lines = _printed_lines(print_verification, verified)
    assert all(len(line) <= 80 for line in _table_lines(lines)) and any("bert/pooler/dense/Tanh:0 " in x for x in lines)


def test_columns_80_from_the_environment_is_obeyed(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "scopefusion.cli", "run", str(EXAMPLE_MODEL), "-o",
                           str(tmp_path / "o.pb")], env=_quiet_env(COLUMNS="80"), capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    table = _table_lines(proc.stdout.splitlines())
    assert table and all(len(line) <= 80 for line in table)
    assert any("│ MatMulBiasAddFusionPass " in line for line in table)


# ======================================================================= plugins
def test_installed_plugins_are_listed_when_autoloading_is_off(plugin_dirs):
    ran = cli(plugin_dirs, ["sf-test-extra"], "list", "--plugins", **{NO_AUTOLOAD_ENV: "1"})
    assert ran.returncode == 0, ran.stderr
    assert "No plugins installed" not in ran.stdout
    assert "sf-test-extra" in ran.stdout and "not loaded: autoloading disabled" in ran.stdout
    assert "1 plugin(s) installed, none loaded: SCOPEFUSION_DISABLE_PLUGIN_AUTOLOAD is set" in ran.stdout
    data = json.loads(cli(plugin_dirs, ["sf-test-extra"], "list", "--json", **{NO_AUTOLOAD_ENV: "1"}).stdout)
    assert [(p["distribution"], p["blocked"]) for p in data["plugins"]] == [("sf-test-extra", True)]
    assert "TestExtraPass" not in {p["name"] for p in data["passes"]}


def test_an_unknown_name_in_scopefusion_plugins_is_warned_about(plugin_dirs):
    ran = cli(plugin_dirs, ["sf-test-extra"], "list", "--json", SCOPEFUSION_PLUGINS="nope")
    assert ran.returncode == 0
    assert "scopefusion: warning: SCOPEFUSION_PLUGINS nope: no installed plugin has that entry-point or " \
           "distribution name" in ran.stderr


@pytest.mark.parametrize("how,needle", [
    (["--block-plugin", "sf-test-extra"], "blocked by --block-plugin; take the plugin out of it"),
    (["--only-plugins", "nothing-else"], "blocked by --only-plugins; add the plugin to it"),
])
def test_a_pass_of_a_blocked_plugin_names_the_plugin(plugin_dirs, tmp_path, how, needle):
    ran = cli(plugin_dirs, ["sf-test-extra"], "run", str(EXAMPLE_MODEL), "-o", str(tmp_path / "o.pb"),
              "--enable_scope_fusion_passes", "TestExtraPass", *how)
    assert ran.returncode == 2
    line = ran.stderr.strip().splitlines()[-1]
    assert line.startswith("scopefusion: error: pass 'TestExtraPass' is provided by plugin 'extra' "
                           "(distribution sf-test-extra 1.2.3"), line
    assert needle in line and "unknown pass" not in line
    assert not (tmp_path / "o.pb").exists()
