"""Checks of a candidate's fused op shared by the candidates of a stage alike: every answer (or
refusal) equals the one checked anew, and only candidates with the same type and the same plain
scalar attribute values (of the same Python types, floats by their bits) share one."""
from __future__ import annotations

import pytest
from tests.helpers.pass_checks import REGISTRY

import scopefusion
from scopefusion.builtin_passes.graph.matmul_bias_add import MATMUL_BIAS_ADD
from scopefusion.core.fusion.candidate import FusionCandidate, Refused
from scopefusion.core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg
from scopefusion.core.fusion.op_checks import OpChecks, attrs_key, check_op

SCALED = FusedOpDef(
    name="Scaled", inputs=(TensorArg("x", type_attr="T"),), outputs=(TensorArg("y", type_attr="T"),),
    attrs=(AttrDef("T", "type"), AttrDef("scale", "float"), AttrDef("count", "int", default=1)),
    reference=lambda x, *, T, scale, count: (x * scale,), description="x * scale")
OPS = {"Scaled": SCALED, "MatMulBiasAdd": MATMUL_BIAS_ADD}


def _candidate(attrs, op="Scaled", inputs=None):
    return FusionCandidate(name="n", members=frozenset({0}), pass_name="P", type=op, attrs=attrs,
                           inputs=inputs if inputs is not None else {0: (0, 0)})


def _same_answer(shared, fresh):
    assert shared.op_def is fresh.op_def and shared.n_inputs == fresh.n_inputs
    assert [{k: v.SerializeToString() for k, v in a.items()} for a in shared.attr_values] == \
        [{k: v.SerializeToString() for k, v in a.items()} for a in fresh.attr_values]


def test_every_shared_answer_on_a_real_model_is_the_answer_checked_anew(bert_encoder, monkeypatch):
    checked = []
    shared_check = OpChecks.check

    def compared(self, candidate):
        try:
            fresh = check_op(candidate, self.fused_ops)
        except Refused as why:
            with pytest.raises(Refused) as info:
                shared_check(self, candidate)
            assert str(info.value) == str(why)
            raise
        shared = shared_check(self, candidate)
        _same_answer(shared, fresh)
        checked.append(attrs_key(candidate.type, candidate.attrs))
        return shared

    monkeypatch.setattr(OpChecks, "check", compared)
    scopefusion.fuse(bert_encoder.graph_def, registry=REGISTRY, hints=False)
    assert len(checked) > len(set(checked)) > 1  # several kinds of op, and some shared


def test_alike_candidates_share_one_answer_and_others_do_not():
    checks = OpChecks(OPS)
    a = checks.check(_candidate({"T": 1, "scale": 0.5}))
    assert checks.check(_candidate({"T": 1, "scale": 0.5})) is a
    for other in ({"T": 1, "scale": -0.5}, {"T": 1, "scale": 0.5, "count": 2}, {"scale": 0.5, "T": 1}):
        assert checks.check(_candidate(other)) is not a
    zero = checks.check(_candidate({"T": 1, "scale": 0.0}))
    negative_zero = checks.check(_candidate({"T": 1, "scale": -0.0}))
    assert zero is not negative_zero and str(negative_zero.attr_values[0]["scale"].f) == "-0.0"
    as_bool = checks.check(_candidate({"T": 1, "transpose_a": True}, "MatMulBiasAdd",
                                      {0: (0, 0), 1: (0, 0), 2: (0, 0)}))
    as_int = checks.check(_candidate({"T": 1, "transpose_a": 1}, "MatMulBiasAdd", {0: (0, 0), 1: (0, 0), 2: (0, 0)}))
    assert as_bool is not as_int
    assert attrs_key("Scaled", {"T": 1, "scale": [0.5]}) is None  # a list is checked every time


def test_a_refusal_is_given_to_every_alike_candidate():
    checks = OpChecks(OPS)
    for _ in range(2):
        with pytest.raises(Refused, match="attribute 'count' = 2.5 cannot be written as int: not a whole number"):
            checks.check(_candidate({"T": 1, "scale": 1.0, "count": 2.5}))
        with pytest.raises(Refused, match="required attribute 'scale' of fused op Scaled is not set"):
            checks.check(_candidate({"T": 1}))


def test_a_tensorflow_op_takes_the_inputs_each_candidate_maps():
    checks = OpChecks(OPS)
    one = checks.check(_candidate({"T": 1}, "Relu", {0: (0, 0)}))
    two = checks.check(_candidate({"T": 1}, "AddV2", {0: (0, 0), 1: (0, 0)}))
    assert (one.op_def, one.n_inputs, two.n_inputs) == (None, 1, 2)
    # the answer shared with ``two`` is not taken for a candidate mapping another number of inputs:
    # TensorFlow's AddV2 takes two, so three are refused (TensorFlow would not import the node)
    with pytest.raises(Refused, match="it has 3 data input.s., its op AddV2 takes 2"):
        checks.check(_candidate({"T": 1}, "AddV2", {0: (0, 0), 1: (0, 0), 2: (0, 0)}))


def test_candidates_handing_on_equal_attribute_messages_share_one_answer_of_copies():
    """A pass may hand on a node's own attributes (``AttrValue`` messages): candidates whose messages
    serialize alike share one answer, which holds copies, not the first candidate's messages."""
    from scopefusion.core.graph.protos import message_class

    AttrValue = message_class("AttrValue")

    def attrs(scale: float):
        t, s = AttrValue(type=1), AttrValue(f=scale)
        return {"T": t, "scale": s}

    first, second, other = attrs(0.5), attrs(0.5), attrs(0.25)
    checks = OpChecks(OPS)
    answer = checks.check(_candidate(first))
    assert checks.check(_candidate(second)) is answer
    assert checks.check(_candidate(other)) is not answer
    _same_answer(answer, check_op(_candidate(first), OPS))
    held = answer.attr_values[0]
    assert all(held[k] is not first[k] and held[k] == first[k] for k in first)
    first["scale"].f = 2.0  # the first candidate's node rewritten later: the shared answer stays
    assert held["scale"].f == 0.5
    mixed = {"T": AttrValue(type=1), "scale": 0.5}  # a message and a plain scalar
    assert checks.check(_candidate(mixed)) is checks.check(_candidate({"T": AttrValue(type=1), "scale": 0.5}))
