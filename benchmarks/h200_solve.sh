#!/usr/bin/env bash
# benchmarks/solve_h200.py on the lent H200: the wheels of build/whl into /tmp/site (as
# h200_search.sh), bytecode compiled once, then `kir solve` on the problems named in SOLVE_NAMES
# (default: 14 of benchmarks/kernelbench whose seeds are correct on the CPU interpreters). Results
# in $OUT as one archive and summary.md.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/out}"
WORK=/tmp/solve-h200
# SOLVE_QUICK=1: little device time left: every answer written under $OUT as it comes (what a
# call cut short still brings back), and only KIR's own packages compiled to bytecode
[[ -n "${SOLVE_QUICK:-}" ]] && WORK="$OUT/solve"
mkdir -p "$OUT" "$WORK"
if [[ -d build/whl ]]; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site build/whl/*.whl || exit 1
fi
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/kir-pycache KIR_GPU_SHARES="${KIR_GPU_SHARES:-6}"
if [[ -n "${SOLVE_QUICK:-}" ]]; then
  timeout 60 python3 -m compileall -q -j 0 agent kir costmodel lowering tactics verifier /tmp/site >/dev/null 2>&1
else
  timeout 120 python3 -m compileall -q -j 0 agent kir costmodel lowering tactics verifier /tmp/site \
    $(python3 -c "import os, numpy, torch, triton; print(' '.join(os.path.dirname(m.__file__) for m in (numpy, torch, triton)))") \
    >/dev/null 2>&1
fi
chmod -R a+rX /tmp/site /tmp/kir-pycache "$PWD" 2>/dev/null
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  git log -1 --format=%h 2>/dev/null
} | tee "$WORK/environment.txt"
# the CLI once before the solves: a missing wheel fails here in seconds, not in every solve
if ! python3 -m agent.cli seed benchmarks/kernelbench/elementwise_01_relu.py > "$WORK/smoke.txt" 2>&1; then
  tail -5 "$WORK/smoke.txt"; cp "$WORK/smoke.txt" "$OUT"/; exit 1
fi
NAMES="${SOLVE_NAMES:-elementwise_02_gelu_erf elementwise_03_gelu_tanh_bias_add elementwise_06_swish_chain_scalar softmax_01_softmax_last_dim softmax_02_log_softmax norm_01_layernorm norm_02_rmsnorm reduction_01_sum_last_dim argreduce_01_argmax_last_dim scan_01_cumsum matmul_01_square_mm matmul_07_linear_bias fusion_02_linear_bias_gelu fusion_03_linear_scale_residual}"
timeout "${SOLVE_SECONDS:-500}" python3 benchmarks/solve_h200.py --out "$WORK" --budget "${SOLVE_BUDGET:-6}" \
  --seconds "${SOLVE_SEARCH_SECONDS:-200}" --parallel "${SOLVE_PARALLEL:-5}" $NAMES 2>&1 | tee "$WORK/solve.log"
if [[ -z "${SOLVE_QUICK:-}" ]]; then
  tar czf /tmp/solve-h200.tar.gz -C "$WORK" --exclude='*.sqlite-*' . && mv /tmp/solve-h200.tar.gz "$OUT"/
  cp "$WORK"/summary.md "$OUT"/ 2>/dev/null
fi
exit 0
