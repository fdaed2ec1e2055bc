#!/usr/bin/env bash
# Create .venv when absent, install torch==2.13.0 first when no torch is importable (any other request may
# pull a multi-GB CUDA build), then install this project (with the extras named in $1, if any).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
extras="${1:-}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import torch" >/dev/null 2>&1; then
  "$venv/bin/python" -m pip install -qq "torch==2.13.0"
fi
stamp="$venv/.bringup-installed${extras:+-$extras}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  "$venv/bin/python" -m pip install -qq -e ".${extras:+[$extras]}"
  touch "$stamp"
fi
