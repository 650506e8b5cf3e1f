"""Fused ops whose input repeats (``TensorArg(number_attr=...)``, as ``ConcatV2D``'s values): their
declaration, how many inputs a node has, their signature (no TensorFlow needed)."""
from __future__ import annotations

import pytest

from scopefusion.builtin_passes import BUILTIN_FUSED_OPS_BY_NAME
from scopefusion.core.fusion.fused_ops import AttrDef, FusedOpDef, TensorArg


def joined(*attrs: AttrDef, optional: bool = False) -> FusedOpDef:
    return FusedOpDef("Joined", (TensorArg("x", type_attr="T", number_attr="N", optional=optional),),
                      (TensorArg("y", type_attr="T"),), (*attrs, AttrDef("T", "type")))


def test_count_and_signature() -> None:
    op = BUILTIN_FUSED_OPS_BY_NAME["ConcatV2D"]
    attrs = {"N": 5, "concat_dim": 1, "T": 1}
    assert op.input_count(attrs) == 5
    assert [a.name for a in op.present_inputs(attrs)] == ["x"] * 5
    assert op.signature() == "ConcatV2D(x*N) -> (y)"
    with pytest.raises(TypeError, match="attribute 'N' of fused op ConcatV2D must be a positive int, not 0"):
        op.input_count({**attrs, "N": 0})


def test_declaration_mistakes() -> None:
    with pytest.raises(ValueError, match="repeats by attribute 'N', which is not an int attribute"):
        joined()
    with pytest.raises(ValueError, match="repeats by attribute 'N', which is not an int attribute"):
        joined(AttrDef("N", "float"))
    with pytest.raises(ValueError, match="cannot both repeat and be optional"):
        joined(AttrDef("N", "int"), optional=True)
    assert joined(AttrDef("N", "int", default=2)).input_count({}) == 2
