"""Every ordinary ``scopefusion run`` of a binary ``.pb`` indexes the graph from the native scan's
columns (plain, ``--verify``, ``--emit tf``, ``--html``, ``-o -``; and ``fuse(path)``,
``fuse(load_model(path))``), and writes the same bytes as a run reading the graph through protobuf.
Columns only ever describe the graph's current bytes: a graph handed out and changed after
loading is indexed through protobuf, never from the columns read before the change.
"""
from __future__ import annotations

import re

import pytest
from tests.helpers.native_paths import required_extension

from scopefusion import fuse
from scopefusion.cli import EXAMPLE_MODEL, main
from scopefusion.core.fusion import pipeline
from scopefusion.core.graph import graph_scan
from scopefusion.core.graph.io import load_model, take_columns

RUNS = {
    "plain": [],
    "verify": ["--verify"],
    "emit tf": ["--emit", "tf"],
    "html": ["--html", "{dir}/page.html"],
    "standard output": None,  # -o -
}


@pytest.fixture(scope="module")
def native():
    return required_extension("_scan")


@pytest.fixture
def given(monkeypatch) -> list[bool]:
    """Whether each pipeline run of the test was given columns."""
    seen: list[bool] = []
    run = pipeline.FusionPipeline.run

    def recording(self, graph_def, *, columns=None):
        seen.append(columns is not None)
        return run(self, graph_def, columns=columns)
    monkeypatch.setattr(pipeline.FusionPipeline, "run", recording)
    return seen


def _run(case: str, folder, capsysbinary) -> bytes:
    extra = RUNS[case]
    if extra is None:
        assert main(["run", str(EXAMPLE_MODEL), "-o", "-", "-q"]) == 0
        return capsysbinary.readouterr().out
    out = folder / "fused.pb"
    assert main(["run", str(EXAMPLE_MODEL), "-o", str(out), "-q",
                 *[a.format(dir=folder) for a in extra]]) == 0
    return out.read_bytes()


@pytest.mark.parametrize("case", sorted(RUNS))
def test_every_run_indexes_from_the_columns_and_writes_the_same(case, native, monkeypatch, tmp_path,
                                                               capsysbinary, given):
    written = []
    for module in (native, None):
        monkeypatch.setattr(graph_scan, "native_module", lambda name, m=module: m)
        folder = tmp_path / ("native" if module else "python")
        folder.mkdir()
        given.clear()
        written.append(_run(case, folder, capsysbinary))
        assert given == [module is not None], case  # one pipeline run, given columns where the scan is
    assert written[0] == written[1] and len(written[0]) > 1000
    if case == "html":
        pages = [re.sub(r"\d+\.\d+", "#", (tmp_path / f / "page.html").read_text()) for f in ("native", "python")]
        assert pages[0] == pages[1]  # but the seconds


def test_the_api_indexes_from_the_columns(native, monkeypatch, given):
    monkeypatch.setattr(graph_scan, "native_module", lambda name: native)
    first = fuse(str(EXAMPLE_MODEL), hints=False)
    second = fuse(load_model(EXAMPLE_MODEL), hints=False)
    model = load_model(EXAMPLE_MODEL)
    assert model.inputs == model.inputs and model.source  # reading what is not the graph keeps them
    third = fuse(model, hints=False)
    assert given == [True, True, True]
    assert first.graph_def == second.graph_def == third.graph_def


def test_a_copy_of_the_graph_keeps_the_columns(native, monkeypatch, given):
    """``graph_copy`` (what ``run --verify`` keeps of the original) reads the graph: the columns stay,
    and changing the copy changes nothing of the run."""
    monkeypatch.setattr(graph_scan, "native_module", lambda name: native)
    model = load_model(EXAMPLE_MODEL)
    copy = model.graph_copy()
    assert model.columns is not None and copy == model.__dict__["_graph_def"]
    copy.node[1].name = "renamed"  # the copy is the caller's
    del copy.node[2:]
    fused = fuse(model, hints=False)
    assert given == [True]
    assert fused.graph_def == fuse(load_model(EXAMPLE_MODEL), hints=False).graph_def


def _changed(graph) -> None:
    """Rename a node read by others (its readers follow) and drop one input: the node count stays,
    the names and inputs the columns hold no longer describe the graph."""
    readers = {n.name: n for n in graph.node}
    target = next(n for n in graph.node if n.op == "Const" and any(n.name in r.input for r in graph.node))
    old, new = target.name, target.name + "_renamed"
    target.name = new
    for node in readers.values():
        node.input[:] = [new if i == old else i for i in node.input]


def test_a_graph_changed_after_loading_is_never_indexed_from_stale_columns(native, monkeypatch, given):
    monkeypatch.setattr(graph_scan, "native_module", lambda name: native)
    expected_graph = load_model(EXAMPLE_MODEL).graph_def
    _changed(expected_graph)
    expected = fuse(expected_graph, hints=False)  # an in-memory GraphDef: read through protobuf

    model = load_model(EXAMPLE_MODEL)
    scanned = model.columns
    assert scanned is not None
    _changed(model.graph_def)  # handed out, then changed in place
    assert model.columns is None and take_columns(model) is None
    given.clear()
    result = fuse(model, hints=False)
    assert given == [False]
    assert result.graph_def == expected.graph_def
    assert any(n.name.endswith("_renamed") for n in result.graph_def.node)
    assert not any(n.endswith("_renamed") for n in scanned.names)  # what the stale columns said

    model = load_model(EXAMPLE_MODEL)
    model.graph_def = expected_graph  # a graph set in its place: the columns go too
    assert model.columns is None


def test_a_mixed_run_places_from_the_columns_and_writes_the_same(native, monkeypatch, tmp_path, given):
    """``run --mix-compile-mode``: the placement's index (the run's first) is made of the columns; the
    pipeline then indexes the graph through protobuf; the same output and segments either way."""
    from scopefusion.core.graph.index import GraphIndex
    from scopefusion.core.partition import partitioner

    placed: list[bool] = []

    class Recording(GraphIndex):
        def __init__(self, graph_def, *, columns=None, **kwargs):
            placed.append(columns is not None)
            super().__init__(graph_def, columns=columns, **kwargs)
    monkeypatch.setattr(partitioner, "GraphIndex", Recording)
    written = []
    for module in (native, None):
        monkeypatch.setattr(graph_scan, "native_module", lambda name, m=module: m)
        folder = tmp_path / ("native" if module else "python")
        folder.mkdir()
        placed.clear()
        given.clear()
        out = folder / "fused.pb"
        assert main(["run", str(EXAMPLE_MODEL), "-o", str(out), "-q", "--mix-compile-mode",
                     "--segments-dir", str(folder / "segments")]) == 0
        assert placed == [module is not None] and given == [False]
        written.append((out.read_bytes(), sorted((p.name, p.read_bytes()) for p in (folder / "segments").iterdir())))
    assert written[0] == written[1] and written[0][1]
