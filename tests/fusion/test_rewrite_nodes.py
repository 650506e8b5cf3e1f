"""The rewrite's new nodes carry exactly the attributes their plans wrote (each distinct
attribute set is serialized once and merged into every new node that has it)."""
from __future__ import annotations

from tests.helpers.pass_checks import REGISTRY

import scopefusion
import scopefusion.core.fusion.pipeline as pipeline_module
from scopefusion.core.fusion.plan import new_node_names
from scopefusion.core.fusion.rewrite import _new_node, apply_plans
from scopefusion.core.graph.protos import message_class


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
        for name, attrs in zip(names, attr_values, strict=True):
            wanted = {key: value.SerializeToString(deterministic=True) for key, value in attrs.items()}
            assert built[name] == wanted, name
            shared += bool(wanted)
    assert shared > 3  # fused nodes with attributes were checked, not only bare ones


def test_a_new_node_written_from_serialized_fields_equals_one_set_field_by_field():
    # lengths past one varint byte, non-ASCII text, control inputs, with and without device or attributes
    node_def = message_class("NodeDef")
    holder = node_def()
    holder.attr["T"].type = 1
    holder.attr["activation"].s = b"gelu"
    block = holder.SerializeToString()
    cases = [("dense/" * 40 + "fused", "MatMulBiasAddActivation", "/device:CPU:0", ["x:1", "^gate", "é" * 90], block),
             ("n", "Identity", "", [], b""), ("名前", "Op", "", ["a" * 300], block)]
    for name, op, device, inputs, attrs in cases:
        expected = node_def(name=name, op=op, device=device, input=inputs)
        expected.MergeFromString(attrs)
        made = _new_node(node_def(), name, op, device, inputs, attrs)
        assert made == expected and made.SerializeToString(deterministic=True) == expected.SerializeToString(
            deterministic=True)
