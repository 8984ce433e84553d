"""The Record of a job whose evaluation did not come back (it hung past its timeout, its
process died): stage "run", not ok, one located-nowhere error saying what happened."""

from __future__ import annotations

from agent.execute.base import Job
from agent.pipeline import Record
from kir.diagnostics import Diagnostic


def failed_record(job: Job, rule: str, message: str, hint: str = "") -> Record:
    return Record(
        candidate=job.key,
        file=f"<{job.key[:12]}>",
        stage="run",
        ok=False,
        until="run",
        backend=job.backend,
        preset=job.preset,
        params=job.params,
        diagnostics=(Diagnostic(rule, "error", None, message, hint),),
        verdict={"ok": False, "stage": "executor"},
    )
