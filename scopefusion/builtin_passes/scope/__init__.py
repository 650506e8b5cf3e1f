"""Built-in scope passes: one module or package per pass."""
