"""One contract suite that every ComputeDriver must pass."""
