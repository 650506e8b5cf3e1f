"""The test suite, one package per feature; shared fixtures in conftest.py."""
