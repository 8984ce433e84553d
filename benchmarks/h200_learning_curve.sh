#!/usr/bin/env bash
# benchmarks/learning_curve.py on the lent H200: the 12 held-out KernelBench problems of the
# mtia-sim curve (benchmarks/results/learning-curve-mtia-2026-12-05) searched on Triton at the
# files' own sizes (preset bench), with and without the library of tactics/learned (mined and
# gated on mtia-sim from 30 training tasks), same budget and random seed. Each search stops after
# CURVE_SEARCH_SECONDS; a later call resumes the stores of CURVE_FROM (a previous $OUT).
# Wheels of build/whl into /tmp/site as in h200_search.sh. Results in $OUT, one archive.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/out}"
WORK=/tmp/curve-h200
# CURVE_QUICK=1: the stores and the summary written under $OUT as they come (what a call cut short
# still brings back)
[[ -n "${CURVE_QUICK:-}" ]] && WORK="$OUT/curve"
mkdir -p "$OUT" "$WORK"
if [[ -d build/whl ]]; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site build/whl/*.whl || exit 1
fi
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/kir-pycache KIR_GPU_SHARES="${KIR_GPU_SHARES:-8}"
timeout 120 python3 -m compileall -q -j 0 agent kir costmodel lowering tactics verifier benchmarks /tmp/site \
  $(python3 -c "import os, numpy, torch, triton; print(' '.join(os.path.dirname(m.__file__) for m in (numpy, torch, triton)))") \
  >/dev/null 2>&1
chmod -R a+rX /tmp/site /tmp/kir-pycache "$PWD" 2>/dev/null  # the candidates run as an unprivileged user
if [[ -n "${CURVE_FROM:-}" ]]; then tar xzf "$CURVE_FROM"/curve-h200.tar.gz -C "$WORK" 2>/dev/null; fi
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  git log -1 --format=%h 2>/dev/null
} | tee -a "$WORK/environment.txt"
python3 -m agent.cli seed benchmarks/kernelbench/elementwise_01_relu.py > "$WORK/smoke.txt" 2>&1 || { tail -5 "$WORK/smoke.txt"; exit 1; }
TRAIN=$(python3 -c "import json; print(','.join(json.load(open('benchmarks/results/learning-curve-mtia-2026-12-05/summary.json'))['train']))")
HELD=$(python3 -c "import json; print(','.join(json.load(open('benchmarks/results/learning-curve-mtia-2026-12-05/summary.json'))['held_out']))")
timeout "${CURVE_SECONDS:-450}" python3 benchmarks/learning_curve.py --use-library tactics/learned --train "$TRAIN" \
  --held-out "${CURVE_HELD:-$HELD}" --out "$WORK" --backend triton --preset bench --budget "${CURVE_BUDGET:-12}" \
  --parallel "${CURVE_PARALLEL:-12}" --workers 1 --stall 3 --seconds "${CURVE_SEARCH_SECONDS:-380}" 2>&1 | tee -a "$WORK/curve.log"
# the summary of what the stores hold, also when the searches were cut short
python3 benchmarks/learning_curve.py --use-library tactics/learned --train "$TRAIN" --held-out "${CURVE_HELD:-$HELD}" \
  --out "$WORK" --backend triton --preset bench --budget "${CURVE_BUDGET:-12}" --summary-only > /dev/null 2>&1
if [[ -z "${CURVE_QUICK:-}" ]]; then
  tar czf /tmp/curve-h200.tar.gz -C "$WORK" --exclude=tasks . && mv /tmp/curve-h200.tar.gz "$OUT"/
  cp "$WORK"/summary.md "$OUT"/ 2>/dev/null
fi
exit 0
