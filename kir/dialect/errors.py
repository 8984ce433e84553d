"""The exception op verifiers raise: an xdsl `VerifyException` that also names the rule it
breaks and, when there is one, the fix. The parser and the builder turn it into a diagnostic
with that rule id at the op's span."""

from __future__ import annotations

from xdsl.utils.exceptions import VerifyException


class RuleViolation(VerifyException):
    def __init__(self, message: str, rule: str = "types.error", hint: str = "", at: object = None):
        super().__init__(message)
        self.rule = rule
        self.hint = hint
        # Another op to blame, where the fix is there and not at the op that fails (a reduction
        # over the wrong axis whose result a store then refuses): the diagnostic points at it,
        # the failing op's span a related note.
        self.at = at
