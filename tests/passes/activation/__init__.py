"""GELU, swish and softmax passes."""
