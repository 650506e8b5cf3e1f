"""Graph fusion's engine (core/graph_fusion): op patterns, matching, the switch file."""
