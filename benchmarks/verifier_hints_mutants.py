"""The verifier's hints on programs no corpus holds: every mutant of every suite and example
program (the mutation proposer's slips: a shifted index, a `<=` bound, a loop one trip long, a
dropped wait or barrier, a flipped parity, an arrive count off by one, a bf16 round trip).

For each mutant the verifier checks (its target as the program declares it), the script counts
the diagnostics, those with a hint, and those whose hint is edits (`Diagnostic.edits`); it
applies every edit-hint and checks it as `tests/verifier/test_hints_apply.py` does: the
diagnostic is gone from its line (moved by what the edit inserts or removes) and no error
appears that the mutant did not have. A hint in words only, or an edit that fails that check,
is listed.

    python benchmarks/verifier_hints_mutants.py [--jobs 2] [--json OUT] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.propose.mutate import mutants  # noqa: E402
from kir.diagnostics import KirError, apply_edits, moved_line  # noqa: E402
from kir.parser import parse  # noqa: E402
from tests.verifier.harness import diagnose  # noqa: E402


def programs() -> list[Path]:
    return sorted((ROOT / "benchmarks" / "tasks").glob("*/*.kir")) + sorted((ROOT / "examples").glob("*.kir"))


def score_program(path: Path) -> dict:
    name = str(path.relative_to(ROOT))
    out: dict = {"program": name, "mutants": 0, "caught": 0, "kinds": Counter(), "diagnostics": 0, "hints": 0}
    out.update({"edits": 0, "edits_hold": 0, "prose": [], "failed": []})
    try:
        program = parse(path.read_text(), file=name)
    except KirError:
        return out
    if program.is_multi:
        return out
    for move, child in mutants(program):
        text = child.source or child.text()
        out["mutants"] += 1
        out["kinds"][move.name] += 1
        diags = diagnose(text, name)
        out["caught"] += any(d.is_error for d in diags)
        had = {(d.rule, d.span.line if d.span else 0) for d in diags if d.is_error}
        for d in diags:
            out["diagnostics"] += 1
            if not d.hint:
                continue
            out["hints"] += 1
            where = f"{name} [{move.name} {dict(move.params).get('site')}]:{d.span.line if d.span else 0}: {d.rule}"
            if not d.edits:
                out["prose"].append(f"{where}: {d.hint}")
                continue
            out["edits"] += 1
            after = diagnose(apply_edits(text, d.edits), name)
            line = moved_line(d.span.line if d.span else 0, d.edits)
            gone = (d.rule, line) not in {(a.rule, a.span.line if a.span else 0) for a in after}
            moved = {(r, moved_line(n, d.edits)) for r, n in had}
            new = {(a.rule, a.span.line if a.span else 0) for a in after if a.is_error} - moved
            if gone and not new:
                out["edits_hold"] += 1
            else:
                out["failed"].append(f"{where}: {'still there' if not gone else 'new ' + str(sorted(new))}")
    out["kinds"] = dict(out["kinds"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="only the first N programs")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    paths = programs()[: args.limit or None]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(score_program, paths))
    total = {k: sum(r[k] for r in rows) for k in ("mutants", "caught", "diagnostics", "hints", "edits", "edits_hold")}
    prose = [p for r in rows for p in r["prose"]]
    failed = [f for r in rows for f in r["failed"]]
    kinds: Counter = Counter()
    for r in rows:
        kinds.update(r["kinds"])
    print(
        f"{len(paths)} programs, {total['mutants']} mutants ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})"
    )
    print(f"mutants with an error: {total['caught']}")
    print(f"diagnostics: {total['diagnostics']}, with a hint: {total['hints']}, of which edits: {total['edits']}")
    print(f"edits that remove their error and add none: {total['edits_hold']} of {total['edits']}")
    print(f"hints in words only: {len(prose)}")
    for p in prose:
        print(f"  {p}")
    print(f"edits that fail: {len(failed)}")
    for f in failed:
        print(f"  {f}")
    print(f"{time.perf_counter() - start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"total": total, "kinds": dict(kinds), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
