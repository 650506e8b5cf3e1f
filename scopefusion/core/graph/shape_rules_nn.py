"""Shape rules of :mod:`.shape_rules` for convolutions, normalizations, gathers, fills, pads,
loops and lists: the ops of vision models, embeddings and recurrent loops."""
from __future__ import annotations

from typing import Callable

from .shape_context import (
    Dims, OpContext, length_of, merged, normalized_axis, scalar, shape_from_value, unknown_dims,
)


def _conv_geometry(ctx: OpContext, spatial: int) -> list[Dims]:
    """Conv2D/3D, depthwise convolutions and pools: ``[batch, *spatial, channels]`` in the
    node's data format."""
    rank = spatial + 2
    source = ctx.shape(0)
    source = source if source is not None and len(source) == rank else [None] * rank
    channels_first = str(ctx.attr("data_format", "NHWC")).startswith("NC")
    c_axis = 1 if channels_first else rank - 1
    sizes = [source[k] for k in range(rank) if k not in (0, c_axis)]
    strides = list(ctx.attr("strides", []) or [1] * rank)
    dilations = list(ctx.attr("dilations", []) or [1] * rank)
    if ctx.op in ("MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D"):
        kernel = [int(k) for k in ctx.attr("ksize", [1] * rank)]
        windows: list[int | None] = [kernel[k] for k in range(rank) if k not in (0, c_axis)]
        channels = source[c_axis]
    else:
        filt = ctx.shape(1)
        filt = filt if filt is not None and len(filt) == rank else [None] * rank
        windows = filt[:spatial]
        if ctx.op == "DepthwiseConv2dNative":
            channels = filt[2] * filt[3] if filt[2] is not None and filt[3] is not None else None
        else:
            channels = filt[-1]
    padding = str(ctx.attr("padding", "VALID"))
    explicit = list(ctx.attr("explicit_paddings", []) or [])
    step = [strides[k] for k in range(rank) if k not in (0, c_axis)]
    dilate = [dilations[k] for k in range(rank) if k not in (0, c_axis)]
    out_spatial: list[int | None] = []
    for s, (size, window, stride, rate) in enumerate(zip(sizes, windows, step, dilate, strict=False)):
        if size is None or window is None:
            out_spatial.append(None)
            continue
        effective = (window - 1) * rate + 1
        if padding == "SAME":
            out_spatial.append(-(-size // stride))
        elif padding == "EXPLICIT" and len(explicit) == 2 * rank:
            axis = [k for k in range(rank) if k not in (0, c_axis)][s]
            padded = size + explicit[2 * axis] + explicit[2 * axis + 1]
            out_spatial.append((padded - effective + stride) // stride)
        else:
            out_spatial.append((size - effective + stride) // stride)
    if channels_first:
        return [[source[0], channels, *out_spatial]]
    return [[source[0], *out_spatial, channels]]


def _fused_batch_norm(ctx: OpContext) -> list[Dims]:
    source = ctx.shape(0)
    scale = ctx.shape(1)
    channels: int | None = None
    if source is not None and len(source) >= 2:
        axis = 1 if str(ctx.attr("data_format", "NHWC")).startswith("NC") else len(source) - 1
        channels = source[axis]
        if channels is None and scale is not None and len(scale) == 1:
            channels = scale[0]
            source = source[:axis] + [channels] + source[axis + 1:]
    elif scale is not None and len(scale) == 1:
        channels = scale[0]
    vector = [channels]
    outputs: list[Dims] = [source, vector, vector, vector, vector]
    if ctx.op == "FusedBatchNormV3":
        outputs.append(None)
    return outputs


def _bias_add(ctx: OpContext) -> list[Dims]:
    source, bias = ctx.shape(0), ctx.shape(1)
    if source is None or bias is None or len(bias) != 1 or len(source) < 2:
        return [source]
    axis = 1 if str(ctx.attr("data_format", "NHWC")).startswith("NC") and len(source) >= 3 else len(source) - 1
    if source[axis] is None:
        source[axis] = bias[0]
    return [source]


def _gather(ctx: OpContext) -> list[Dims]:
    params, indices = ctx.shape(0), ctx.shape(1)
    if params is None or indices is None:
        return [None]
    batch = int(ctx.attr("batch_dims", 0)) if ctx.op == "GatherV2" else 0
    if ctx.op == "GatherV2":
        axis = ctx.ints(2)
        if axis is None or len(axis) != 1:
            return [unknown_dims(len(params) + len(indices) - 1 - batch)]
        a = normalized_axis(axis[0], len(params))
    else:
        a = 0 if params else None
    if a is None:
        return [None]
    return [params[:a] + indices[batch:] + params[a + 1:]]


def _shape_of(ctx: OpContext) -> list[Dims]:
    outputs: list[Dims] = []
    for k in range(len(ctx.data) if ctx.op == "ShapeN" else 1):
        source = ctx.shape(k)
        outputs.append([None if source is None else len(source)])
    return outputs


def _fill(ctx: OpContext) -> list[Dims]:
    return [shape_from_value(ctx, 0)]


def _broadcast_to(ctx: OpContext) -> list[Dims]:
    return [shape_from_value(ctx, 1)]


def _tile(ctx: OpContext) -> list[Dims]:
    source, multiples = ctx.shape(0), ctx.value(1)
    if multiples is None:
        return [unknown_dims(len(source) if source is not None else length_of(ctx, 1))]
    items = multiples[1]
    if source is None:
        return [[None] * len(items)]
    if len(items) != len(source):
        return [None]
    return [[0 if m == 0 or d == 0 else (d if m == 1 else (None if d is None or m is None else d * m))
             for d, m in zip(source, items, strict=True)]]


def _expand_dims(ctx: OpContext) -> list[Dims]:
    source, axis = ctx.shape(0), ctx.ints(1)
    if source is None:
        return [None]
    if axis is None or len(axis) != 1:
        return [[None] * (len(source) + 1)]
    a = normalized_axis(axis[0], len(source) + 1)
    return [None] if a is None else [source[:a] + [1] + source[a:]]


def _squeeze(ctx: OpContext) -> list[Dims]:
    source = ctx.shape(0)
    if source is None:
        return [None]
    dims = list(ctx.attr("squeeze_dims", []) or [])
    if not dims:
        if None in source:
            return [None]
        return [[d for d in source if d != 1]]
    picked = {normalized_axis(d, len(source)) for d in dims}
    if None in picked:
        return [None]
    return [[d for k, d in enumerate(source) if k not in picked]]


def _select(ctx: OpContext) -> list[Dims]:
    return [merged([ctx.shape(1), ctx.shape(2)])]


def _one_hot(ctx: OpContext) -> list[Dims]:
    source, depth = ctx.shape(0), ctx.ints(1)
    if source is None:
        return [None]
    d = depth[0] if depth is not None and len(depth) == 1 else None
    axis = int(ctx.attr("axis", -1))
    a = len(source) if axis == -1 else axis
    return [source[:a] + [d] + source[a:]]


def _range(ctx: OpContext) -> list[Dims]:
    start, limit, delta = ctx.ints(0), ctx.ints(1), ctx.ints(2)
    if start is None or limit is None or delta is None or delta[0] == 0:
        return [[None]]
    return [[max(0, -(-(limit[0] - start[0]) // delta[0]))]]


def _arg_reduce(ctx: OpContext) -> list[Dims]:
    source, axis = ctx.shape(0), ctx.ints(1)
    if source is None:
        return [None]
    if axis is None or len(axis) != 1 or normalized_axis(axis[0], len(source)) is None:
        return [[None] * (len(source) - 1)] if source else [None]
    a = normalized_axis(axis[0], len(source))
    return [source[:a] + source[a + 1:]]  # type: ignore[operator]


def _pad(ctx: OpContext) -> list[Dims]:
    source, paddings = ctx.shape(0), ctx.constant(1)
    if paddings is None or paddings.ndim != 2 or paddings.dtype.kind not in "iu":
        rank = len(source) if source is not None else None
        return [unknown_dims(rank)]
    if source is None:
        return [[None] * paddings.shape[0]]
    if paddings.shape[0] != len(source):
        return [None]
    return [[None if d is None else d + int(p[0]) + int(p[1]) for d, p in zip(source, paddings, strict=True)]]


def _top_k(ctx: OpContext) -> list[Dims]:
    source, k = ctx.shape(0), ctx.ints(1)
    if source is None or not source:
        return [None, None]
    out = source[:-1] + [k[0] if k is not None and len(k) == 1 else None]
    return [out, list(out)]


def _resize(ctx: OpContext) -> list[Dims]:
    source, size = ctx.shape(0), ctx.value(1)
    source = source if source is not None and len(source) == 4 else [None] * 4
    items = size[1] if size is not None and len(size[1]) == 2 else (None, None)
    return [[source[0], items[0], items[1], source[3]]]


def _merge(ctx: OpContext) -> list[Dims]:
    shapes = [ctx.shape(k) for k in range(len(ctx.data))]
    out = shapes[0] if shapes else None
    for s in shapes[1:]:
        if out is None or s is None or len(s) != len(out):
            out = None
            break
        out = [x if x == y else None for x, y in zip(out, s, strict=True)]
    return [out, []]


def _where(ctx: OpContext) -> list[Dims]:
    source = ctx.shape(0)
    return [[None, None if source is None else len(source)]]




def _conv_backprop_input(ctx: OpContext) -> list[Dims]:
    return [shape_from_value(ctx, 0)]


def _list_item(ctx: OpContext) -> list[Dims]:
    """An element read from a TensorList (``TensorListGetItem``, ``TensorListPopBack``): the
    ``element_shape`` input's value (-1: unknown rank)."""
    at = 2 if ctx.op == "TensorListGetItem" else 1
    value = ctx.value(at)
    element = None if value is None or value[0] else shape_from_value(ctx, at)
    return [[], element] if ctx.op == "TensorListPopBack" else [element]


def _list_stack(ctx: OpContext) -> list[Dims]:
    value = ctx.value(1)
    element = None if value is None or value[0] else shape_from_value(ctx, 1)
    count = int(ctx.attr("num_elements", -1))
    return [None if element is None else [count if count >= 0 else None, *element]]


def _while(ctx: OpContext) -> list[Dims]:
    """A functional loop: its outputs have the shapes its ``output_shapes`` attribute declares,
    else those of its inputs."""
    attrs = ctx.node.attr
    declared = attrs["output_shapes"].list.shape if "output_shapes" in attrs else []
    if declared:
        return [None if s.unknown_rank else [d.size if d.size >= 0 else None for d in s.dim] for s in declared]
    return [ctx.shape(k) for k in range(len(ctx.data))]


_LIST_HANDLES = """
TensorListFromTensor TensorListReserve TensorListSetItem TensorListPushBack EmptyTensorList
TensorListSplit TensorListConcatLists TensorListResize TensorListLength TensorArraySizeV3
TensorArrayWriteV3 TensorArrayScatterV3
""".split()  # noqa: SIM905

NN_RULES: dict[str, Callable[[OpContext], list[Dims]]] = {
    "Merge": _merge, "RefMerge": _merge, "Select": _select,
    "Conv2D": lambda c: _conv_geometry(c, 2), "DepthwiseConv2dNative": lambda c: _conv_geometry(c, 2),
    "Conv3D": lambda c: _conv_geometry(c, 3), "MaxPool": lambda c: _conv_geometry(c, 2),
    "AvgPool": lambda c: _conv_geometry(c, 2), "MaxPool3D": lambda c: _conv_geometry(c, 3),
    "AvgPool3D": lambda c: _conv_geometry(c, 3), "Conv2DBackpropInput": _conv_backprop_input,
    **{op: _fused_batch_norm for op in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")},
    "BiasAdd": _bias_add, "BiasAddV1": _bias_add,
    "Gather": _gather, "GatherV2": _gather, "Shape": _shape_of, "ShapeN": _shape_of,
    "Fill": _fill, "BroadcastTo": _broadcast_to, "Tile": _tile, "ExpandDims": _expand_dims, "Squeeze": _squeeze,
    "OneHot": _one_hot, "Range": _range, "ArgMax": _arg_reduce, "ArgMin": _arg_reduce,
    "Pad": _pad, "PadV2": _pad, "MirrorPad": _pad, "TopKV2": _top_k,
    "ResizeBilinear": _resize, "ResizeNearestNeighbor": _resize, "ResizeBicubic": _resize, "ResizeArea": _resize,
    **{op: scalar for op in _LIST_HANDLES}, "TensorListGetItem": _list_item, "TensorListPopBack": _list_item,
    "TensorListStack": _list_stack, "While": _while, "StatelessWhile": _while, "Where": _where,
}
