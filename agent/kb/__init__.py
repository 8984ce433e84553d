"""The knowledge base: what a proposer (or a person) reads before it writes a program. The
language reference, the hardware manuals and notes (mtia-sim's manual among them), every
verifier rule's explanation and examples, every tactic's (learned ones too) and the cost model's
learned calibrations, one document a section or an item, searchable by words and by the
diagnostics, target and bottleneck at hand (docs/kb.md).

    from agent import kb
    for hit in kb.search("wait parity", rules=["sync.parity"], target="sm_90"):
        print(hit.id, hit.score, hit.snippet)
    doc = kb.show("rule/sync.parity")   # a KbError, with the nearest ids, for an unknown one

The package's modules: `doc` (the values), `tags` (what a document is about), `markdown` (a file
cut into sections), `sources` (what is indexed), `index` (SQLite FTS5, cached, and the ranking),
`cli` (`kir kb search`, `kir kb show`). Importing the package imports none of them (`kir --help`
loads `cli` alone); its names load `index` on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names below, loaded by __getattr__ on first use
    from agent.kb.doc import KINDS, Doc, Hit, KbError
    from agent.kb.index import documents, rule_ids, search, show

__all__ = ["KINDS", "Doc", "Hit", "KbError", "documents", "rule_ids", "search", "show"]


def __getattr__(name: str):
    # The index imports sqlite3 and the sources; `kir --help`, which imports `agent.kb.cli`, must
    # not pay for them (tests/cli/test_startup.py).
    if name in __all__:
        from agent.kb import index

        return getattr(index, name)
    raise AttributeError(f"module 'agent.kb' has no attribute {name!r}")
