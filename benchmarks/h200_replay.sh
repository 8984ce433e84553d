#!/usr/bin/env bash
# Recorded tactic sequences on the lent H200 (issue #20: a sequence from seed.kir within 5% of
# tuned.kir's time, or faster, in one `kir bench` run beside it). For every suite task whose
# task.toml records one (`[programs.replayed]`, docs/tactics.md): the replayed program and its
# JSON (`kir tactics replay`), then `kir bench TASK --program seed --program tuned --program
# replayed --preset bench`, one run a task (a run cut short keeps the tasks before it), and a
# summary of replayed / tuned per task. Everything lands under $OUT and in $OUT/replay.tar.gz.
#
#   bash benchmarks/h200_replay.sh                      # every task with a sequence, on the GPU
#   REPLAY_TASKS="softmax id_hash" bash benchmarks/h200_replay.sh
#   REPLAY_CPU=1 PYTHON=.venv/bin/python bash benchmarks/h200_replay.sh   # no GPU: see below
#
# REPLAY_CPU=1 is what can be tried without a GPU: instead of `kir bench` (which times with CUDA
# events), each row the bench would plan is checked through the bench runner's own path
# (agent.harness.bench.check_row: verify, cost, the correctness protocol) on the `test` preset,
# through Triton's interpreter (tile level) or the reference interpreter (explicit level).
# Wheels as in h200_harness.sh (build/whl -> /tmp/site), where the folder is there.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/out}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT"
if [[ -d build/whl ]]; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/whl/*.whl || exit 1
  chmod -R a+rX /tmp/site "$PWD"  # the candidates run as an unprivileged user: they read these
fi
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
{
  date -u +%FT%TZ
  git rev-parse HEAD 2>/dev/null || true
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU"
  "$PYTHON" -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
} | tee "$OUT/environment.txt"

TASKS="${REPLAY_TASKS:-$("$PYTHON" -c "
from agent.tasks import load_suite
print(' '.join(t.name for t in load_suite('benchmarks/tasks') if t.replays))")}"
echo "tasks with a recorded sequence: $TASKS" | tee -a "$OUT/environment.txt"
[[ -n "$TASKS" ]] || exit 1

mkdir -p "$OUT/replayed"
for task in $TASKS; do
  "$PYTHON" -m agent.cli tactics replay "benchmarks/tasks/$task" > "$OUT/replayed/$task.kir" 2>&1
  echo "replay $task rc=$?" | tee -a "$OUT/replay.txt"
  "$PYTHON" -m agent.cli tactics replay "benchmarks/tasks/$task" --json > "$OUT/replayed/$task.json" 2>&1
done

if [[ "${REPLAY_CPU:-0}" == 1 ]]; then
  # shellcheck disable=SC2086  # the task names are words
  timeout "${REPLAY_TIMEOUT:-1800}" "$PYTHON" - "$OUT/cpu.json" $TASKS <<'EOF' 2>&1 | tee "$OUT/cpu.log"
import json
import sys

from agent.harness.bench import check_row, plan
from agent.tasks import load_suite
from agent.tasks.replay import program_of
from lowering.emit.base import program_level

rows = []
for task in load_suite("benchmarks/tasks", sys.argv[2:]):
    for name in dict.fromkeys(name for _, name, _ in plan([task], None, ["seed", "tuned", "replayed"])):
        try:
            level = program_level(program_of(task, name))
        except Exception:  # a sequence that does not replay: check_row says why
            level = "tile"
        backend = "triton-interp" if level == "tile" else "interp"
        record = check_row(task, name, backend, "test", "cpu", timeout=600)
        errors = [f"{d.rule}: {d.message}" for d in record.errors][:3]
        rows.append({"task": task.name, "program": name, "backend": backend, "ok": record.ok, "errors": errors})
        print(f"{task.name:18} {name:9} {backend:14} {'correct' if record.ok else 'FAILED ' + '; '.join(errors)}")
with open(sys.argv[1], "w") as out:
    json.dump(rows, out, indent=1)
sys.exit(0 if all(r["ok"] for r in rows) else 1)
EOF
  echo "cpu rc=${PIPESTATUS[0]}" | tee -a "$OUT/replay.txt"
else
  for task in $TASKS; do
    timeout "${REPLAY_TIMEOUT:-280}" "$PYTHON" -m agent.cli bench "$task" --program seed --program tuned \
      --program replayed --preset bench -o "$OUT/bench/$task" 2>&1 | tee "$OUT/bench-$task.log"
    echo "bench $task rc=${PIPESTATUS[0]}" | tee -a "$OUT/replay.txt"
  done
  # replayed / tuned per task and backend, from the bench.json files of this run
  "$PYTHON" - "$OUT" <<'EOF' | tee "$OUT/summary.md"
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
print("| task | backend | seed ms | tuned ms | replayed ms | replayed / tuned | within 5% |")
print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
for path in sorted(out.glob("bench/*/bench.json")):
    rows = json.loads(path.read_text())["rows"]
    for backend in dict.fromkeys(r["backend"] for r in rows):
        ms = {r["program"]: r["ms"] for r in rows if r["backend"] == backend and r["correct"]}
        tuned, replayed = ms.get("tuned"), ms.get("replayed")
        ratio = replayed / tuned if tuned and replayed else None
        cells = [f"{ms[p]:.4f}" if ms.get(p) else "-" for p in ("seed", "tuned", "replayed")]
        verdict = "-" if ratio is None else ("yes" if ratio <= 1.05 else "no")
        print(f"| {path.parent.name} | {backend} | {' | '.join(cells)} | {f'{ratio:.3f}' if ratio else '-'} | {verdict} |")
EOF
fi
tar -czf "${TMPDIR:-/tmp}/replay.tar.gz" -C "$OUT" . && mv "${TMPDIR:-/tmp}/replay.tar.gz" "$OUT/"
echo "wrote $OUT/replay.tar.gz"
