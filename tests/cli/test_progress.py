"""The progress display: a transient status line on a terminal, nothing when output is piped."""
from __future__ import annotations

import os
import pty
import subprocess
import sys

import scopefusion
from scopefusion.cli import EXAMPLE_MODEL
from scopefusion.core.graph.io import load_model
from scopefusion.cli.progress import Progress

HIDE_CURSOR = "\x1b[?25l"


def _run(args, tmp_path, stderr_on_terminal: bool) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOPEFUSION_")}
    env.update(TERM="xterm", TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, "-m", "scopefusion.cli", *args]
    if not stderr_on_terminal:
        ran = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        return ran.returncode, ran.stdout, ran.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env, cwd=tmp_path)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal closed
            break
        if not data:
            break
        chunks.append(data)
    out = proc.stdout.read().decode()
    proc.wait(timeout=300)
    os.close(master)
    return proc.returncode, out, b"".join(chunks).decode("utf-8", "replace")


def test_on_a_terminal_a_transient_status_line_says_what_is_done(tmp_path):
    code, out, err = _run(["run", str(EXAMPLE_MODEL), "-o", "o.pb", "--verify", "--runs", "1"], tmp_path, True)
    assert code == 0, err
    assert HIDE_CURSOR in err and "loading bert_tiny.pb" in err
    assert err.rstrip("\r\n").endswith("\x1b[2K")  # the line is cleared at the end
    assert "wrote o.pb (fused form)" in out and HIDE_CURSOR not in out and "loading" not in out


def test_piped_output_shows_no_progress(tmp_path):
    code, out, err = _run(["run", str(EXAMPLE_MODEL), "-o", "o.pb", "--verify", "--runs", "1"], tmp_path, False)
    assert code == 0, err
    assert err == "" and "\x1b[" not in out and "wrote o.pb (fused form)" in out


def test_the_api_reports_each_step_and_progress_is_inert_off_a_terminal():
    steps: list[str] = []
    result = scopefusion.fuse(EXAMPLE_MODEL, progress=steps.append)
    graph_passes = [s for s in scopefusion.load_registry().graph_passes if s.fusion_type == "GraphFusion"]
    ub_passes = [s.name for s in scopefusion.load_registry().graph_passes if s.fusion_type == "UBFusion"]
    assert steps == [
        "indexing 234 nodes", "scope stage: matching (234 nodes)",
        "scope stage: ScopeLayerNormPass (1 of 2, 234 nodes)",
        "scope stage: ScopeLayerNormGradPass (2 of 2, 234 nodes)",
        "scope stage: checking and applying 5 candidate(s)",
        "graph stage: indexing 169 nodes", "graph stage: matching (169 nodes)",
        *[f"graph stage: {spec.name} ({k} of {len(graph_passes)}, 169 nodes)"
          for k, spec in enumerate(graph_passes, 1) if spec.default_on],  # those off by default do not run
        "graph stage: checking and applying 15 candidate(s)", "ub stage: indexing 144 nodes",
        "ub stage: matching (144 nodes)",
        *[f"ub stage: {name} ({k} of {len(ub_passes)}, 144 nodes)" for k, name in enumerate(ub_passes, 1)],
        "ub stage: checking and applying 9 candidate(s)", "trying the passes left out, for hints"]
    runs: list[str] = []
    check = scopefusion.verify(load_model(EXAMPLE_MODEL).graph_def, result.fused_graph_def, runs=2,
                               progress=runs.append)
    check.assert_ok()
    assert runs == ["verification run 1 of 2: 1 output(s)", "verification run 2 of 2: 1 output(s)"]
    with Progress(enabled=False) as progress:
        progress.update("nothing to show")
    assert progress._status is None and progress._stream is None
