"""The plan `bringup tune` records and later starts replay: what it holds (recorded.py), the bounds a replayed
record must meet (bounds.py), which of two records is cleaner (cleaner.py), and tune's runs (tune_runs.py)."""
