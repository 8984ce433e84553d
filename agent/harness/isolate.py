"""Isolation: every job is evaluated by a checker in a child process, under a timeout.

`run_job(job, timeout)` starts the checker (`python -m agent.harness.worker`) in its own
session, sends it the job (plain JSON: see `agent.harness.worker`) on stdin and reads one JSON
record back from a pipe of its own (`--record-fd`): not from the checker's stdout, which, like
its stderr, is only a log, read with a cap. The checker starts the candidate in a third
process (`agent.harness.sandbox`), so nothing the candidate prints, patches or writes reaches
this process. Whatever happens in the children, the caller gets a record and goes on:

| what happened | record |
| --- | --- |
| the evaluation finished (correct or not) | the checker's record |
| the candidate ran past the timeout (a hang, a deadlocked kernel) | `stage = "timeout"`, rule `harness.timeout` (the checker's) |
| the checker itself ran past it (a reference that hangs) | the same, from here: the checker is told to stop, then killed with its session |
| the checker died (a signal, a reference that exits) | `stage = "crash"`, rule `harness.crash`, with the signal, or `harness.no-record` with the exit status |

A record is `{"ok", "stage", "diagnostics": [Diagnostic JSON...], "log_tail", "metrics"}`;
`log_tail` is the last lines of the candidate's output (or of the checker's when it died).
Should the checker die before it cleaned up, what is left of its candidates' uids (it announces
them on the record pipe) is killed from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any, cast

from kir.diagnostics import Diagnostic

TAIL_LINES = 40
GRACE_S = 20.0  # past the job's timeout, for the checker to kill its candidate and report
RECORD_LIMIT = 64 << 20


def failure(stage: str, rule: str, message: str, hint: str = "", log_tail: str = "") -> dict[str, Any]:
    diag = Diagnostic(rule, "error", None, message, hint)
    return {"ok": False, "stage": stage, "diagnostics": [diag.to_json()], "log_tail": log_tail, "metrics": {}}


class _Lines:
    """The record pipe, read to its end in a thread (capped)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.data = bytearray()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with open(self.fd, "rb", buffering=0) as f:
            while chunk := f.read(1 << 16):
                if len(self.data) < RECORD_LIMIT:
                    self.data += chunk

    def messages(self) -> list[dict[str, Any]]:
        found = []
        for line in self.data.decode(errors="replace").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(line)
                if isinstance(value, dict):
                    found.append(value)
        return found


def run_job(job: dict[str, Any], timeout: float = 300.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Evaluate one job in a checker process; never raises for anything the children do."""
    import math

    from agent.harness.sandbox import ROOT, TailCapture

    if not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0:
        return failure("usage", "harness.usage", f"the timeout must be a positive number of seconds, not {timeout!r}")

    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), child_env.get("PYTHONPATH", "")) if p)
    record_r, record_w = os.pipe()
    log_r, log_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent.harness.worker", "--record-fd", str(record_w)],
            stdin=subprocess.PIPE, stdout=log_w, stderr=subprocess.STDOUT, pass_fds=(record_w,), env=child_env,
            start_new_session=True,  # its own session: the timeout kills compilers too
        )  # fmt: skip
    finally:
        os.close(record_w)
        os.close(log_w)
    records = _Lines(record_r)
    log = TailCapture(log_r)
    try:
        stdin = cast(IO[bytes], proc.stdin)  # stdin=PIPE
        stdin.write(json.dumps({**job, "timeout": timeout}).encode())
        stdin.close()
    except BrokenPipeError:
        pass
    timed_out = False
    try:
        status = proc.wait(timeout=timeout + GRACE_S)
    except subprocess.TimeoutExpired:
        timed_out = True
        _stop(proc)
        status = proc.returncode
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # helpers the checker left behind
    records.thread.join(10)
    log.wait(5)
    messages = records.messages()
    for uid in {m["candidate_uid"] for m in messages if isinstance(m.get("candidate_uid"), int)}:
        _kill_uid(uid)
    for folder in {m["candidate_folder"] for m in messages if isinstance(m.get("candidate_folder"), str)}:
        _remove_folder(Path(folder))
    record = next((m["kir_record"] for m in reversed(messages) if isinstance(m.get("kir_record"), dict)), None)
    if timed_out:
        return failure(
            "timeout",
            "harness.timeout",
            f"the evaluation did not finish within {timeout:g} s and was killed",
            "a kernel that never ends (a wait nobody arrives at, a loop bound that is never reached), or a reference that hangs",
            log.tail(TAIL_LINES),
        )
    if record is None:
        if status is not None and status < 0:
            name = signal.Signals(-status).name if -status in signal.Signals._value2member_map_ else str(-status)
            return failure(
                "crash",
                "harness.crash",
                f"the evaluation process died with signal {name}",
                log_tail=log.tail(TAIL_LINES),
            )
        return failure(
            "crash",
            "harness.no-record",
            f"the evaluation process exited with status {status} and no result",
            "the task's reference may exit or crash when imported or run",
            log_tail=log.tail(TAIL_LINES),
        )
    record.setdefault("log_tail", "")
    return record


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM first (the checker kills its candidates), then SIGKILL to the whole session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _remove_folder(folder: Path) -> None:
    """A candidate's job folder its checker did not remove (only one of those: a folder named
    by `tempfile.mkdtemp(prefix="kir-candidate-")`)."""
    import shutil
    import tempfile

    if folder.parent == Path(tempfile.gettempdir()) and folder.name.startswith("kir-candidate-"):
        shutil.rmtree(folder, ignore_errors=True)


def _kill_uid(uid: int) -> None:
    """Every process of a job uid whose checker is gone (only root can, and only root made one)."""
    import fcntl

    from agent.harness.sandbox import _lock_dir, processes, release_uid

    if os.geteuid() != 0:
        return
    lock = _lock_dir() / str(uid)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: the uid belongs to a live job now
    except BlockingIOError:
        os.close(fd)
        return
    try:
        for _ in range(20):
            pids = [pid for pid, p in processes().items() if p["uid"] == uid and p["state"] not in ("Z", "X")]
            if not pids:
                break
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, sig)
    finally:
        release_uid(uid, fd)


__all__ = ["failure", "run_job"]
