"""A replacement for the built-in ``ScopeLayerNormPass``: same matching, but
it emits ``LayerNormV2(x, gamma, beta) -> y`` with other attributes, as a back
end that only wants the normalised output might."""
from __future__ import annotations

from scopefusion import BUILTIN_FUSED_OPS, BUILTIN_PASSES, AttrDef, FusedOpDef, TensorArg

BuiltinLayerNormPass = BUILTIN_PASSES["ScopeLayerNormPass"]
layer_norm_reference = BUILTIN_FUSED_OPS["LayerNorm"].reference


def layer_norm_v2_reference(x, gamma, beta, *, begin_axis, epsilon, T):
    y, _, _ = layer_norm_reference(x, gamma, beta, begin_norm_axis=begin_axis, begin_params_axis=-1,
                                   epsilon=epsilon, T=T)
    return (y,)


LAYER_NORM_V2 = FusedOpDef(
    "LayerNormV2",
    inputs=(TensorArg("x", type_attr="T"), TensorArg("gamma", type_attr="T"), TensorArg("beta", type_attr="T")),
    outputs=(TensorArg("y", type_attr="T"),),
    attrs=(AttrDef("begin_axis", "int"), AttrDef("epsilon", "float"), AttrDef("T", "type")),
    reference=layer_norm_v2_reference,
    description="Layer normalization over axes [begin_axis, rank), normalised output only",
)


class ScopeLayerNormPass(BuiltinLayerNormPass):
    """Layer normalization scopes -> LayerNormV2 (replaces the built-in pass)."""

    name = "ScopeLayerNormPass"
    description = "layer_norm scopes -> LayerNormV2(x, gamma, beta) -> y (scopefusion-example-plugin)"

    def generate_fusion_result(self, scopes, result):
        super().generate_fusion_result(scopes, result)  # a match it refuses raises: nothing below runs
        attrs = result.attrs
        result.attrs = {"begin_axis": attrs["begin_norm_axis"], "epsilon": attrs["epsilon"], "T": attrs["T"]}
        result.set_type("LayerNormV2")
        # only y is an output: mean and variance must not be read outside
        result.output_map = {k: v for k, v in result.output_map.items() if v == [0]}
