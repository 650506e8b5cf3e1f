"""Verification: the TensorFlow-runnable form, feeds, execution and comparison."""
from __future__ import annotations

from .verify import DEFAULT_TOLERANCES, TensorComparison, VerifyResult, verify

__all__ = ["DEFAULT_TOLERANCES", "TensorComparison", "VerifyResult", "verify"]
