"""verify-ops: operator-by-operator validation against a float64 CPU reference."""
