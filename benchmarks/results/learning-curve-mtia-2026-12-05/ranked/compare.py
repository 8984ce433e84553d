import json, statistics, sys
sys.path.insert(0, "benchmarks"); sys.path.insert(0, ".")
from pathlib import Path
from learning_curve import trace
held = json.load(open("/tmp/lc1/summary.json"))["held_out"]
rows = []
for t in held:
    r = {"with (library order)": trace(Path(f"/tmp/lc1/with-{t}.sqlite")), "without": trace(Path(f"/tmp/lc1/without-{t}.sqlite")),
         "with (ranked)": trace(Path(f"/tmp/lc2/with-{t}.sqlite"))}
    best = min(x[-1][1] for x in r.values())
    tgt = best / 0.95
    to = {k: next((c for c, b, _ in x if b is not None and b <= tgt), 31) for k, x in r.items()}
    fails = {k: sum(1 for *_, f in x if f) for k, x in r.items()}
    rows.append((t, {k: x[-1][1] for k, x in r.items()}, to, fails, {k: len(x) for k, x in r.items()}))
lines = ["| task | best: without / library order / ranked | evals to 95%: without | library order | ranked | without / ranked |", "|---|---|---:|---:|---:|---:|"]
ratios_old, ratios_new = [], []
for t, best, to, fails, n in rows:
    ro = to["without"] / to["with (library order)"]; rn = to["without"] / to["with (ranked)"]
    ratios_old.append(ro); ratios_new.append(rn)
    lines.append(f"| {t} | {best['without']:.0f} / {best['with (library order)']:.0f} / {best['with (ranked)']:.0f} | {to['without']} | {to['with (library order)']} | {to['with (ranked)']} | {rn:.2f} |")
ranked_fail = sum(r[3]["with (ranked)"] for r in rows); ranked_n = sum(r[4]["with (ranked)"] for r in rows)
lines += ["", f"median without / library order: {statistics.median(ratios_old):.2f}; median without / ranked: {statistics.median(ratios_new):.2f}",
          f"failed at run, ranked: {ranked_fail} of {ranked_n} measured"]
print("\n".join(lines))
Path("/tmp/lc2/compare.md").write_text("\n".join(lines) + "\n")
