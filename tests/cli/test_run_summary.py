"""What ``scopefusion run`` says after fusing: the places each pass fused, the op counts that
changed, a note when nothing was fused, and ``--dry-run``."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from tests.helpers.freeze import freeze_graph

from scopefusion import load_model
from scopefusion.cli import EXAMPLE_MODEL, main


def _op_rows(text: str) -> dict[str, tuple[int, int, int]]:
    """The rows of the op-count table: op type -> (before, after, change)."""
    section = text.split("Op counts (types that changed)", 1)[1]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 4 and cells[1].isdigit():
            rows[cells[0]] = (int(cells[1]), int(cells[2]), int(cells[3]))
    return rows


def test_the_summary_counts_ops_as_the_written_graph_has_them(tmp_path, capsys):
    out, report = tmp_path / "o.pb", tmp_path / "r.json"
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(out), "--report", str(report)]) == 0
    text = capsys.readouterr().out
    rows = _op_rows(text)
    before = Counter(n.op for n in load_model(EXAMPLE_MODEL).graph_def.node)
    after = Counter(n.op for n in load_model(out).graph_def.node)
    changed = {op for op in set(before) | set(after) if before[op] != after[op]}
    assert set(rows) == changed and "LayerNorm" in rows and "Placeholder" not in rows
    for op, (b, a, change) in rows.items():
        assert (b, a, change) == (before[op], after[op], after[op] - before[op]), op
    data = json.loads(report.read_text())
    assert data["op_counts_after"] == dict(after) and data["op_counts_before"] == dict(before)
    for p in data["passes"]:  # every match accounted for, in the JSON too
        assert p["matches"] == len(p["fused"]) + len(p["refused"]) + len(p["dropped"]), p["name"]
    # the fused places, per pass: the first five, then how many more
    assert re.search(r"fused by ScopeLayerNormPass \(5 LayerNorm\): bert/embeddings/LayerNorm, ", text)
    assert "fused by MatMulBiasAddFusionPass (13 MatMulBiasAdd): " in text and "and 8 more (-v lists all)" in text
    assert "nothing was fused" not in text and f"wrote {out} (fused form): 234 -> 129 nodes" in text


def test_verbose_lists_every_fused_place(tmp_path, capsys):
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(tmp_path / "o.pb"), "-v"]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("fused by MatMulBiasAddFusionPass"))
    assert "more" not in line and line.count(", ") == 12 and "bert/pooler/dense/BiasAdd" in line


def test_dry_run_writes_nothing_and_says_the_same(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(EXAMPLE_MODEL), "-o", "o.pb", "--report", "r.json", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
    # 4 of the scope pass's 5 layer norms normalise a residual sum: the UB stage's AddLayerNorm takes them
    assert "fused by ScopeLayerNormPass (5 LayerNorm)" in text and _op_rows(text)["LayerNorm"] == (0, 1, 1)
    assert _op_rows(text)["AddLayerNorm"] == (0, 4, 4)
    assert text.rstrip().splitlines()[-1].startswith(
        "dry run: nothing written (o.pb would get the fused form): 234 -> 129 nodes, 29 fused op(s)")
    # --report - still prints the report (the summary moves to standard error); -o - writes no graph
    assert main(["run", str(EXAMPLE_MODEL), "-o", "-", "--report", "-", "--dry-run"]) == 2  # two outputs on stdout
    capsys.readouterr()
    assert main(["run", str(EXAMPLE_MODEL), "--report", "-", "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["nodes_after"] == 129 and "dry run: nothing written" in captured.err
    assert list(tmp_path.iterdir()) == []


def _write(graph_def, path):
    path.write_bytes(graph_def.SerializeToString())
    return str(path)


def test_nothing_fused_says_why(tmp_path, capsys):
    import tensorflow as tf
    import tf_slim

    tf1 = tf.compat.v1

    def plain():
        x = tf1.placeholder(tf.float32, [2, 8], name="x")
        return {}, [tf.identity(tf.nn.relu(x) * 2.0 + 1.0, name="out")]

    def instance():
        x = tf1.placeholder(tf.float32, [2, 6, 6, 4], name="x")
        return {}, [tf.identity(tf_slim.instance_norm(x), name="out")]

    model = _write(freeze_graph(plain)[0], tmp_path / "plain.pb")
    assert main(["run", model, "-o", str(tmp_path / "o.pb")]) == 0
    text = capsys.readouterr().out
    assert "nothing was fused: no pass found its pattern in this graph" in text
    assert "Op counts" not in text and "fused by" not in text

    model = _write(freeze_graph(instance)[0], tmp_path / "inst.pb")
    assert main(["run", model, "-o", str(tmp_path / "o.pb")]) == 0
    text = capsys.readouterr().out
    assert re.search(r"nothing was fused: 1 match\(es\) refused and \d+ near miss\(es\), each listed above", text)
    assert "hint: ScopeInstanceNormPass is not enabled; it would fuse 1 place(s) ('InstanceNorm')" in text


@pytest.mark.parametrize("flag", ["--dry-run", "--dry_run"])
def test_dry_run_spellings(tmp_path, monkeypatch, capsys, flag):
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(EXAMPLE_MODEL), flag]) == 0
    assert list(tmp_path.iterdir()) == [] and "dry run" in capsys.readouterr().out


def test_dry_run_of_a_mixed_run_writes_no_segments(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(EXAMPLE_MODEL), "--mix-compile-mode", "--segments-dir", "segs", "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert list(tmp_path.iterdir()) == [] and "wrote" not in captured.err
    assert "dry run: nothing written" in captured.out
