"""Layer, instance, group and RMS norm passes (scope and graph)."""
