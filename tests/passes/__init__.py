"""The built-in passes on graphs built by real libraries, one package per family."""
