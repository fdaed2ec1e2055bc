"""Which device runs: what the OS has (system.py), what torch sees reconciled with it (reconcile.py), and the
choice with its reason (select.py)."""
