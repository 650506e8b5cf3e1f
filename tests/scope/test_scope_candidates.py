"""A scope pass's result turned into a candidate (``core/scope/candidates.py``): port-map keys
resolved to nodes and input slots to tensors.

What must hold: a key is found as a suffix of one of the result's scopes when that names a
node of the result, else by its full name, else by a unique name ending in it; each input slot
is the tensor its node reads there, and a slot the node lacks, or a control input, is refused.
"""
from __future__ import annotations

import functools

import pytest

from tests.models import norm_models as nm

from scopefusion.core.fusion.candidate import Refused
from scopefusion.core.graph.vocabulary import CONTROL
from scopefusion.core.scope.candidates import resolve_key, result_members, to_candidate
from scopefusion.core.scope.instances import ScopePart
from scopefusion.core.scope.results import FusionScopesResult
from scopefusion.core.scope.scope_graph import ScopeGraph


@functools.cache
def two_layer_norms() -> ScopeGraph:
    """Two tf_keras layer norms, ``ln0`` and ``ln0_1`` (the second scope's name starts like the
    first's), the first's input read by control from inside the second."""
    import tensorflow as tf
    import tf_keras

    first = tf_keras.layers.LayerNormalization(epsilon=1e-6, name="ln0")
    second = tf_keras.layers.LayerNormalization(epsilon=1e-6, name="ln0_1")

    def fn(x):
        return second(tf.tanh(first(x)))

    m = nm.traced("two_layer_norms", fn, {"x": nm.spec([2, nm.HIDDEN])}, layer_norms=2)
    graph_def = type(m.graph_def)()
    graph_def.CopyFrom(m.graph_def)
    node = next(n for n in graph_def.node if n.name == "ln0_1/batchnorm/add_1")
    node.input.append("^ln0/batchnorm/add_1")
    return ScopeGraph(graph_def)


def _result(sg: ScopeGraph, scope_name: str) -> FusionScopesResult:
    scope = next(s for s in sg.root.all_sub_scopes() if s.name == scope_name)
    result = FusionScopesResult(scope_name, [scope])
    result.set_type("LayerNorm")
    return result


def _expected_inputs(sg: ScopeGraph, result: FusionScopesResult) -> dict:
    """The fused inputs looked up key by key with :func:`resolve_key`."""
    index = sg.index
    members = result_members(index, result)
    fed = {}
    for key, slots in result.input_map.items():
        node = resolve_key(index, result, members, key)
        for slot, fused in enumerate(slots):
            if fused is not None:
                fed.setdefault(fused, index.data_input(node, slot))
    return fed


def test_every_key_form_resolves_to_the_node_resolve_key_finds():
    sg = two_layer_norms()
    index = sg.index
    result = _result(sg, "ln0_1")
    result.insert_inputs("moments/mean", [0, None])  # a suffix of the scope
    result.insert_inputs("ln0_1/batchnorm/mul_1", [0, 1])  # a full name
    result.insert_inputs("mul_2", [None, 2])  # a unique name ending in /mul_2
    result.insert_outputs("batchnorm/add_1", [0])
    candidate = to_candidate(index, result, pass_name="p", order=0)
    assert candidate.inputs == _expected_inputs(sg, result)
    assert set(candidate.inputs) == {0, 1, 2}
    assert candidate.outputs == {(index.index["ln0_1/batchnorm/add_1"], 0): 0}


def test_a_suffix_naming_a_node_outside_the_result_is_not_taken():
    """A result over the scopes ``ln0`` and ``ln0_1`` holding only ``ln0_1``'s nodes (one call's
    part): ``ln0/batchnorm/add_1`` is no node of it, so ``batchnorm/add_1`` is taken in the
    second scope."""
    sg = two_layer_norms()
    scopes = {s.name: s for s in sg.root.all_sub_scopes()}
    second = scopes["ln0_1"]
    result = FusionScopesResult("ln0_1", [scopes["ln0"], second], part=ScopePart(second, second.all_node_indices()))
    result.set_type("LayerNorm")
    result.insert_outputs("batchnorm/add_1", [0])
    result.insert_inputs("batchnorm/mul_1", [0, None])
    candidate = to_candidate(sg.index, result, pass_name="p", order=0)
    assert candidate.outputs == {(sg.index.index["ln0_1/batchnorm/add_1"], 0): 0}
    assert candidate.inputs == _expected_inputs(sg, result) == {0: (sg.index.index["Tanh"], 0)}


@pytest.mark.parametrize("slot, needle", [(5, "has no input slot 5"), (2, "has no input slot 2")])
def test_a_slot_the_node_lacks_or_a_control_input_is_refused(slot, needle):
    sg = two_layer_norms()
    index = sg.index
    add_1 = index.index["ln0_1/batchnorm/add_1"]
    assert index.inputs[add_1][2][1] == CONTROL
    result = _result(sg, "ln0_1")
    slots = [None] * (slot + 1)
    slots[slot] = 0
    result.insert_inputs("batchnorm/add_1", slots)
    with pytest.raises(Refused, match=needle):
        to_candidate(index, result, pass_name="p", order=0)


@pytest.mark.parametrize("key, needle", [("no/such/node", "'no/such/node', which is no node of the result"),
                                         ("ReadVariableOp", "port map key 'ReadVariableOp' is ambiguous")])
def test_a_key_naming_no_node_or_two_is_refused(key, needle):
    sg = two_layer_norms()
    result = _result(sg, "ln0_1")
    result.insert_inputs(key, [0])
    with pytest.raises(Refused, match=needle):
        to_candidate(sg.index, result, pass_name="p", order=0)
