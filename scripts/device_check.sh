#!/usr/bin/env bash
# One-shot accelerator check for a lent GPU machine: run from the repo root with OUT set (the device tool sets it).
# Wheels the image lacks (pydantic) travel in .whl/. Each step has its own time limit; logs go to $OUT.
set -u
OUT=${OUT:-/tmp/bringup-device-check}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 COLUMNS=140
P="$OUT/profile.yaml"
LOG="$OUT/log.txt"
step() {  # step SECONDS NAME ARGS...
  local limit=$1 name=$2; shift 2
  echo "=== $name: bringup $* (limit ${limit}s)" | tee -a "$LOG"
  local start=$SECONDS
  timeout "$limit" python3 -m bringup "$@" --profile "$P" >>"$LOG" 2>&1
  echo "=== $name: exit $? after $((SECONDS - start))s" | tee -a "$LOG"
}
nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total --format=csv >>"$LOG" 2>&1
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)" >>"$LOG" 2>&1
step 30 devices devices
step 70 probe probe --timeout 60
step 45 verify-ops verify-ops --dtype bfloat16 --dtype float32 --timeout 20
step 45 bench bench --quick --only matmul,bandwidth,transfer,dispatch,attention
step 30 selftest selftest --steps 16
tail -c 20000 "$LOG"
