"""One search evaluation of a task's seed on the GPU, as a search's pool runs it (the job
process, the checker, the candidate), with the wall time of each stage: where an evaluation's
seconds go. Under `py-spy record --subprocesses` it shows which process and which calls.

    python benchmarks/profile_eval.py TASK [--preset bench] [--backend triton] [--peers]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--preset", default="bench")
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--peers", action="store_true", help="time eager and torch.compile too (the seed's node)")
    args = ap.parse_args()
    from agent.execute.base import Job
    from agent.execute.pool import PoolExecutor
    from agent.pipeline import Candidate
    from agent.tasks import load_task
    from kir.check import load_program

    task = load_task(ROOT / "benchmarks" / "tasks" / args.task)
    spec = task.programs["seed"]
    text = load_program(spec.file).with_params(**spec.params_for(args.preset)).text()
    peers = ["eager", "compile"] if args.peers else []
    job = Job(
        key=Candidate(text).parsed().key(), text=text, task=str(task.folder), backend=args.backend,
        preset=args.preset, seeds=(1, 2, 3), harness={"time": {"sets": 3, "runs": 50, "peers": peers}}, timeout=600,
    )  # fmt: skip
    start = time.monotonic()
    with PoolExecutor(1) as pool:
        record = pool.map([job])[0]
    wall = time.monotonic() - start
    metrics = (record.verdict or {}).get("metrics") or {}
    print(json.dumps({"task": args.task, "ok": record.ok, "stage": record.stage, "wall_s": round(wall, 2),
                      "seconds": dict(record.seconds), "ms": metrics.get("ms"),
                      "errors": [d.message[:200] for d in record.errors]}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
