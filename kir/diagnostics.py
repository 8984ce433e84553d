"""The one diagnostic type of the project.

The parser, the interpreter, the verifier, the lowering and the harness all report through
`Diagnostic`: a rule id, a severity, a primary span, a message, a hint (the fix), related spans
with labels, for proofs and dynamic checks a counterexample (shape values, program ids, loop
iteration, role), and where the fix is mechanical, the hint as edits of the source text. It lives in `kir/` because the parser needs it and nothing in `kir/` may
import from the packages built on top of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("error", "warning", "hint")


@dataclass(frozen=True, order=True)
class Span:
    """A range of source text; lines and columns count from 1, `end_col` is exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int
    file: str = "<input>"

    @staticmethod
    def point(line: int, col: int, file: str = "<input>") -> Span:
        return Span(line, col, line, col + 1, file)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Related:
    span: Span
    label: str


@dataclass(frozen=True)
class Edit:
    """A machine-applicable fix: the text of `span` becomes `text` (an empty span inserts)."""

    span: Span
    text: str

    def to_json(self) -> dict[str, Any]:
        s = self.span
        return {"line": s.line, "col": s.col, "end_line": s.end_line, "end_col": s.end_col, "text": self.text}


def apply_edits(source: str, edits: tuple[Edit, ...] | list[Edit]) -> str:
    """`source` with the edits made (they must not overlap); spans count lines and columns from 1."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + col - 1

    out = source
    for e in sorted(edits, key=lambda e: (e.span.line, e.span.col), reverse=True):
        a, b = offset(e.span.line, e.span.col), offset(e.span.end_line, e.span.end_col)
        out = out[:a] + e.text + out[b:]
    return out


def moved_line(line: int, edits: tuple[Edit, ...] | list[Edit]) -> int:
    """Where line `line` of a source stands once the edits are made: the lines that the edits
    above it insert or remove move it."""
    for e in edits:
        ends_at_its_start = e.span.end_line == line and e.span.end_col == 1  # inserts or deletes whole lines
        if e.span.end_line < line or ends_at_its_start:
            line += e.text.count("\n") - (e.span.end_line - e.span.line)
    return line


@dataclass(frozen=True)
class Diagnostic:
    rule: str
    severity: str
    span: Span | None
    message: str
    hint: str = ""
    related: tuple[Related, ...] = ()
    counterexample: dict[str, Any] | None = field(default=None, compare=False)
    edits: tuple[Edit, ...] = field(default=(), compare=False)  # the hint, where it is mechanical

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def sort_key(self) -> tuple:
        span = self.span or Span(0, 0, 0, 0, "")
        return (SEVERITIES.index(self.severity), span.file, span.line, span.col, self.rule)

    def to_json(self) -> dict[str, Any]:
        span = self.span
        out: dict[str, Any] = {
            "rule": self.rule,
            "severity": self.severity,
            "file": span.file if span else None,
            "line": span.line if span else None,
            "col": span.col if span else None,
            "end_line": span.end_line if span else None,
            "end_col": span.end_col if span else None,
            "message": self.message,
            "hint": self.hint,
            "related": [
                {
                    "label": r.label,
                    "file": r.span.file,
                    "line": r.span.line,
                    "col": r.span.col,
                    "end_line": r.span.end_line,
                    "end_col": r.span.end_col,
                }
                for r in self.related
            ],
        }
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample
        if self.edits:
            out["edits"] = [e.to_json() for e in self.edits]
        return out

    @staticmethod
    def from_json(data: dict[str, Any]) -> Diagnostic:
        """The inverse of `to_json` (records from a child process, stored results)."""

        def span(d: dict[str, Any]) -> Span | None:
            if d.get("line") is None:
                return None
            return Span(d["line"], d["col"], d["end_line"], d["end_col"], d.get("file") or "<input>")

        related = tuple(Related(s, r["label"]) for r in data.get("related", []) if (s := span(r)) is not None)
        edits = tuple(
            Edit(Span(e["line"], e["col"], e["end_line"], e["end_col"], data.get("file") or "<input>"), e["text"])
            for e in data.get("edits", [])
        )
        return Diagnostic(
            data["rule"], data["severity"], span(data), data["message"], data.get("hint", ""), related,
            data.get("counterexample"), edits,
        )  # fmt: skip

    def render(self, source: str | None = None) -> str:
        """rustc-style text: `FILE:LINE:COL: error[RULE]: message`, then the source line with a
        caret under the span, related spans, the counterexample and the hint."""
        head = f"{self.severity}[{self.rule}]: {self.message}"
        if self.span is None:
            lines = [head]
        else:
            lines = [f"{self.span}: {head}"]
            lines += _snippet(source, self.span, "")
        for rel in self.related:
            lines.append(f"  note: {rel.label} at {rel.span}")
            lines += _snippet(source, rel.span, "")
        if self.counterexample:
            shown = ", ".join(f"{k} = {v}" for k, v in self.counterexample.items())
            lines.append(f"  = counterexample: {shown}")
        if self.hint:
            lines.append(f"  = hint: {self.hint}")
        return "\n".join(lines)


def _snippet(source: str | None, span: Span, label: str) -> list[str]:
    if source is None:
        return []
    text_lines = source.splitlines()
    if not 1 <= span.line <= len(text_lines):
        return []
    text = text_lines[span.line - 1].expandtabs(1)
    gutter = str(span.line)
    pad = " " * len(gutter)
    end = span.end_col if span.end_line == span.line else len(text) + 1
    width = max(1, end - span.col)
    caret = " " * (span.col - 1) + "^" * width
    out = [f"{pad} |", f"{gutter} | {text}", f"{pad} | {caret}{(' ' + label) if label else ''}"]
    return out


def render_all(diagnostics: list[Diagnostic], source: str | None = None) -> str:
    return "\n\n".join(d.render(source) for d in sorted(diagnostics, key=Diagnostic.sort_key))


def to_json_text(diagnostics: list[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in sorted(diagnostics, key=Diagnostic.sort_key)], indent=2)


class KirError(Exception):
    """Raised with one or more diagnostics when a stage cannot go on."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        super().__init__("; ".join(f"{d.span}: {d.rule}: {d.message}" for d in self.diagnostics))
