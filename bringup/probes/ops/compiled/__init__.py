"""Eager vs torch.compile: compare both with the float64 reference; bisect failures with a backend ladder."""
