"""One module per benchmark group; each exposes `run(ctx) -> BenchGroup`."""
