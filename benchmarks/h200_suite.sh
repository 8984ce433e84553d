#!/usr/bin/env bash
# The benchmark suite on the lent H200, which has torch and triton but no network: install the
# wheels carried in build/whl (xdsl, lark, z3-solver and their small dependencies) into
# /tmp/site, then run `kir bench` with the given arguments (e.g. `--out "$OUT/bench"`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/whl/*.whl
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader || true
python3 -m agent.cli bench "$@"
