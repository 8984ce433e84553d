"""The knowledge base's values: a document, a search hit, and the error of a question it cannot
answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# What a document is: a section of the language reference, of a hardware manual or note, of the
# targets' guide (docs/targets.md); a verifier rule, a tactic, a learned calibration.
KINDS = ("language", "hardware", "targets", "rule", "tactic", "calibration")


@dataclass(frozen=True)
class Doc:
    """One document: `id` is `<kind>/<name>` (`language/7-memory-accesses`, `rule/sync.parity`,
    `hardware/mtia-sim/3-3-the-dma-counter`); `source` where its text comes from (a file and
    line, or a file)."""

    id: str
    kind: str
    title: str
    text: str
    tags: tuple[str, ...] = ()
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "source": self.source,
            "tags": list(self.tags),
            "text": self.text,
        }


@dataclass(frozen=True)
class Hit:
    """A document a search found: its `score` (its words' relevance, 0..1 of the best match, times
    the boosts of its tags; 0 when it was found by its tags alone), a `snippet` of its text around
    the words asked for (marked `**like this**`), and the tags that raised it (`boosts`)."""

    doc: Doc
    score: float
    snippet: str
    boosts: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.doc.id

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.doc.id,
            "kind": self.doc.kind,
            "title": self.doc.title,
            "score": round(self.score, 4),
            "snippet": self.snippet,
            "boosts": list(self.boosts),
            "tags": list(self.doc.tags),
            "source": self.doc.source,
        }


class KbError(Exception):
    """A question the knowledge base cannot answer (an unknown document, kind, target or
    bottleneck), with a `message` and a `hint` as a diagnostic has them."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def shown(text: str, width: int = 60) -> str:
    """A name or a query as a message quotes it: on one line (control characters escaped), cut
    short, in single quotes."""
    printable = text if text.isprintable() else repr(text)[1:-1]
    return "'" + (printable if len(printable) <= width else printable[: width - 3] + "...") + "'"
