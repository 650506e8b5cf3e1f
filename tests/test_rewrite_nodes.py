"""The rewrite's new nodes carry exactly the attributes their plans wrote (each distinct
attribute set is serialized once and merged into every new node that has it)."""
from __future__ import annotations

from pass_checks import REGISTRY

import scopefusion
import scopefusion.core.fusion.pipeline as pipeline_module
from scopefusion.core.fusion.plan import new_node_names
from scopefusion.core.fusion.rewrite import apply_plans


def test_new_nodes_hold_their_plans_attributes(bert_encoder, monkeypatch):
    seen: list[tuple[list[str], list[dict], dict[str, dict]]] = []

    def recording(index, plans):
        summary = apply_plans(index, plans)
        built = {node.name: {key: value.SerializeToString(deterministic=True) for key, value in node.attr.items()}
                 for node in summary.touched}  # the stage's new nodes (a later stage may reuse a name)
        seen.extend((new_node_names(plan.candidate), plan.attr_values, built) for plan in plans)
        return summary

    monkeypatch.setattr(pipeline_module, "apply_plans", recording)
    scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY, hints=False)
    assert len(seen) > 3
    shared = 0
    for names, attr_values, built in seen:
        assert len(names) == len(attr_values)
        for name, attrs in zip(names, attr_values):
            wanted = {key: value.SerializeToString(deterministic=True) for key, value in attrs.items()}
            assert built[name] == wanted, name
            shared += bool(wanted)
    assert shared > 3  # fused nodes with attributes were checked, not only bare ones
