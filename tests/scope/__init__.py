"""Scope fusion's engine (core/scope): the scope tree, its patterns, search and candidates."""
