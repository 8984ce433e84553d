"""The verifier on the user corpus (tests/verifier/user_corpus/<family>/NAME.bad.kir and its fixed
twin NAME.good.kir): bug programs written the way a user would, not from the rules. For each bad
program: caught at its planted line (`# <-`) by a rule of its folder's family, caught elsewhere or
by another family, or missed; for a caught bounds or synchronization error, whether it carries a
counterexample. For each good twin: any error is a false error. Hints: how many diagnostics of
the bad program give one, how many of those are edits (`Diagnostic.edits`), and whether the edits
of the diagnostic at the planted line, applied, leave a program with no error at all (the hint
fixes the bug, not only its own report).

    python benchmarks/verifier_user_corpus.py [--json OUT] [--write-caught]

--write-caught records the programs caught at their line in tests/verifier/user_corpus/caught.txt,
which tests/verifier/test_user_corpus.py holds the verifier to (a program caught stays caught).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kir.diagnostics import apply_edits  # noqa: E402
from tests.verifier.harness import diagnose, marked  # noqa: E402

CORPUS = ROOT / "tests" / "verifier" / "user_corpus"
COUNTEREXAMPLE_FAMILIES = ("bounds", "sync")


def family_of(rule: str) -> str:
    return rule.split(".", 1)[0]


def score_one(bad: Path) -> dict:
    family = bad.parent.name
    text = bad.read_text()
    line, _ = marked(text)
    diags = diagnose(text, file=bad.name)
    good_path = bad.with_name(bad.name.replace(".bad.kir", ".good.kir"))
    good_diags = diagnose(good_path.read_text(), file=good_path.name) if good_path.exists() else []
    at_line = [d for d in diags if d.span is not None and d.span.line == line and d.severity in ("error", "warning")]
    right = [d for d in at_line if family_of(d.rule) == family]
    anywhere = [d for d in diags if d.severity in ("error", "warning")]
    hinted = [d for d in diags if d.hint]
    fix = next((d.edits for d in right if d.edits), ())
    fixed = bool(fix) and not any(d.is_error for d in diagnose(apply_edits(text, fix), file=bad.name))
    return {
        "file": str(bad.relative_to(CORPUS)),
        "family": family,
        "line": line,
        "caught": bool(right),
        "rule": right[0].rule if right else None,
        "counterexample": bool(right) and any(d.counterexample is not None for d in right),
        "at_line_other_family": [d.rule for d in at_line if family_of(d.rule) != family],
        "elsewhere": sorted({f"{d.rule}@{d.span.line if d.span else '?'}" for d in anywhere if d not in at_line}),
        "syntax": [d.rule for d in diags if d.rule.startswith("syntax.")],
        "good": str(good_path.relative_to(CORPUS)) if good_path.exists() else None,
        "false_errors": [f"{d.rule}@{d.span.line if d.span else '?'}" for d in good_diags if d.is_error],
        "hints": len(hinted),
        "hints_with_edits": sum(1 for d in hinted if d.edits),
        "fixed_by_hint": fixed,
    }


def score(corpus: Path = CORPUS) -> dict:
    rows = [score_one(p) for p in sorted(corpus.glob("*/*.bad.kir"))]
    by_family: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        f = by_family[r["family"]]
        f["programs"] += 1
        f["caught"] += r["caught"]
        f["with_counterexample"] += r["counterexample"]
        f["false_errors"] += bool(r["false_errors"])
        f["fixed_by_hint"] += r["fixed_by_hint"]
    caught = [r for r in rows if r["caught"]]
    needs = [r for r in caught if r["family"] in COUNTEREXAMPLE_FAMILIES]
    return {
        "programs": len(rows),
        "caught": len(caught),
        "caught_share": len(caught) / len(rows) if rows else None,
        "bounds_sync_caught": len(needs),
        "bounds_sync_with_counterexample": sum(r["counterexample"] for r in needs),
        "good_twins": sum(1 for r in rows if r["good"]),
        "good_twins_with_false_errors": sum(1 for r in rows if r["false_errors"]),
        "hints": sum(r["hints"] for r in rows),
        "hints_with_edits": sum(r["hints_with_edits"] for r in rows),
        "fixed_by_hint": sum(r["fixed_by_hint"] for r in rows),
        "families": {k: dict(v) for k, v in sorted(by_family.items())},
        "rows": rows,
    }


def table(result: dict) -> str:
    lines = [
        "| family | programs | caught at the line, right family | with counterexample | good twins with a false error | fixed by the hint at the line |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, f in result["families"].items():
        cx = str(f["with_counterexample"]) if name in COUNTEREXAMPLE_FAMILIES else "-"
        lines.append(
            f"| {name} | {f['programs']} | {f['caught']} | {cx} | {f['false_errors']} | {f['fixed_by_hint']} |"
        )
    share = result["caught_share"]
    lines.append(
        f"| **all** | {result['programs']} | {result['caught']} ({share:.0%}) | "
        f"{result['bounds_sync_with_counterexample']} of {result['bounds_sync_caught']} | "
        f"{result['good_twins_with_false_errors']} | {result['fixed_by_hint']} |"
        if share is not None
        else "| **all** | 0 | - | - | - | - |"
    )
    lines += ["", f"Hints: {result['hints']}, of which {result['hints_with_edits']} are edits."]
    misses = [r for r in result["rows"] if not r["caught"]]
    if misses:
        lines += ["", "Missed or caught elsewhere:"]
        for r in misses:
            said = ", ".join(r["at_line_other_family"] + r["elsewhere"]) or "nothing"
            lines.append(f"- {r['file']} (line {r['line']}): {said}")
    false = [r for r in result["rows"] if r["false_errors"]]
    if false:
        lines += ["", "False errors on good twins:"]
        lines += [f"- {r['good']}: {', '.join(r['false_errors'])}" for r in false]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--write-caught", action="store_true")
    args = ap.parse_args()
    result = score()
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    if args.write_caught:
        caught = sorted(r["file"] for r in result["rows"] if r["caught"])
        (CORPUS / "caught.txt").write_text("".join(f"{c}\n" for c in caught))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
