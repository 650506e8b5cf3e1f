"""ConvBatchnormFusionPass: a convolution followed by an inference batch norm -> the
convolution with folded weights, then a ``BiasAdd``; stock TensorFlow ops only.

A batch norm in inference multiplies each channel by ``gamma / sqrt(variance +
epsilon)`` and adds a per-channel shift, so it can be computed by the convolution
before it: the filter is scaled per output channel and the shift becomes a bias
(the arithmetic is in :mod:`.folding`).  The match becomes an inner graph of four new
nodes: a ``Const`` with the folded filter, the ``Conv2D`` or
``DepthwiseConv2dNative`` with the original attributes (it keeps the original
name when the convolution and the batch norm share a scope), a ``Const`` with the
folded bias and a ``BiasAdd`` in the convolution's data format, which takes the
batch norm's output name, so its readers and graph outputs are unchanged.

The forms matched (see :mod:`.patterns`): ``Conv2D`` / ``DepthwiseConv2dNative``,
optionally ``BiasAdd``, then ``FusedBatchNorm``/``V2``/``V3`` or
``tf.nn.batch_normalization`` written out as ops.  Refused, with the reason: a
batch norm in training mode (``is_training=True``, or a ``FusedBatchNorm`` whose
batch-statistics outputs are read), an intermediate output read elsewhere (the
convolution's, whose value fusing would lose), a filter or statistic that is not a
constant, data formats that do not agree (a ``BiasAdd`` or batch norm along another
axis than the convolution's channels), a non-float convolution and a variance
with ``variance + epsilon <= 0``.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....core.fusion.refusal import fail
from ....core.graph.matching import PatternMatch
from ....core.graph.pattern import OpPattern
from ....core.graph.vocabulary import FLOAT_DTYPES, dtype_name, numpy_dtype
from ....core.graph_fusion.base_pass import FusedOp, FusionAnswer, PatternFusionBasePass, fused_input, inner_node
from .folding import (CHANNEL_AXIS, OUTPUT_RANK, FoldedConvolution, broadcast_vector, const_attrs, exact_vector,
                      fold, nonpositive_channel, output_channels)
from .patterns import FUSED, PARAMETERS, decomposed_pattern, fused_pattern

#: How messages name the parameters.
_WHAT = {
    "filter": "the convolution's filter", "bias": "the convolution's bias", "gamma": "the batch norm's gamma",
    "beta": "the batch norm's beta", "mean": "the batch norm's mean", "variance": "the batch norm's variance",
}
#: A parameter a form may leave out, and the value it then has.
_ABSENT = {"gamma": 1.0, "beta": 0.0, "bias": 0.0}


class ConvBatchnormFusionPass(PatternFusionBasePass):
    """Conv2D / DepthwiseConv2dNative (+ BiasAdd) + an inference batch norm -> the
    convolution with folded weights + BiasAdd.

    ``training_safe = False``: folding freezes the moving statistics, gamma and beta
    into the weights, which is wrong for a graph that is still trained (they would no
    longer be learnt, and a batch norm in training normalizes with the batch's own
    statistics).  It tells the engine to skip this pass in a training run (session
    option ``graph_run_mode=1``) and to report that it did.
    """

    name = "ConvBatchnormFusionPass"
    fusion_type = "GraphFusion"
    description = ("Conv2D/DepthwiseConv2dNative (+ BiasAdd) + inference batch norm (FusedBatchNorm or its ops) "
                   "-> the convolution with folded weights + BiasAdd")
    training_safe: ClassVar[bool] = False

    def define_patterns(self) -> list[OpPattern]:
        return [fused_pattern(), decomposed_pattern()]

    def fusion(self, match: PatternMatch) -> FusionAnswer:
        problem = _training_problem(match) or _constant_problem(match) or _shared_output_problem(match)
        if problem:
            fail(problem)
        conv = match.node("conv")
        if conv.attr["T"].type not in FLOAT_DTYPES or numpy_dtype(conv.attr["T"].type) is None:
            fail(f"the convolution computes in {dtype_name(conv.attr['T'].type)}; only "
                 "floating-point convolutions are folded")
        data_format = _data_format(conv)
        problem = _format_problem(match, data_format) or _view_problem(match, data_format)
        if problem:
            fail(problem)
        filter_value = match.consts["filter"]
        if filter_value.ndim != OUTPUT_RANK:
            fail(f"the convolution's filter has shape {list(filter_value.shape)}, not rank 4")
        channels = output_channels(filter_value.shape, conv.op == "DepthwiseConv2dNative")
        vectors = _vectors(match, CHANNEL_AXIS[data_format], channels)
        if isinstance(vectors, str):
            fail(vectors)
        epsilon = _epsilon(match)
        bad = nonpositive_channel(vectors["variance"], epsilon)
        if bad is not None:
            fail(f"variance + epsilon is not positive in channel {bad} "
                 f"({float(vectors['variance'][bad])} + {epsilon})")
        folded = fold(filter_value, depthwise=conv.op == "DepthwiseConv2dNative", epsilon=epsilon, **vectors)
        return _folded_result(match, folded, data_format)


def _data_format(node: Any) -> str:
    """A node's ``data_format`` (TensorFlow's default, NHWC, when it has none)."""
    return node.attr["data_format"].s.decode() if "data_format" in node.attr else "NHWC"


def _training_problem(match: PatternMatch) -> str | None:
    """Why the batch norm is one of training (None when it is an inference batch norm)."""
    if match.pattern.name != FUSED:
        return None  # in training, tf.nn.batch_normalization reads moments: caught as non-constant statistics
    bn = match.node("bn")
    if "is_training" in bn.attr and bn.attr["is_training"].b:
        return (f"{match.root_name!r} is a batch norm in training mode (is_training=True): it normalizes with the "
                "statistics of each batch, which cannot be folded into the filter")
    index = match.view.index
    for reader, port, _ in index.consumers[match.nodes["bn"]]:
        if port >= 1 and reader not in match.members:
            return (f"the statistics output {port} of {match.root_name!r} is read by {index.names[reader]!r} "
                    "(as training reads the batch statistics); folding keeps only the normalized output")
    return None


def _shared_output_problem(match: PatternMatch) -> str | None:
    """Why an intermediate result is needed outside the match (None when it is not)."""
    for label in sorted(match.nodes, key=lambda k: (k != "conv", k != "bias_add", k)):
        if label == "bn" or label in match.consts:
            continue  # the output itself; constants read elsewhere simply stay
        readers = PatternFusionBasePass.outside_readers(match, label)
        if not readers:
            continue
        what = {"conv": "the convolution's output", "bias_add": "the convolution's biased output"}.get(
            label, "the batch norm's intermediate")
        return f"{what} {match.name(label)!r} is also read by {readers[0]!r}; fusing would lose it"
    return None


def _constant_problem(match: PatternMatch) -> str | None:
    """Why the filter or a statistic cannot be read as a constant (None when all can)."""
    for name in PARAMETERS:
        if f"{name}_tensor" in match.tensors:
            return (f"{_WHAT[name]} {match.tensor_name(name + '_tensor')!r} is not a constant (it is computed when "
                    "the graph runs, as a batch norm in training or another normalization computes its statistics), "
                    "so it cannot be folded into the filter")
    return None


def _format_problem(match: PatternMatch, data_format: str) -> str | None:
    """Why the convolution, its BiasAdd and the batch norm do not agree on the channel axis."""
    if data_format not in CHANNEL_AXIS:
        return f"the convolution's data format {data_format} is not supported (NHWC or NCHW)"
    for label, what in (("bias_add", "the BiasAdd"), ("bn", "the batch norm")):
        if label in match.nodes and "data_format" in match.node(label).attr:
            other = _data_format(match.node(label))
            if other != data_format:
                return (f"{what} {match.name(label)!r} works on {other} data but the convolution writes "
                        f"{data_format}: unsupported data format combination")
    return None


def _view_problem(match: PatternMatch, data_format: str) -> str | None:
    """Why the 1-D convolution's ``Squeeze`` / ``BatchToSpaceND`` may move the channels (None
    when the channels stay on the last axis, where the bias and the batch norm find them)."""
    if "conv_squeeze" not in match.nodes:
        return None
    squeeze = match.node("conv_squeeze")
    dims = list(squeeze.attr["squeeze_dims"].list.i) if "squeeze_dims" in squeeze.attr else []
    if data_format != "NHWC" or not dims or not set(dims) <= {1, 2, -2, -3}:
        return (f"the convolution's output is squeezed by {match.name('conv_squeeze')!r} along "
                f"{dims or 'every unit axis'} of {data_format} data: only spatial axes of NHWC data are squeezed "
                "so that the channels stay last")
    if "conv_batch_to_space" in match.nodes:
        block_shape = np.asarray(match.consts["block_shape"])
        if block_shape.shape != (1,):
            return (f"{match.name('conv_batch_to_space')!r} has block shape {block_shape.tolist()}: only the one "
                    "spatial axis of a 1-D convolution's output, before its channels, is taken from the batch")
    return None


def _parameter_value(match: PatternMatch, name: str) -> np.ndarray:
    """A constant parameter's value, reshaped and squeezed as the graph does."""
    value = np.asarray(match.consts[name])
    if f"{name}_reshape" in match.nodes:
        value = value.reshape([int(d) for d in np.asarray(match.consts[f"{name}_shape"]).reshape(-1)])
    if f"{name}_squeeze" in match.nodes:
        squeeze = match.node(f"{name}_squeeze")
        dims = tuple(squeeze.attr["squeeze_dims"].list.i) if "squeeze_dims" in squeeze.attr else ()
        value = np.squeeze(value, axis=dims or None)
    return value


def _vectors(match: PatternMatch, channel_axis: int, channels: int) -> dict[str, np.ndarray] | str:
    """Bias, gamma, beta, mean and variance as one value per output channel, or why not."""
    fused = match.pattern.name == FUSED
    out: dict[str, np.ndarray] = {}
    for name in PARAMETERS[1:]:
        if name not in match.consts:
            out[name] = np.full(channels, _ABSENT[name])
            continue
        try:
            value = _parameter_value(match, name)
        except ValueError as why:
            return f"{_WHAT[name]} cannot be read: {why}"
        exact = fused or name == "bias"  # BiasAdd and FusedBatchNorm take 1-D parameters along their channel axis
        vector = exact_vector(value, channels) if exact else broadcast_vector(value, channel_axis, channels)
        if vector is None:
            wanted = f"[{channels}]" if exact else f"one value per channel on axis {channel_axis}"
            return (f"{_WHAT[name]} has shape {list(value.shape)}, but the convolution has {channels} output "
                    f"channels (expected {wanted}): unsupported data format combination")
        out[name] = vector
    return out


def _epsilon(match: PatternMatch) -> float:
    if match.pattern.name == FUSED:
        bn = match.node("bn")
        return float(bn.attr["epsilon"].f) if "epsilon" in bn.attr else 1e-4  # the op's default
    return float(np.asarray(match.consts["epsilon"]).reshape(-1)[0])


def _names(conv_name: str, output_name: str) -> tuple[str | None, str, str]:
    """The scope the new nodes go in, and the convolution's and the output's names in it:
    the deepest scope both names lie in, so that both keep their names; without one,
    the output's name, under which the nodes get generic names."""
    conv_parts, output_parts = conv_name.split("/"), output_name.split("/")
    depth = 0
    for a, b in zip(conv_parts[:-1], output_parts[:-1], strict=False):
        if a != b:
            break
        depth += 1
    if depth == 0:
        return None, "convolution", "bias_add"
    return "/".join(conv_parts[:depth]), "/".join(conv_parts[depth:]), "/".join(output_parts[depth:])


def _copied_attrs(node: Any) -> dict[str, Any]:
    return {key: value for key, value in node.attr.items() if not key.startswith("_")}


def _folded_result(match: PatternMatch, folded: FoldedConvolution, data_format: str) -> FusedOp:
    """The inner graph: folded filter, the convolution, folded bias, BiasAdd."""
    conv = match.node("conv")
    dtype = conv.attr["T"].type
    numpy_type = numpy_dtype(dtype)
    scope, conv_name, output_name = _names(match.name("conv"), match.root_name)
    attrs = _copied_attrs(conv)
    nodes = [
        inner_node(f"{conv_name}/folded_filter", "Const", [], const_attrs(folded.filter, dtype, numpy_type)),
        inner_node(conv_name, conv.op, [fused_input(0), f"{conv_name}/folded_filter"], attrs),
    ]
    last = conv_name
    if "conv_squeeze" in match.nodes:  # a 1-D convolution's output, squeezed back (and dilated)
        nodes.append(inner_node(f"{conv_name}/squeeze", "Squeeze", [last], _copied_attrs(match.node("conv_squeeze"))))
        last = f"{conv_name}/squeeze"
    if "conv_batch_to_space" in match.nodes:
        b2s = f"{conv_name}/batch_to_space"
        for label in ("block_shape", "crops"):
            nodes.append(inner_node(f"{b2s}/{label}", "Const", [], _copied_attrs(match.node(label))))
        nodes.append(inner_node(b2s, "BatchToSpaceND", [last, f"{b2s}/block_shape", f"{b2s}/crops"],
                                _copied_attrs(match.node("conv_batch_to_space"))))
        last = b2s
    nodes += [
        inner_node(f"{output_name}/folded_bias", "Const", [], const_attrs(folded.bias, dtype, numpy_type)),
        inner_node(output_name, "BiasAdd", [last, f"{output_name}/folded_bias"],
                   {"T": dtype, "data_format": data_format}),
    ]
    norm = match.node("bn").op if match.pattern.name == FUSED else "batch normalization"
    bias = " + BiasAdd" if "bias_add" in match.nodes else ""
    return FusedOp(conv.op, inputs=["x"], name=scope, inner_nodes=nodes, inner_outputs={0: output_name},
                   description=f"{conv.op}{bias} + {norm} folded into {conv.op} + BiasAdd")
