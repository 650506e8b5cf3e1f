"""Test plugin for scopefusion (see plugin.py)."""
