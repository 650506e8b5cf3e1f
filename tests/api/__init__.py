"""The Python API as people use it: notebooks, models in the process, loading."""
