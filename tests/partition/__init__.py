"""Mixed computation: the partitioner, its rules and its command line."""
