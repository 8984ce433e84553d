"""docs/learned-rules.md is the learned-rule format's reference: its example must be a rule that
reads and vets clean, and its tables must name exactly what the reader of rule files accepts."""

from __future__ import annotations

import re
from pathlib import Path

from verifier import learned

DOC = (Path(__file__).resolve().parents[2] / "docs" / "learned-rules.md").read_text()


def _row(first_cell: str) -> set[str]:
    """The backquoted names in the second cell of the table row that starts with `first_cell`."""
    line = next(ln for ln in DOC.splitlines() if ln.startswith(f"| {first_cell} |"))
    return set(re.findall(r"`([a-z_]+)`", line.split("|")[2]))


def test_the_documented_example_reads_and_vets_clean():
    text = re.search(r"```toml\n(.*?)```", DOC, re.S).group(1)
    rule, problems = learned.parse_rule(text, "docs/learned-rules.md")
    assert problems == [] and rule is not None
    assert learned.vet(rule) == []


def test_the_documented_keys_are_the_schema():
    assert _row("top level") == learned._TOP
    assert _row("`[examples]`") == learned._EXAMPLES
    assert _row("`[provenance]`") == learned._PROVENANCE
    assert _row("`[fix]`") == set(learned._FIX) | {"by"}
    assert "| all but `hint` and `fix` |" in DOC and set(learned._REQUIRED) == learned._TOP - {"hint", "fix"}


def test_the_documented_comparators_and_subjects_are_the_matcher_s():
    rows = [ln for ln in DOC.split("## Conditions")[1].split("## Subjects")[0].splitlines() if ln.startswith("| `")]
    documented = {name for ln in rows for name in re.findall(r"`([a-z_]+)`", ln.split("|")[1])}
    assert documented == set(learned.COMPARATORS)
    subjects_part = DOC.split("## Subjects under `[match]`")[1].split("## Placeholders")[0]
    subjects = {
        name
        for ln in subjects_part.splitlines()
        if ln.startswith("| `")
        for name in re.findall(r"`([a-z_]+)`", ln.split("|")[1])
    }
    assert subjects == learned._MATCH
    for keys in (learned._VALUE_KEYS, learned._ROLE_KEYS, learned._KERNEL_KEYS, set(learned.KINDS)):
        assert all(f"{k}" in subjects_part for k in keys)
