"""`CandidateFailed`: why a candidate could not be judged on its outputs. Raised by the
sandbox (a crash, a timeout, a process that never answered), by the checker's protocol and by
the timer; a module of its own, as all of them raise it and none of them is below the others."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kir.diagnostics import Diagnostic


class CandidateFailed(Exception):
    """The candidate could not be judged on its outputs: what stopped it, as diagnostics, and
    the stage of the record ("load", "lower", "run", "crash", "timeout", "timing")."""

    def __init__(self, stage: str, diagnostics: list[Diagnostic], log_tail: str = ""):
        super().__init__(diagnostics[0].message if diagnostics else stage)
        self.stage, self.diagnostics, self.log_tail = stage, diagnostics, log_tail
