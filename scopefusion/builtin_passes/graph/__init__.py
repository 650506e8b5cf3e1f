"""Built-in graph passes: one module per pass."""
