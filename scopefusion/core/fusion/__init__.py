"""Engine-neutral fusion: fused-op declarations, candidates, safety checks, conflicts,
the rewrite, the pipeline and the report."""
