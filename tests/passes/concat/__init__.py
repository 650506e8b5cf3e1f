"""Concats of concats flattened."""
