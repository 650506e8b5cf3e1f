"""What both engines share (core/fusion): candidates, op checks, plans, conflicts, the rewrite, the report."""
