"""After each stage's rewrite, the nodes it touched are checked: an input naming a node the rewrite
removed (whole, with a port, or as a control edge) is an internal error, and the run stops."""
from __future__ import annotations

import pytest
from tests.helpers.pass_checks import REGISTRY

import scopefusion
import scopefusion.core.fusion.pipeline as pipeline_module
from scopefusion.core.errors import ScopeFusionError
from scopefusion.core.fusion.rewrite import apply_plans


@pytest.mark.parametrize("spell", [lambda name: name, lambda name: f"{name}:0", lambda name: f"^{name}"],
                         ids=["whole name", "with a port", "control edge"])
def test_a_touched_node_reading_a_removed_node_is_caught(bert_encoder, monkeypatch, spell):
    broken: list[str] = []

    def careless(index, plans):
        summary = apply_plans(index, plans)
        if summary.removed_names and not broken:
            reader = summary.touched[0]
            gone = sorted(summary.removed_names)[0]
            reader.input.append(spell(gone))
            broken.append(gone)
        return summary

    monkeypatch.setattr(pipeline_module, "apply_plans", careless)
    with pytest.raises(ScopeFusionError, match="internal error: the fused graph is invalid") as caught:
        scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY, hints=False)
    assert "inputs that name no node in the graph: " in str(caught.value)
    assert f" reads {spell(broken[0])!r}" in str(caught.value)


def test_the_same_run_untouched_passes(bert_encoder, monkeypatch):
    calls: list[int] = []

    def counting(index, plans):
        summary = apply_plans(index, plans)
        calls.append(len(summary.touched))
        return summary

    monkeypatch.setattr(pipeline_module, "apply_plans", counting)
    result = scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY, hints=False)
    assert result.report.fused and any(calls)


def test_the_removed_names_are_those_of_the_dropped_nodes(bert_encoder, monkeypatch):
    # read off the index's name table, they answer as a set of the names built from scratch
    seen: list[int] = []

    def comparing(index, plans):
        before = set(index.names)
        summary = apply_plans(index, plans)
        names = {index.names[d] for d in summary.dropped}
        removed = summary.removed_names
        assert len(removed) == len(names) and set(removed) == names and removed == names
        assert all(name in removed for name in names)
        assert not any(name in removed for name in before - names) and "no such node" not in removed
        seen.append(len(names))
        return summary

    monkeypatch.setattr(pipeline_module, "apply_plans", comparing)
    scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY, hints=False)
    assert len(seen) == 3 and all(seen)


def test_a_rewrite_losing_a_node_it_did_not_tell_is_caught(bert_encoder, monkeypatch):
    """A node taken out of the graph behind the rewrite's back stops the run with the count told
    and the count found, before the next index reads the node list by position."""
    def losing(index, plans):
        summary = apply_plans(index, plans)
        del index.graph_def.node[-1]
        return summary

    monkeypatch.setattr(pipeline_module, "apply_plans", losing)
    with pytest.raises(ScopeFusionError, match="internal error: the fused graph is invalid") as caught:
        scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY, hints=False)
    assert "nodes, not the " in str(caught.value)
