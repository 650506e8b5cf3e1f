"""Epilogue fusion (the switch file's ``UBFusion`` section): a product or convolution with its
bias, followed by one activation, becomes one fused op carrying the activation."""
from __future__ import annotations

from .fusion import EpilogueFusionPass
from .ops import CONV2D_BIAS_ADD_ACTIVATION, MATMUL_BIAS_ADD_ACTIVATION

__all__ = ["CONV2D_BIAS_ADD_ACTIVATION", "MATMUL_BIAS_ADD_ACTIVATION", "EpilogueFusionPass"]
