"""Fusion inside the graph's function library: each function body is fused as a graph of its own."""
from .convert import BodyGraph, Unconvertible, body_to_function, function_to_body
from .library import FunctionFusion, fuse_library, join_reports, library_op_counts

__all__ = ["BodyGraph", "FunctionFusion", "Unconvertible", "body_to_function", "function_to_body", "fuse_library",
           "join_reports", "library_op_counts"]
