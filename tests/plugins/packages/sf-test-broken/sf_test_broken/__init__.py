"""Test plugin whose entry-point module fails to import."""
