"""Graph fusion: op-pattern passes, the engine and the fusion switch file."""
