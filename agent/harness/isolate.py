"""Isolation: every candidate is evaluated in a child process with a timeout.

`run_job(job, timeout)` starts `python -m agent.harness.worker` in its own process group,
sends it the job (plain JSON: see `agent.harness.worker.evaluate`) on stdin and reads one JSON
record back from stdout. Whatever happens in the child, the caller gets a record and goes on:

| what happened | record |
| --- | --- |
| the evaluation finished (correct or not) | the worker's record |
| the child ran past the timeout (a hang, a deadlocked kernel) | `stage = "timeout"`, rule `harness.timeout` |
| the child died (a segfault, an illegal memory access that kills the context, `os.abort`) | `stage = "crash"`, rule `harness.crash`, with the signal or exit status |
| the child printed no record (it exited early) | `stage = "crash"`, rule `harness.no-record` |

A record is `{"ok", "stage", "diagnostics": [Diagnostic JSON...], "log_tail", "metrics"}`;
`log_tail` is the last lines of the child's stderr (a compiler's or the driver's message).
The timeout kills the whole process group, so compilers the child started die with it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kir.diagnostics import Diagnostic

TAIL_LINES = 40


def failure(stage: str, rule: str, message: str, hint: str = "", log_tail: str = "") -> dict[str, Any]:
    diag = Diagnostic(rule, "error", None, message, hint)
    return {"ok": False, "stage": stage, "diagnostics": [diag.to_json()], "log_tail": log_tail, "metrics": {}}


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-TAIL_LINES:])


def run_job(job: dict[str, Any], timeout: float = 300.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Evaluate one job in a child process; never raises for anything the child does."""
    root = Path(__file__).resolve().parents[2]
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), child_env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="kir-job-") as tmp:
        err_path = Path(tmp) / "stderr"
        out_path = Path(tmp) / "stdout"
        with open(err_path, "wb") as err, open(out_path, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "agent.harness.worker"],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                env=child_env,
                start_new_session=True,  # its own process group: the timeout kills compilers too
            )
            try:
                proc.stdin.write(json.dumps(job).encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                status = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return failure(
                    "timeout",
                    "harness.timeout",
                    f"the evaluation did not finish within {timeout:g} s and was killed",
                    "a kernel that never ends (a wait nobody arrives at, a loop bound that is never reached)",
                    _tail(err_path),
                )
            finally:
                _kill_group(proc)  # helpers the child left behind
        record = _record(out_path)
        if status < 0:
            name = signal.Signals(-status).name if -status in signal.Signals._value2member_map_ else str(-status)
            return failure(
                "crash", "harness.crash", f"the evaluation process died with signal {name}", log_tail=_tail(err_path)
            )
        if record is None:
            return failure(
                "crash",
                "harness.no-record",
                f"the evaluation process exited with status {status} and no result",
                log_tail=_tail(err_path),
            )
        record.setdefault("log_tail", _tail(err_path) if not record.get("ok") else "")
        return record


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _record(path: Path) -> dict[str, Any] | None:
    """The last line of the child's stdout that is a JSON record (programs may print too)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith('{"kir_record"'):
            try:
                return json.loads(line)["kir_record"]
            except (json.JSONDecodeError, KeyError):
                return None
    return None
