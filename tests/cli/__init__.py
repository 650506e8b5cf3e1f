"""The scopefusion command: run, list, progress, and what it imports."""
