#!/usr/bin/env bash
# benchmarks/search_h200.py on the lent H200: the wheels of build/whl into /tmp/site as in
# h200_harness.sh, then PHASE=search (every task's beam search from its seed on Triton at the
# bench shapes, each stopping after SEARCH_SECONDS and resumed by the next call from the stores
# given back: SEARCH_FROM=folder of a previous $OUT, copied into the tree) or PHASE=bench (the
# best program of each store timed beside seed, tuned and the peers). Results in $OUT, one archive.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/out}"
WORK=/tmp/search-h200
mkdir -p "$OUT" "$WORK"
if [[ -d build/whl ]]; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site build/whl/*.whl || exit 1
fi
# The machine's torch, numpy and triton come without bytecode: every process of every evaluation
# (the job, the checker) compiled them from source again, about 4 s each (benchmarks/profile_eval.py
# under py-spy). Compiled once here into a cache prefix that every later process reads.
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/kir-pycache
# 14 searches of 2 workers and 8 checks on the GPU at once: 12-30 evaluations a task in one call
# (benchmarks/results/search-h200-2026-12-04c); 3 workers and 12 checks ran the H200 out of memory
export KIR_GPU_SHARES="${KIR_GPU_SHARES:-8}"
started=$(date +%s)
timeout 120 python3 -m compileall -q -j 0 agent kir costmodel lowering tactics verifier /tmp/site \
  $(python3 -c "import os, numpy, torch, triton; print(' '.join(os.path.dirname(m.__file__) for m in (numpy, torch, triton)))") \
  >/dev/null 2>&1
echo "bytecode compiled in $(($(date +%s) - started)) s"
chmod -R a+rX /tmp/site /tmp/kir-pycache "$PWD" 2>/dev/null  # the candidates run as an unprivileged user: they read these
if [[ -n "${SEARCH_FROM:-}" ]]; then tar xzf "$SEARCH_FROM"/search-h200.tar.gz -C "$WORK" 2>/dev/null; fi
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  git log -1 --format=%h 2>/dev/null
} | tee "$WORK/environment-${PHASE:-search}.txt"
if [[ "${PHASE:-search}" == search ]]; then
  # one check and timing at the bench shapes before the searches: a harness that fails on the
  # device fails here in a minute, not in every search's seed
  for task in softmax knn_topk; do  # the harness's own comparison, and a task's (reference.py)
    timeout 150 python3 -m agent.cli run "benchmarks/tasks/$task/tuned.kir" --task "$task" --backend triton \
      --preset bench --seed 1 --json > "$WORK/smoke-$task.json" 2>&1
    smoke=$?
    echo "smoke check ($task tuned at the bench shapes): exit $smoke, $(head -c 300 "$WORK/smoke-$task.json")"
    if [[ $smoke -ne 0 ]]; then cp "$WORK/smoke-$task.json" "$OUT"/; exit 1; fi
  done
  python3 benchmarks/search_h200.py search --peers "${SEARCH_PEERS:-eager}" --measure-top "${SEARCH_TOP:-3}" \
    --out "$WORK" --parallel "${SEARCH_PARALLEL:-14}" --workers "${SEARCH_WORKERS:-2}" \
    --budget "${SEARCH_BUDGET:-300}" --seconds "${SEARCH_SECONDS:-430}" --timeout "${SEARCH_TIMEOUT:-300}" ${SEARCH_TASKS:+--tasks "$SEARCH_TASKS"} 2>&1 | tee -a "$WORK/search.log"
else
  timeout "${BENCH_SECONDS:-540}" python3 benchmarks/search_h200.py bench --out "$WORK" --workers 8 ${SEARCH_TASKS:+--tasks "$SEARCH_TASKS"} 2>&1 | tee -a "$WORK/bench.log"
fi
# one archive: the device's reply carries a limited number of files
tar czf /tmp/search-h200.tar.gz -C "$WORK" --exclude=tasks . && mv /tmp/search-h200.tar.gz "$OUT"/
cp "$WORK"/summary.md "$OUT"/ 2>/dev/null
tail -5 "$WORK"/search.log 2>/dev/null
exit 0
