"""Pass names of the reference system whose meaning exists only on its device.

A switch file written for the reference names passes such as ``ConvConcatFusionPass`` or
``PoolingFusionPass``.  They rewrite ops TensorFlow graphs never hold (Caffe's ``Pooling``, the
device's quantize and dequantize ops) or into ops only the device's memory layout gives a meaning
(strided writes into a 5-D channel-blocked tensor).  Nothing here implements them, and a switch file
naming them is still a good file: the warning for each says what the pass does there and why it has
no counterpart here, instead of "not registered".
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

_QUANT = ("inserted around the device's quantized operators (AscendQuant, AscendDequant, AscendRequant), which "
          "its quantization tools put in the graph; a TensorFlow graph holds none of them")


@dataclass(frozen=True)
class DevicePass:
    """A reference pass with no counterpart here: its section, what it does and why it has none."""

    section: str
    what: str
    why: str

    def describe(self) -> str:
        return f"{self.what}; not implemented here: {self.why}; the switch file accepts the name, it has no effect"


def _quant(op: str) -> DevicePass:
    return DevicePass("GraphFusion", f"the reference's quantization pass for {op}", _QUANT)


#: Every such name, with its switch-file section.
DEVICE_PASSES: Mapping[str, DevicePass] = MappingProxyType({
    "ConvConcatFusionPass": DevicePass(
        "GraphFusion", "the reference's device pass that lets each convolution feeding a channel concat write its "
        "output straight into the concat's buffer (a StridedWrite per input, strided by the concat's C1 dim)",
        "strided writes into the device's 5-D channel-blocked layout have no TensorFlow op nor meaning outside "
        "that layout"),
    "PoolingFusionPass": DevicePass(
        "GraphFusion", "the reference's rewrite of a Caffe average Pooling op into a depthwise convolution with "
        "an averaging filter",
        "it matches Caffe's Pooling op, which TensorFlow graphs never hold (their AvgPool is already an op of "
        "its own)"),
    "TfMergeSubFusionPass": DevicePass(
        "GraphFusion", "a pass the reference cannot switch off, run at its own stage for graphs parsed from "
        "TensorFlow",
        "its source is not public, so what it matches and what it makes are unknown"),
    "FusionVirtualOpSetSwitch": DevicePass(
        "UBFusion", "not a pass: the reference's switch for the virtual ops its split optimizer sets before the "
        "device build", "it steers the device's buffer planning, which a TensorFlow graph does not have"),
    **{name: _quant(op) for name, op in (
        ("AvgPoolQuantProcessFusionPass", "AvgPool"), ("Conv2DQuantProcessFusionPass", "Conv2D"),
        ("GroupConv2DQuantProcessFusionPass", "grouped Conv2D"),
        ("Conv2DTDQuantProcessFusionPass", "Conv2DTranspose"), ("DeConvQuantProcessFusionPass", "Deconvolution"),
        ("DWConv2DQuantProcessFusionPass", "DepthwiseConv2D"), ("FCQuantProcessFusionPass", "FullyConnection"),
        ("MatmulV2QuantProcessFusionPass", "MatMulV2"), ("PoolingQuantProcessFusionPass", "Pooling"),
        ("BatchMatmulV2QuantProcessFusionPass", "BatchMatMulV2"), ("V100NotRequantFusionPass", "V100 requant"),
        ("V200NotRequantFusionPass", "V200 requant"))},
})
