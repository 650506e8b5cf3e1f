"""What the tests share: freezing graphs, the one numerical check, assertions of the pass tests,
hand-made graphs, test passes, the test plugins."""
