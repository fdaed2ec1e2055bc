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
# bringup's emulated accelerator (emulator/): installed beside bringup, built once (cached by torch version, source
# hash and compiler in emulator/bringup_emu/_build/); dormant in every process unless BRINGUP_EMU_SPEC is set
emu_stamp="$venv/.bringup-emu-installed"
if [ ! -f "$emu_stamp" ] || [ emulator/pyproject.toml -nt "$emu_stamp" ]; then
  "$venv/bin/python" -m pip install -qq -e ./emulator
  touch "$emu_stamp"
fi
if command -v "${CXX:-c++}" >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1; then
  "$venv/bin/python" -m bringup_emu build
else
  echo "note: no C++ compiler or no ninja found: the emulated device (bringup-emu) is not built; its tests skip"
fi
