"""Scope fusion: the scope graph, scope patterns, the matcher and the scope pass manager."""
