#!/usr/bin/env bash
# benchmarks/search_mtia.py on the lent GPU machine's 16 CPUs (the searches run on mtia-sim: no
# GPU is used): the wheels of build/whl into /tmp/site as in h200_harness.sh, then every task's
# beam and MCTS searches at once, each stopping after SEARCH_SECONDS; stores and summary in $OUT.
# A later call given the stores back (SEARCH_FROM=folder of a previous $OUT, copied into the
# tree) resumes them.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
if [[ -d build/whl ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/whl/*.whl || exit 1
  chmod -R a+rX /tmp/site "$PWD"  # the candidates run as an unprivileged user: they read these
fi
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
if [[ -n "${SEARCH_FROM:-}" ]]; then cp "$SEARCH_FROM"/*.sqlite "$OUT"/ 2>/dev/null; fi
{
  date -u +%FT%TZ
  nproc
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  g++ --version | head -1
} | tee "$OUT/environment.txt"
python3 benchmarks/search_mtia.py --out "$OUT" --parallel "${SEARCH_PARALLEL:-28}" --workers "${SEARCH_WORKERS:-1}" \
  --budget "${SEARCH_BUDGET:-200}" --seconds "${SEARCH_SECONDS:-420}" ${SEARCH_TASKS:+--tasks "$SEARCH_TASKS"} 2>&1 | tee "$OUT/search.log"
# one archive: the device's reply carries a limited number of files
# (written outside $OUT first: tar reading the folder it writes into says the folder changed)
tar czf /tmp/search-mtia.tar.gz -C "$OUT" . && mv /tmp/search-mtia.tar.gz "$OUT"/ \
  && find "$OUT" -mindepth 1 -not -name search-mtia.tar.gz -not -name summary.md -delete
