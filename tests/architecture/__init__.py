"""Tests of the package's structure: imports point downward through the layers."""
