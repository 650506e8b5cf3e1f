"""The tool's own one-line errors where a raw exception or a traceback used to come out: Ctrl-C
while the command's modules load, a reader gone away from ``-o -``, a long user text, a plugin
hook returning a non-class, a broken feeds file, a pass that never returns."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import scopefusion
from scopefusion.core.fusion.options import DEFAULT_PASS_TIMEOUT, FusionOptions
from scopefusion.core.parameters import ParameterError
from scopefusion.core.verify.feeds import load_npz_feeds
from scopefusion.plugins.registry import described


def test_ctrl_c_while_the_command_imports_its_modules_is_one_line():
    code = textwrap.dedent("""
        import sys
        sys.argv = ["scopefusion", "list"]
        class Interrupt:
            def find_spec(self, name, path=None, target=None):
                if name == "scopefusion.cli.console":
                    raise KeyboardInterrupt
        sys.meta_path.insert(0, Interrupt())
        from scopefusion.cli import main
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 130
    assert done.stderr.strip() == "scopefusion: interrupted"


def test_a_reader_gone_away_from_dash_o_is_an_error(tmp_path):
    from scopefusion.cli import EXAMPLE_MODEL
    with subprocess.Popen([sys.executable, "-m", "scopefusion", "run", str(EXAMPLE_MODEL), "-o", "-"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        proc.stdout.close()  # the reader goes away before anything is written
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=300)
    assert code != 0
    assert err.strip().splitlines()[-1] == ("scopefusion: error: standard output was closed before the fused "
                                             "graph was written (the reader went away)")


def test_long_user_text_is_cut_in_the_error_line(tmp_path, capsys):
    from scopefusion.cli import main
    assert main(["run", "--enable_scope_fusion_passes", "P" * 10_000, "-o", str(tmp_path / "o.pb")]) != 0
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("scopefusion: error: ")
    assert len(line) < 800 and "characters...]" in line


def test_a_non_class_a_hook_returns_is_described_without_its_address():
    assert described(object()) == "an object of type object"
    assert described(int) == "class builtins.int"
    assert len(described("x" * 1000)) < 100


def test_broken_feeds_files_are_named(tmp_path):
    good = tmp_path / "f.npz"
    np.savez(good, x=np.ones((2, 3), np.float32))
    truncated, not_zip = tmp_path / "t.npz", tmp_path / "n.npz"
    truncated.write_bytes(good.read_bytes()[:100])
    not_zip.write_bytes(b"hello")
    with pytest.raises(ParameterError, match=r"t\.npz: cannot read feeds, the .npz file is damaged or truncated"):
        load_npz_feeds(str(truncated))
    with pytest.raises(ParameterError, match=r"n\.npz: not an \.npz file") as caught:
        load_npz_feeds(str(not_zip))
    assert "allow_pickle" not in str(caught.value)


@pytest.mark.parametrize("shapes", [{"x": None}, {"x": "x"}, {"x": 5}, {"x": [2.5]}, 5, ["x"]])
def test_input_shapes_of_the_wrong_kind_are_parameter_errors(shapes):
    from scopefusion.testing import graph_from_function
    import tensorflow as tf
    graph = graph_from_function(lambda x: tf.nn.relu(x), tf.TensorSpec([None, 3], tf.float32, "x"))
    with pytest.raises(scopefusion.ScopeFusionError, match="input_shapes"):
        scopefusion.fuse(graph, input_shapes=shapes)


def test_every_pass_has_a_time_limit_by_default():
    assert FusionOptions().pass_timeout == DEFAULT_PASS_TIMEOUT == 600.0
    assert FusionOptions(pass_timeout=float("inf")).pass_timeout == float("inf")


def test_verify_says_when_the_original_does_not_run_in_a_default_session_either():
    """verify runs graphs with Grappler's remapper off; when the original fails there, it asks a
    default session: a graph that fails there too is named as not running at all."""
    import tensorflow as tf
    from scopefusion.testing import graph_from_function
    graph = graph_from_function(lambda x: x + tf.constant([1.0, 2.0, 3.0]), tf.TensorSpec([None], tf.float32, "x"))
    with pytest.raises(scopefusion.ScopeFusionError, match="a default TensorFlow session fails the same way, so "
                                                           "the original graph itself does not run on these feeds"):
        scopefusion.verify(graph, graph, feeds={"x": np.ones(2, np.float32)})


def test_a_full_disk_names_the_file_being_written(tmp_path, monkeypatch):
    import errno
    import os

    from scopefusion.core.graph import output_paths

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(output_paths.os, "fsync", full)
    target = tmp_path / "out.pb"
    with pytest.raises(OSError) as caught:
        output_paths.write_atomically(target, b"data")
    assert caught.value.filename == str(target) and caught.value.errno == errno.ENOSPC
    assert not target.exists() and os.listdir(tmp_path) == []  # no partial or temporary file
