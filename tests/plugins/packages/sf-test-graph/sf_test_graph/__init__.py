"""Test plugin contributing graph passes."""
