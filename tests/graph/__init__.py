"""Reading, validating, indexing and writing graphs (core/graph)."""
