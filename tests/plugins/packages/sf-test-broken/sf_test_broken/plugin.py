"""Fails at import time, as a plugin with a missing dependency would."""
raise ImportError("sf_test_broken needs the module 'no_such_dependency_xyz'")
