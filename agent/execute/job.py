"""One job of the pool executor, in its own process: the job (JSON) on stdin, its Record (JSON)
written to the file descriptor named by --record-fd. Anything else the evaluation prints goes
to this process's stdout and stderr, which the pool does not read for the Record."""

from __future__ import annotations

import argparse
import json
import os
import sys

from agent.execute.base import Job, run_job
from agent.execute.failed import failed_record


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--record-fd", type=int, required=True)
    args = ap.parse_args()
    out = os.fdopen(args.record_fd, "w")
    job = Job.from_json(json.loads(sys.stdin.read()))
    try:
        record = run_job(job)
    except Exception as err:  # noqa: BLE001 - the job's failure is its Record
        record = failed_record(job, "executor.failed", f"{type(err).__name__}: {err}")
    out.write(json.dumps(record.to_json()))
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
