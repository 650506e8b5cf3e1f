"""Graphs built by the real libraries at small sizes with random weights, frozen, for the tests."""
