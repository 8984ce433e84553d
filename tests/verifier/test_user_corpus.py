"""The user corpus (tests/verifier/user_corpus: bug programs written the way a user would, each
with its fixed twin) is well formed, and the verifier keeps what it has: every program recorded
as caught at its planted line (caught.txt, `benchmarks/verifier_user_corpus.py --write-caught`)
is still caught there by a rule of its family, and a good twin gets no error unless NOTES.md
lists it as a known false error. The score itself is `benchmarks/verifier_user_corpus.py`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.verifier.harness import marked

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from verifier_user_corpus import CORPUS, score_one  # noqa: E402

BAD = sorted(CORPUS.glob("*/*.bad.kir"))
CAUGHT = set((CORPUS / "caught.txt").read_text().split()) if (CORPUS / "caught.txt").exists() else set()
NOTES = (CORPUS / "NOTES.md").read_text() if (CORPUS / "NOTES.md").exists() else ""


def test_the_corpus_has_pairs():
    assert BAD, "no user corpus"
    for bad in BAD:
        assert bad.with_name(bad.name.replace(".bad.kir", ".good.kir")).exists(), bad


@pytest.mark.parametrize("bad", BAD, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_program(bad):
    text = bad.read_text()
    assert text.startswith("# bug:"), "the first line says the bug"
    marked(text)  # a planted line
    row = score_one(bad)
    assert not row["syntax"], row
    if row["file"] in CAUGHT:
        assert row["caught"], f"{row['file']} was caught at line {row['line']}; now: {row}"
    good = row["good"]
    if row["false_errors"] and good not in NOTES:
        pytest.fail(f"{good}: errors on the fixed twin: {row['false_errors']}")
