"""Attention whose k and v are one tensor: Keras' ``layers.Attention()([query, value])`` takes the
key to be the value.  The fused op takes that tensor at both its k and v inputs."""
from __future__ import annotations

import pytest

from tests.models import attention_models as atm
from tests.helpers.pass_checks import REGISTRY, pass_report
from tests.helpers.verify import assert_verifies
from tests.passes.attention.test_attention import OP, PASS, attr

import scopefusion
from scopefusion.testing import assert_fused


@pytest.mark.parametrize("library", ["keras", "tf_keras"])
def test_key_defaulting_to_the_value_is_both_inputs(library):
    m = atm.keras_dot_attention(library)
    readers = [n.name for n in m.graph_def.node if "v" in n.input]
    assert len(readers) == 2  # the scores' product reads v as k (or its Transpose does), the output's as v
    result = scopefusion.fuse(m.graph_def, registry=REGISTRY)
    assert pass_report(result, PASS).refused == []
    (node,) = assert_fused(result, OP, 1)
    assert list(node.input) == ["q", "v", "v"]  # q, k, v: k and v are the one tensor
    for name, want in m.attrs.items():
        assert attr(node, name) == pytest.approx(want), name
    assert assert_verifies(m, result, every_output=True) < 1e-5
