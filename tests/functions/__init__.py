"""Fusion inside the function library (core/functions)."""
