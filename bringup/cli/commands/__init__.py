"""One module per `bringup` sub-command (imported only when that sub-command runs: see cli/app.py)."""
