"""The graph layer: index, node queries, vocabulary, shapes, I/O and the op-pattern language."""
