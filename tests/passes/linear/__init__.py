"""Matmul + bias, convolution + batch norm and the epilogue (a linear op and its activation)."""
