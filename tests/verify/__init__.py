"""Verification, and the corpus of real models fused and verified."""
