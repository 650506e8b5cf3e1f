"""Plugins: hook specifications and the registry."""
