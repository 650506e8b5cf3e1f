"""``scopefusion run --html``: the page's content, its writing rules, and the page opened in a
real headless browser (Chromium): it loads, its script runs, and a screenshot shows drawings."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import scopefusion
from scopefusion.report.html import report as html_report
from scopefusion.cli import EXAMPLE_MODEL, main
from scopefusion.core.fusion import places
from scopefusion.report.html.layout import NODE_HEIGHT, layers, layout

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: What would make the page reach the network (or another file): any absolute URL in an
#: attribute, a CSS url() or @import, a script or link element with a source.
EXTERNAL = re.compile(r"""(?:src|href|xlink:href|action)\s*=\s*["']?(?:[a-z]+:)?//|url\(\s*["']?(?:[a-z]+:)?//"""
                      r"""|@import|<link\b|<script[^>]*\bsrc\b|<iframe|<img\b""", re.I)


def _model():
    """A small encoder built with tf_slim: a layer norm and a dense layer with BERT's erf GELU
    (fused), a layer norm without beta (refused), and a gate that is a GELU with 1.5 for sqrt(2)
    (a near miss of GeluFusionPass)."""
    import tensorflow as tf
    import tf_slim
    from tests.models.activation_models import bert_gelu_erf
    from tests.helpers.freeze import freeze_graph

    tf1 = tf.compat.v1

    def build():
        x = tf1.placeholder(tf.float32, [4, 16], name="x")
        with tf1.variable_scope("encoder"):
            h = tf_slim.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1)
            with tf1.variable_scope("ffn"):
                h = tf_slim.layers.fully_connected(h, 16, activation_fn=bert_gelu_erf)
            out = tf_slim.layers.layer_norm(h + x, begin_norm_axis=-1, begin_params_axis=-1, center=False)
        with tf1.variable_scope("head"):
            y = out * 2.0
            gate = y * (0.5 * (1.0 + tf.math.erf(y / 1.5)))
        return {x: np.random.default_rng(0).normal(size=(4, 16)).astype(np.float32)}, [gate]

    graph_def, _, _ = freeze_graph(build)
    return graph_def


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The model fused by ``scopefusion run --html --report``: (page path, page text, JSON report)."""
    root = tmp_path_factory.mktemp("html")
    model = root / "encoder.pb"
    scopefusion.save_graph(_model(), model)
    html, report = root / "run.html", root / "report.json"
    assert main(["run", str(model), "-o", str(root / "fused.pb"), "--html", str(html), "--report", str(report)]) == 0
    return html, html.read_text(encoding="utf-8"), json.loads(report.read_text())


def _items(report: dict, key: str) -> list[tuple[str, dict]]:
    return [(p["name"], item) for p in report["passes"] for item in p[key]]


def test_the_page_shows_every_fused_op_with_two_drawings(page):
    _, text, report = page
    fused = _items(report, "fused")
    assert {f["type"] for _, f in fused} >= {"LayerNorm", "Gelu", "MatMulBiasAdd", "MatMulBiasAddActivation"}
    assert all(f["place"]["members"] for _, f in fused)  # the JSON report of an --html run holds the places
    sections = re.findall(r'<section class="item fused".*?</section>', text, flags=re.S)
    assert len(sections) == len(fused)
    for section, (pass_name, f) in zip(sections, fused, strict=True):
        assert f"<code>{f['name']}</code>" in section and f"by {pass_name}" in section
        assert section.count("<svg") == 2  # what it replaced, and the fused node
        assert 'class="n n-fused"' in section and 'class="n n-member"' in section
        assert f'data-name="{f["name"]}"' in section or f'data-name="{f["name"]} (fused)"' in section
        assert f"{f['removed_nodes']} node(s)" in section
    layer_norm = next(s for s in sections if "LayerNorm <code>encoder/LayerNorm</code>" in s)
    for member in ("encoder/LayerNorm/moments/mean", "encoder/LayerNorm/batchnorm/Rsqrt"):
        assert f'class="n n-member" data-name="{member}"' in layer_norm  # the replaced subgraph's nodes
    assert 'class="n n-outside" data-name="x"' in layer_norm  # the input it reads


def test_refusals_and_near_misses_are_drawn_with_the_failing_step_marked(page):
    _, text, report = page
    problems = [(p["name"], r) for p in report["passes"] for key in ("refused", "dropped", "near_misses")
                for r in p[key]]  # the page's order: per pass, its refusals, dropped results, near misses
    assert any(r["name"] == "encoder/LayerNorm_1" for _, r in _items(report, "refused"))
    sections = re.findall(r'<section class="item (?:refused|dropped|near-miss)".*?</section>', text, flags=re.S)
    assert len(sections) == len(problems) >= 3
    for section, (pass_name, r) in zip(sections, problems, strict=True):
        assert f"<code>{r['name']}</code> ({pass_name})" in section and section.count("<svg") == 1
    gelu = next(s for s in sections if "(GeluFusionPass)" in s and "head/mul_2" in s)
    assert "<mark>&#x27;head/truediv/y&#x27;</mark>" in gelu  # the reason's node, marked in the text
    assert 'class="n n-failing" data-name="head/truediv/y"' in gelu  # and in the drawing
    assert 'class="n n-failing" data-name="head/truediv"' in gelu


def test_the_page_has_the_summary_and_is_self_contained(page):
    _, text, report = page
    assert "<h2>Passes</h2>" in text and "<h2>Op counts (types that changed)</h2>" in text
    for p in report["passes"]:
        assert f"<td>{p['name']}</td>" in text
    assert "<td>LayerNorm</td><td class=num>0</td><td class=num>1</td><td class=num>+1</td>" in text
    assert EXTERNAL.findall(text) == []
    assert "http://" not in text and "https://" not in text
    assert text.count("<svg") == len(re.findall(r"<section class=\"item", text)) + len(_items(report, "fused"))


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("Chromium is needed to check the HTML page in a real browser and is not installed: "
                    "apt-get install -y --no-install-recommends chromium (.ci/run installs it)")
    return found


def _browser(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=180)


def _png_pixels(path: Path) -> np.ndarray:
    import tensorflow as tf

    return tf.io.decode_png(path.read_bytes(), channels=3).numpy()


def test_chromium_loads_the_page_and_runs_its_script(page, tmp_path):
    html, text, _ = page
    dom = _browser(tmp_path, "--dump-dom", html.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body is not None, dom.stdout[:500]
    assert 'data-ready="yes"' in body.group(0)  # the script ran to its end
    assert f'data-drawings="{text.count("<svg")}"' in body.group(0)  # and found every drawing


def test_a_screenshot_of_the_page_shows_the_drawings(page, tmp_path):
    html, _, _ = page
    shot = tmp_path / "shot.png"
    done = _browser(tmp_path, f"--screenshot={shot}", "--window-size=1200,2000", html.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = _png_pixels(shot)
    assert pixels.shape == (2000, 1200, 3)
    inked = np.any(pixels < 235, axis=2)
    assert inked.mean() > 0.03  # text, tables and drawings, not a blank page
    # below the legend (which shows them too), the drawings' colours: the replaced nodes' blue fill
    # (#ddf4ff) and the fused node's green (#dafbe1), box-sized areas of each
    drawings = pixels[200:]
    for colour in ((0xdd, 0xf4, 0xff), (0xda, 0xfb, 0xe1)):
        assert np.all(drawings == colour, axis=2).sum() > 2500, colour


# ------------------------------------------------------------------ writing


def test_dry_run_writes_no_page_and_dash_prints_it(tmp_path, capsys):
    html = tmp_path / "run.html"
    assert main(["run", "-o", str(tmp_path / "o.pb"), "--html", str(html), "--dry-run"]) == 0
    assert not html.exists() and not (tmp_path / "o.pb").exists()
    capsys.readouterr()
    assert main(["run", "-o", str(tmp_path / "o.pb"), "--html", "-", "--dry-run"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("<!DOCTYPE html>") and out.out.rstrip().endswith("</html>")
    assert "dry run: nothing written" in out.err  # the summary moves to standard error


def test_the_page_path_is_checked_before_any_work(tmp_path, capsys):
    out = tmp_path / "o.pb"
    assert main(["run", "-o", str(out), "--html", str(tmp_path / "missing" / "run.html")]) == 2
    assert "directory" in capsys.readouterr().err and not out.exists()
    assert main(["run", "-o", str(out), "--html", str(out)]) == 2
    assert "the HTML page and the fused graph cannot go to the same file" in capsys.readouterr().err
    assert main(["run", "-o", str(out), "--report", "-", "--html", "-"]) == 2
    assert "--report - and --html -: only one of them" in capsys.readouterr().err
    assert main(["run", "-o", str(out), "--html", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err and not out.exists()


def test_a_failing_run_leaves_no_page(tmp_path, capsys):
    html = tmp_path / "run.html"
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"not a graph")
    assert main(["run", str(bad), "-o", str(tmp_path / "o.pb"), "--html", str(html)]) == 3
    assert not html.exists() and [p.name for p in tmp_path.iterdir()] == ["bad.pb"]


def test_without_html_the_report_keeps_no_places(tmp_path):
    report = tmp_path / "r.json"
    assert main(["run", "-o", str(tmp_path / "o.pb"), "--report", str(report)]) == 0
    assert '"place"' not in report.read_text()


# --------------------------------------------------------------------- caps


def test_drawings_and_their_nodes_are_capped_with_a_note(monkeypatch):
    monkeypatch.setattr(html_report, "FUSED_DRAWN", 4)
    monkeypatch.setattr(places, "MEMBERS_KEPT", 6)
    result = scopefusion.fuse(str(EXAMPLE_MODEL), keep_places=True)
    fused = result.report.fused
    assert len(fused) == 29  # 5 layer norms, 13 + 2 (graph stage), 3 + 4 + 2 (UB: epilogues, residual norms, attention)
    text = html_report.html_report(result.report, "bert_tiny.pb")
    # two drawings per drawn fused op, one for the refusal (the embeddings' norm reads no residual sum)
    assert text.count('<section class="item fused"') == 4 and text.count("<svg") == 8 + 1
    assert "... and 25 more fused ops, not drawn" in text
    first = fused[0]
    assert first.type == "LayerNorm" and first.place.member_count == 14 and len(first.place.members) == 6
    assert "6 of 14 nodes shown" in text


def test_refusals_drawn_are_capped_with_a_note(page, monkeypatch):
    html, _, report = page
    monkeypatch.setattr(html_report, "REFUSALS_DRAWN", 2)
    result = scopefusion.fuse(str(html.with_name("encoder.pb")), keep_places=True)
    listed = sum(len(p.refused) + len(p.dropped) + p.near_miss_count for p in result.report.passes if p.ran)
    assert listed >= 4
    text = html_report.html_report(result.report, "encoder.pb")
    assert len(re.findall(r'<section class="item (?:refused|dropped|near-miss)"', text)) == 2
    assert f"... and {listed - 2} more, not drawn" in text


def test_no_place_kept_by_default():
    result = scopefusion.fuse(str(EXAMPLE_MODEL))
    assert all(f.place is None for f in result.report.fused)


# ------------------------------------------------------------------- layout


def test_layers_point_every_edge_downward_and_a_cycle_still_lays_out():
    edges = [("a", "b"), ("b", "c"), ("a", "c"), ("k", "c"), ("c", "d")]
    rows = layers(["a", "b", "c", "d", "k"], edges)
    level = {n: k for k, row in enumerate(rows) for n in row}
    assert all(level[a] < level[b] for a, b in edges)
    assert level["k"] == level["c"] - 1  # a source sits just above its reader
    cyclic = layout(["p", "q", "r"], [("p", "q"), ("q", "r"), ("r", "p")])
    assert set(cyclic.boxes) == {"p", "q", "r"} and cyclic.height >= 3 * NODE_HEIGHT


def test_the_docs_document_html_with_screenshots_of_real_pages():
    docs = Path(__file__).resolve().parents[2] / "docs"
    commands = (docs / "commands.md").read_text()
    usage = re.search(r"## `scopefusion run`\n\n```\n(.*?)```", commands, flags=re.S)
    assert usage is not None and "[--html run.html]" in usage.group(1)
    assert "* `--html FILE`:" in commands and "### The HTML page" in commands
    shots = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", commands)
    assert shots == ["html-report.png", "html-report-near-miss.png"]
    for shot in shots:
        pixels = _png_pixels(docs / shot)
        assert pixels.shape[1] == 1200 and np.any(pixels < 235, axis=2).mean() > 0.03
