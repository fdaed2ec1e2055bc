"""Judging an op case: errors against the float64 reference, the tolerance table, statistical tests, error kinds."""
