#!/usr/bin/env bash
# The cost model's accuracy measurement on the lent H200 (torch and triton there, no network):
# install the wheels carried in build/whl into /tmp/site, time every variant listed in
# benchmarks/results/costmodel-variants.json (made here, without a GPU, by
# `python benchmarks/costmodel_variants.py generate`) with the harness, and write
# $OUT/costmodel-measured.json; then compute the accuracy figures into $OUT as well.
# About 4-6 minutes: a parallel warm-up compiles each variant once, then each task's variants
# are timed side by side (2 input sets, 20 runs, no peers).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/costmodel-out}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/whl/*.whl
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader || true
python3 benchmarks/costmodel_variants.py time --variants benchmarks/results/costmodel-variants.json \
  --out "$OUT/costmodel-measured.json" --jobs "${JOBS:-8}" "$@"
python3 benchmarks/costmodel_accuracy.py "$OUT/costmodel-measured.json" --out "$OUT"
