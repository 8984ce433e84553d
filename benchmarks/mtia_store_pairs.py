"""The cost model's mtia-sim ordering over what searches measured: every node of the given search
stores that ran on mtia-sim (its cycles are the simulator's) is predicted again by the cost stage
of the candidate pipeline, at the shapes of the search's preset, and per task the share of its
pairs of nodes the prediction orders as the simulator did (`pairs_right`) is reported, with the
median relative error. `benchmarks/mtia_costmodel.py` sweeps the suite's own programs; this one
scores the programs a search actually ranks: the tactics' children, learned ones included.

    python benchmarks/mtia_store_pairs.py STORE... [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.learn.tactics import task_shapes  # noqa: E402
from agent.pipeline import Candidate, evaluate  # noqa: E402
from agent.store import open_store  # noqa: E402
from costmodel.calibration import pairs_right  # noqa: E402
from kir.diagnostics import KirError  # noqa: E402
from kir.parser import parse  # noqa: E402

CLOCK_HZ = 1e9  # mtia-sim: cycles at 1 GHz


def rows_of(db: str) -> list[dict]:
    """Each mtia-sim node of a store that ran: task, cycles, and the cost model's prediction."""
    rows = []
    with open_store(db) as store:
        for s in store.searches():
            config = s.get("config") or {}
            shapes = task_shapes(s["task"], config.get("preset", "test"))
            for n in store.nodes(s["id"]):
                r = n.record
                if r is None or not r.ok or r.backend != "mtia-sim":
                    continue
                cycles = ((r.verdict or {}).get("metrics") or {}).get("cycles")
                if not cycles:
                    continue
                try:
                    program = parse(n.text, file=f"{Path(db).name}#{n.id}")
                    record = evaluate(
                        Candidate.from_program(program, dict(n.params)), until="cost", target="mtia-sim", shapes=shapes
                    )
                except KirError:
                    continue
                if not record.ok or not record.estimate:
                    continue
                rows.append(
                    {"task": s["task"], "node": n.id, "cycles": cycles, "predicted_s": record.estimate["time_s"]}
                )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stores", nargs="+")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    by_task: dict[str, list[dict]] = defaultdict(list)
    for db in args.stores:
        for row in rows_of(db):
            by_task[row["task"]].append(row)
    table = {}
    print(f"{'task':32} {'nodes':>5} {'pairs right':>11} {'median |err|':>12}")
    for task, rows in sorted(by_task.items()):
        measured = [r["cycles"] / CLOCK_HZ for r in rows]
        predicted = [r["predicted_s"] for r in rows]
        share = pairs_right(predicted, measured)
        err = statistics.median(abs(p - m) / m for p, m in zip(predicted, measured, strict=True))
        table[task] = {"nodes": len(rows), "pairs_right": share, "median_rel_err": err}
        shown = "-" if share is None else f"{share:.3f}"
        print(f"{task:32} {len(rows):5} {shown:>11} {err:11.1%}")
    shares = [t["pairs_right"] for t in table.values() if t["pairs_right"] is not None]
    if shares:
        print(f"{'mean':32} {'':5} {statistics.mean(shares):11.3f}   (lowest {min(shares):.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"stores": args.stores, "tasks": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
