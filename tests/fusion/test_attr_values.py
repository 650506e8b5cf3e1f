"""A candidate's attributes written as AttrValues: plain scalars written once per declared type and
exact value, and shared; everything else written each time; a value that cannot be written is
refused every time it comes."""
from __future__ import annotations

import math

import pytest

from scopefusion.builtin_passes.graph.matmul_bias_add import MATMUL_BIAS_ADD
from scopefusion.core.fusion.attr_values import written_attrs
from scopefusion.core.fusion.candidate import FusionCandidate, Refused
from scopefusion.core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg

SCALED = FusedOpDef(
    name="Scaled", inputs=(TensorArg("x", type_attr="T"),), outputs=(TensorArg("y", type_attr="T"),),
    attrs=(AttrDef("T", "type"), AttrDef("scale", "float"), AttrDef("axes", "list(int)"),
           AttrDef("count", "int", default=1)),
    reference=lambda x, *, T, scale, axes, count: (x * scale,), description="x * scale")
OPS = {"Scaled": SCALED, "MatMulBiasAdd": MATMUL_BIAS_ADD}


def _written(attrs, op="Scaled"):
    candidate = FusionCandidate(name="n", members=frozenset(), pass_name="P", type=op, attrs=attrs)
    return written_attrs(candidate, OPS[op], OPS)[0]


def test_alike_scalars_share_one_message_and_alike_lists_do_not():
    a = _written({"T": 1, "scale": 0.5, "axes": [-1]})
    b = _written({"T": 1, "scale": 0.5, "axes": [-1]})
    assert a["scale"] is b["scale"] and a["T"] is b["T"] and a["count"] is b["count"]
    assert a["axes"] is not b["axes"] and a["axes"] == b["axes"] and list(a["axes"].list.i) == [-1]
    assert a["scale"].f == 0.5 and a["T"].type == 1 and a["count"].i == 1


def test_values_equal_in_python_but_written_apart_are_kept_apart():
    zero, negative_zero = _written({"T": 1, "scale": 0.0, "axes": []}), _written({"T": 1, "scale": -0.0, "axes": []})
    assert math.copysign(1, zero["scale"].f) == 1 and math.copysign(1, negative_zero["scale"].f) == -1
    as_bool = _written({"T": 1, "scale": 1.0, "axes": [], "transpose_a": True, "transpose_b": 1}, "MatMulBiasAdd")
    assert as_bool["transpose_a"].b is True and as_bool["transpose_b"].b is True
    ints = _written({"T": 1, "scale": 2.0, "axes": [], "count": True})
    assert ints["count"].i == 1 and ints["count"].WhichOneof("value") == "i"
    floats = _written({"T": 1, "scale": 3, "axes": []})  # an int where a float is declared: written as float
    assert floats["scale"].f == 3.0 and floats["scale"].WhichOneof("value") == "f"


def test_a_value_that_cannot_be_written_is_refused_each_time():
    for _ in range(2):
        with pytest.raises(Refused, match="attribute 'count' = 2.5 cannot be written as int: not a whole number"):
            _written({"T": 1, "scale": 1.0, "axes": [], "count": 2.5})
