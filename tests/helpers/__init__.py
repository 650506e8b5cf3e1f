"""What the tests share: assertions of the pass tests, hand-made graphs, test passes, the test plugins."""
