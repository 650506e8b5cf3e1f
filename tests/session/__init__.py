"""scopefusion.Session and the NpuOptimizer session options."""
