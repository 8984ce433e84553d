#!/usr/bin/env bash
# benchmarks/profile_eval.py on the lent H200 under py-spy (--subprocesses: the job process, the
# checker, the candidate), one evaluation per task of PROFILE_TASKS, alone on the machine, with
# the bytecode cache of h200_search.sh. Collapsed stacks and each evaluation's stage times in $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site build/whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/kir-pycache
timeout 120 python3 -m compileall -q -j 0 agent kir costmodel lowering tactics verifier /tmp/site \
  $(python3 -c "import os, numpy, torch, triton; print(' '.join(os.path.dirname(m.__file__) for m in (numpy, torch, triton)))") \
  >/dev/null 2>&1
chmod -R a+rX /tmp/site /tmp/kir-pycache "$PWD" 2>/dev/null
for task in ${PROFILE_TASKS:-gemm softmax}; do
  /tmp/site/bin/py-spy record --subprocesses --rate 50 --format raw -o "$OUT/$task.collapsed" -- \
    python3 benchmarks/profile_eval.py "$task" 2>&1 | grep -v "^py-spy>" | tee "$OUT/$task.json"
done
