"""Built-in scope and graph passes, registered through the same hooks as any plugin."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Sequence

from ..core.fusion.fused_ops import FusedOpDef
from ..core.graph_fusion.base_pass import PatternFusionBasePass
from ..core.scope.base_pass import ScopeBasePass
from ..plugins.hookspecs import hookimpl
from .graph.attention import ATTENTION, AttentionFusionPass
from .graph.concat_ext2 import CONCAT_V2D, ZConcatExt2FusionPass
from .graph.concat_flatten import ConcatFlattenFusionPass
from .graph.conv_batchnorm import ConvBatchnormFusionPass
from .graph.conv_bias_add import CONV2D_BIAS_ADD, DEPTHWISE_CONV2D_BIAS_ADD
from .graph.conv_to_fully_connection import FULLY_CONNECTION, ConvToFullyConnectionFusionPass
from .graph.epilogue import CONV2D_BIAS_ADD_ACTIVATION, MATMUL_BIAS_ADD_ACTIVATION, EpilogueFusionPass
from .graph.gated_activation import GATED_ACTIVATION, GatedActivationFusionPass
from .graph.gelu import GELU, GeluFusionPass
from .graph.group_norm import GROUP_NORM, GroupNormFusionPass
from .graph.layer_norm import LayerNormFusionPass
from .graph.matmul_bias_add import MATMUL_BIAS_ADD, MatMulBiasAddFusionPass
from .graph.residual_norm import ADD_LAYER_NORM, ADD_RMS_NORM, ResidualNormFusionPass
from .graph.rms_norm import RMS_NORM, RMSNormFusionPass
from .graph.rotary_embedding import ROTARY_EMBEDDING, RotaryEmbeddingFusionPass
from .graph.softmax import SoftmaxFusionPass
from .graph.softmax_transpose import SoftmaxTransposeFusionPass
from .graph.swish import SWISH, SwishFusionPass
from .scope.batch_nms import BATCH_MULTICLASS_NMS, ScopeBatchMultiClassNMSPass
from .scope.box_coordinates import NORMALIZE_BBOX, TO_ABSOLUTE_BBOX, ScopeNormalizeBBoxPass, ScopeToAbsoluteBBoxPass
from .scope.clip_boxes import CLIP_BOXES, ScopeClipBoxesPass
from .scope.decode_bbox import DECODE_BBOX_V2, ScopeDecodeBboxV2Pass
from .scope.fastrcnn_predictions import FASTRCNN_PREDICTIONS, ScopeFastrcnnPredictionsPass
from .scope.instance_norm import INSTANCE_NORM, ScopeInstanceNormPass
from .scope.keep_ratio_resize import KEEP_RATIO_RESIZE_BILINEAR, ScopeKeepRatioResizeBilinearPass
from .scope.layer_norm import LAYER_NORM, ScopeLayerNormPass
from .scope.layer_norm_grad import LAYER_NORM_GRAD, ScopeLayerNormGradPass
from .scope.rnn_cells import BASIC_LSTM_CELL, GRU_CELL, ScopeBasicLSTMCellPass, ScopeGRUCellPass
from .scope.rnn_loops import DYNAMIC_GRU_V2, DYNAMIC_RNN, ScopeDynamicRNNPass
from .scope.roi_align import ROI_ALIGN, ScopeROIAlignPass
from .scope.rpn_proposals import RPN_PROPOSALS, ScopeRpnProposalsPass

#: Registration order: general passes first, then the non-general ones.  Of
#: the detection passes, NMS results contain clip results and win over them, and
#: the stage passes' (RPN proposals, Faster R-CNN predictions) contain their parts'.
BUILTIN_PASSES: tuple[type[ScopeBasePass], ...] = (
    ScopeLayerNormPass,
    ScopeLayerNormGradPass,
    ScopeInstanceNormPass,
    ScopeDecodeBboxV2Pass,
    ScopeClipBoxesPass,
    ScopeBatchMultiClassNMSPass,
    ScopeROIAlignPass,
    ScopeRpnProposalsPass,
    ScopeFastrcnnPredictionsPass,
    ScopeNormalizeBBoxPass,
    ScopeToAbsoluteBBoxPass,
    ScopeKeepRatioResizeBilinearPass,
    ScopeBasicLSTMCellPass,
    ScopeGRUCellPass,
    ScopeDynamicRNNPass,
)
#: Graph passes run after scope fusion, on the scope-fused graph, each once.
BUILTIN_GRAPH_PASSES: tuple[type[PatternFusionBasePass], ...] = (
    MatMulBiasAddFusionPass,
    GeluFusionPass,
    SwishFusionPass,
    SoftmaxFusionPass,
    SoftmaxTransposeFusionPass,
    RotaryEmbeddingFusionPass,
    ConcatFlattenFusionPass,
    ZConcatExt2FusionPass,
    GatedActivationFusionPass,
    EpilogueFusionPass,
    AttentionFusionPass,
    ResidualNormFusionPass,
    ConvBatchnormFusionPass,
    ConvToFullyConnectionFusionPass,
    LayerNormFusionPass,
    RMSNormFusionPass,
    GroupNormFusionPass,
)
BUILTIN_FUSED_OPS: tuple[FusedOpDef, ...] = (
    LAYER_NORM, INSTANCE_NORM, DECODE_BBOX_V2, CLIP_BOXES, BATCH_MULTICLASS_NMS, GELU, MATMUL_BIAS_ADD,
    SWISH, MATMUL_BIAS_ADD_ACTIVATION, CONV2D_BIAS_ADD_ACTIVATION,
    CONV2D_BIAS_ADD, DEPTHWISE_CONV2D_BIAS_ADD, ADD_LAYER_NORM, ADD_RMS_NORM,
    GATED_ACTIVATION, ROTARY_EMBEDDING,
    RMS_NORM, GROUP_NORM, ATTENTION, BASIC_LSTM_CELL, GRU_CELL, DYNAMIC_RNN, DYNAMIC_GRU_V2,
    ROI_ALIGN, RPN_PROPOSALS, FASTRCNN_PREDICTIONS, NORMALIZE_BBOX, TO_ABSOLUTE_BBOX, KEEP_RATIO_RESIZE_BILINEAR,
    FULLY_CONNECTION, CONCAT_V2D, LAYER_NORM_GRAD,
)


@hookimpl
def scopefusion_scope_passes() -> Sequence[type[ScopeBasePass]]:
    return BUILTIN_PASSES


@hookimpl
def scopefusion_graph_passes() -> Sequence[type[PatternFusionBasePass]]:
    return BUILTIN_GRAPH_PASSES


@hookimpl
def scopefusion_fused_ops() -> Sequence[FusedOpDef]:
    return BUILTIN_FUSED_OPS


#: every built-in pass by name, for a plugin that extends one (subclass it and register the subclass
#: under the same name to replace it); read-only
_ALL_PASSES: tuple[type[ScopeBasePass] | type[PatternFusionBasePass], ...] = (*BUILTIN_PASSES, *BUILTIN_GRAPH_PASSES)
BUILTIN_PASSES_BY_NAME: Mapping[str, type[ScopeBasePass] | type[PatternFusionBasePass]] = MappingProxyType(
    {p.name: p for p in _ALL_PASSES})
#: every built-in fused op by type name (its ``reference`` is the op's TensorFlow implementation); read-only
BUILTIN_FUSED_OPS_BY_NAME: Mapping[str, FusedOpDef] = MappingProxyType({d.name: d for d in BUILTIN_FUSED_OPS})
