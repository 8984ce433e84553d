"""`kir learn DB... --rules | --tactics [--dry-run] [--out DIR]`: mine the search stores for
recurring failures and keep the verifier rules that pass the gate (agent.learn.mine), or for
recurring winning moves and keep the learned tactics that pass theirs (agent.learn.tactics);
`kir rules learned [--db DB...]`: the learned rules, with how many stored candidates each has
stopped.

Start-up: typer and `kir.cli` only; the stores, the verifier and the miner load inside the verb.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from kir import cli as kcli
from kir.cli import SCHEMAS, JsonOpt, _finish, _guarded, envelope, usage
from verifier import cli as verifier_cli

SCHEMAS["learn"] = (
    "dbs", "out", "dry_run", "failures", "groups", "rules", "tactics", "library", "calibrations", "retired",
)  # fmt: skip


def learn_cmd(
    dbs: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="DB...",
            help="Search stores (SQLite files) to learn from; for --calibrate, measured sweeps (.json) too.",
            show_default=False,
        ),
    ] = None,
    rules: Annotated[bool, typer.Option("--rules", help="Mine failures into verifier rules.")] = False,
    tactics: Annotated[
        bool, typer.Option("--tactics", help="Mine the best paths into learned tactics (gated on mtia-sim).")
    ] = False,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="Refit the cost model's per-target factors to the measured GPU times (gated leave-one-task-out).",
        ),
    ] = False,
    retire: Annotated[
        str | None,
        typer.Option(
            "--retire",
            metavar="ID",
            help="Undo one learned item by id: a rule (learned.*), a tactic (learned.*) or a calibration (calibration.*).",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would be promoted and why; write nothing.")
    ] = False,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            "-o",
            metavar="DIR",
            help="Where kept rules or tactics go (default: verifier/rules/learned or $KIR_LEARNED_DIR; tactics/learned or $KIR_LEARNED_TACTICS).",
            show_default=False,
        ),
    ] = None,
    min_programs: Annotated[
        int, typer.Option("--min-programs", min=2, max=1000, help="Distinct failing programs a rule needs.")
    ] = 3,
    min_tasks: Annotated[int, typer.Option("--min-tasks", min=1, max=1000, help="Tasks they come from.")] = 2,
    json_out: JsonOpt = False,
) -> None:
    """Learn from search stores: with --rules, group the candidates that passed the verifier and
    then failed, propose a rule for each group that recurs, and keep the rules that flag every
    failure of their group and no known-correct program; with --tactics, mine the move
    sequences that recur on the best paths and keep those that help on tasks they were not
    mined from (measured on mtia-sim); with --calibrate, refit the cost model to the measured
    GPU times and keep the fit if it orders pairs of programs no worse out of sample. --retire ID
    undoes one learned item."""

    def body(outcome) -> None:
        if retire is not None:
            if dbs or rules or tactics or calibrate:
                raise usage("--retire with something to learn", "retire one item, alone: kir learn --retire ID")
            _retire(outcome, retire, dry_run)
            return
        if not rules and not tactics and not calibrate:
            raise usage("nothing to learn: say what", "kir learn DB --rules, --tactics or --calibrate")
        if sum((rules, tactics, calibrate)) > 1 and out:
            raise usage(
                "--out with more than one of --rules, --tactics and --calibrate",
                "learn them one at a time, each into its folder",
            )
        if not dbs:
            raise usage("no store to learn from", "kir learn DB... (search stores: kir search --db)")
        for db in dbs:
            if not Path(db).is_file():
                raise usage(f"{db} is not a file", "a search store (kir search --db)", rule="io.read")
        if out and Path(out).exists() and not Path(out).is_dir():
            raise usage(f"--out {out} is not a folder", "the folder kept rules or tactics go to", rule="io.write")
        outcome.fields.update(dbs=dbs, dry_run=dry_run)
        if tactics:
            _learn_tactics(outcome, dbs, Path(out) if out else None, min_tasks, dry_run)
        if rules:
            _learn_rules(outcome, dbs, Path(out) if out else None, min_programs, min_tasks, dry_run)
        if calibrate:
            _learn_calibration(outcome, dbs, Path(out) if out else None, dry_run)

    _finish(_guarded(None, body, "learning"), json_out, "learn")


def _learn_tactics(outcome, dbs: list[str], out: Path | None, min_tasks: int, dry_run: bool) -> None:
    from agent.learn import tactics as lt
    from agent.store import StoreError

    folder = out or lt.library_dir()
    try:
        paths = lt.best_paths(dbs)
        found = lt.mine_tactics(paths, min_tasks=max(2, min_tasks))
        library = lt.load(folder)
        lt.records(library, dbs)
    except StoreError as err:
        raise usage(f"a store does not open: {err}", "a search store (kir search --db)") from None
    from agent.tasks import task_names

    suite = task_names()  # the suite's and $KIR_TASK_PATH's
    known = {t.name for t in library}
    rows = []
    outcome.lines.append(
        f"{len(paths)} best paths; {len(found)} move sequences recur on {max(2, min_tasks)} tasks or more"
    )
    for t in found:
        if t.name in known:
            rows.append(
                {"name": t.name, "steps": t.describe(), "kept": True, "reasons": ["in the library already"], "gate": {}}
            )
            continue
        reasons = []
        if t.backend != "mtia-sim":
            reasons.append(f"mined on {t.backend or 'an unknown backend'}: the gate measures on mtia-sim only here")
        elif not lt.gate_tactic(t, [x for x in suite if x not in t.mined_from]):
            reasons.append(
                "does not help on the held-out tasks it applies to" if t.gate else "applies to no held-out task"
            )
        rows.append({"name": t.name, "steps": t.describe(), "kept": not reasons, "reasons": reasons, "gate": t.gate})
        speedups = ", ".join(f"{k} {v['speedup']:.2f}x" for k, v in sorted(t.gate.items()))
        verdict = ("would keep" if dry_run else "kept") if not reasons else "not kept: " + "; ".join(reasons)
        outcome.lines.append(f"  {t.name} = {t.describe()} (from {', '.join(t.mined_from)}): {verdict}")
        if speedups:
            outcome.lines.append(f"    held out: {speedups}")
        if not reasons and not dry_run:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{t.name}.toml").write_text(t.to_toml(), encoding="utf-8")
    for t in library:  # the library's record, brought up to date from these stores
        outcome.lines.append(f"  {t.name}: proposed {t.proposed}, won {t.won} in these stores")
        if not dry_run and t.path is not None:
            t.path.write_text(t.to_toml(), encoding="utf-8")
    outcome.fields["tactics"] = rows
    outcome.fields["library"] = [{"name": t.name, "proposed": t.proposed, "won": t.won} for t in library]
    outcome.fields.setdefault("out", str(folder))


def _learn_rules(outcome, dbs: list[str], out: Path | None, min_programs: int, min_tasks: int, dry_run: bool) -> None:
    from agent.learn.mine import mine
    from agent.store import StoreError
    from verifier.learned import install_dir

    folder = out or install_dir()
    if folder.exists() and not folder.is_dir():
        raise usage(f"--out {folder} is not a folder", "the folder kept rules go to", rule="io.write")
    if not dry_run:
        folder.mkdir(parents=True, exist_ok=True)
    try:
        groups, proposed = mine(dbs, folder, min_programs=min_programs, min_tasks=min_tasks, dry_run=dry_run)
    except StoreError as err:
        raise usage(f"a store does not open: {err}", "a search store (kir search --db)") from None
    total = sum(len(g.members) + g.caught_candidates for g in groups)
    caught = sum(g.caught_candidates for g in groups)
    outcome.fields.update(
        out=str(folder), failures=total,
        groups=[
            {
                "signature": list(g.signature), "programs": g.programs, "tasks": g.tasks, "candidates": len(g.members),
                "caught": g.caught,
            }
            for g in groups
        ],
        rules=[
            {
                "group": list(p.group.signature), "where": [[".".join(k), v] for k, v in p.group.refined],
                "programs": p.group.programs, "tasks": p.group.tasks,
                "name": p.name, "kept": not p.reasons, "reasons": p.reasons,
                "checked": p.checked, "seconds": round(p.seconds, 3),
            }
            for p in proposed
        ],
    )  # fmt: skip
    outcome.lines.append(
        f"{total} candidates passed the verifier and failed, in {len(groups)} groups; {caught} of them are caught "
        f"by learned rules now; {len(proposed)} groups recur (at least {min_programs} programs from {min_tasks} tasks)"
    )
    for g in groups:
        if g.caught:
            left = f"; {g.programs} programs left" if g.members else ""
            outcome.lines.append(f"  {g.describe()}: caught already by {', '.join(g.caught)}{left}")
    for p in proposed:
        g = p.group
        head = f"  {g.describe()} ({g.programs} programs, {g.tasks} tasks): "
        if p.reasons:
            outcome.lines.append(head + "not kept: " + "; ".join(p.reasons))
        else:
            kept = "would keep" if dry_run else f"kept as learned.{p.name}"
            outcome.lines.append(head + f"{kept} (clean on {p.checked} known-correct programs)")


def _learn_calibration(outcome, dbs: list[str], out: Path | None, dry_run: bool) -> None:
    from agent.learn import calibrate as lc
    from agent.store import StoreError

    try:
        found = lc.measurements(dbs)
    except StoreError as err:
        raise usage(f"a store does not open: {err}", "a search store (kir search --db)") from None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise usage(
            f"a measured sweep does not read: {err}", "the JSON benchmarks/costmodel_variants.py time writes",
            rule="io.read",
        ) from None  # fmt: skip
    fits = lc.fit(found, progress=lambda line: print(line, file=sys.stderr, flush=True), inputs=dbs)
    outcome.lines.append(
        f"{len(found)} GPU measurements of {len({m.task for m in found})} tasks on {len(fits)} target(s)"
    )
    rows = []
    for f in fits:
        s = f.summary
        path = str(lc.keep(f, out)) if f.kept and not dry_run else None
        verdict = ("would keep" if dry_run else f"kept as {f.id}") if f.kept else "nothing kept"
        outcome.lines.append(f"  {f.target}: {f.measurements} measurements ({f.skipped} not counted): {verdict}")
        if s:
            for what, new, old in (
                ("with compile reports, factors", "calibrated", "uncalibrated"),
                ("before compile, factors and learned correction", "before_corrected", "before_calibrated"),
            ):
                outcome.lines.append(
                    f"    {what}: pairs ordered right leaving one task out {s[f'mean_pairs_right_{new}']:.3f} mean, "
                    f"{s[f'min_pairs_right_{new}']:.3f} lowest (without: {s[f'mean_pairs_right_{old}']:.3f}, "
                    f"{s[f'min_pairs_right_{old}']:.3f}); median error {s[f'median_abs_err_{new}']:.3f} "
                    f"(without: {s[f'median_abs_err_{old}']:.3f})"
                )
        factors = ", ".join(f"{k} {v:.3g}" for k, v in sorted(f.factors.items()) if v != 1.0) or "all 1"
        outcome.lines.append(f"    factors ({factors}): " + ("; ".join(f.reasons) or "kept"))
        outcome.lines.append("    learned correction: " + ("; ".join(f.correction_reasons) or "kept"))
        rows.append({"id": f.id, "kept": f.kept, "file": path, **f.to_json()})
    outcome.fields["calibrations"] = rows


def _retire(outcome, ident: str, dry_run: bool) -> None:
    """Remove one learned item: a learned rule and its failure files, a learned tactic's file,
    a learned calibration's file."""
    from agent.learn import tactics as lt
    from costmodel import calibration
    from verifier.learned import LOADED, retire

    verifier_cli._rule_catalog()
    tactics = {t.name: t.path for t in lt.load()}
    calibrations = calibration.learned()
    if ident in LOADED:  # the rule's file and its failing programs
        files = [str(LOADED[ident].path)] if dry_run else [str(p) for p in retire(ident)]
    elif ident in tactics or ident in calibrations:
        path = tactics[ident] if ident in tactics else calibrations[ident].path
        files = [str(path)]
        if path is not None and not dry_run:
            path.unlink()
    else:
        known = [*sorted(LOADED), *tactics, *sorted(calibrations)]
        raise usage(
            f"no learned item '{ident}'", kcli._suggest(ident, known) or "learned: " + (", ".join(known) or "none")
        )
    outcome.fields["retired"] = {"id": ident, "files": files, "dry_run": dry_run}
    outcome.lines.append(f"{ident}: {'would retire' if dry_run else 'retired'} ({', '.join(files)})")


def rules_learned(
    db: Annotated[
        list[str] | None,
        typer.Option(
            "--db",
            metavar="PATH",
            help="Search stores to count each rule's firings in: candidates it stopped (repeatable).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """List the learned rules: id, severity, support, where they came from, and (with --db) how
    many stored candidates each has stopped since."""
    verifier_cli._rule_catalog()
    from verifier.learned import LOAD_ERRORS, LOADED

    fired: dict[str, int] = {}
    for path in db or []:
        if not Path(path).is_file():
            verifier_cli._usage_exit(
                f"--db {path} is not a file", "a search store (kir search --db)", json_out, "rules learned"
            )
        from agent.store import StoreError, open_store

        try:
            with open_store(path) as store:
                for s in store.searches():
                    for n in store.nodes(s["id"]):
                        for rid in {d.rule for d in (n.record.diagnostics if n.record else ())}:
                            if rid in LOADED:
                                fired[rid] = fired.get(rid, 0) + 1
        except StoreError as err:
            verifier_cli._usage_exit(
                f"--db {path}: {err}", "a search store (kir search --db)", json_out, "rules learned"
            )
    rows = []
    for rid, lr in sorted(LOADED.items()):
        p = lr.provenance
        rows.append(
            {
                "id": rid, "severity": lr.rule.severity, "support": p.support, "failures": len(p.failures),
                "false_positives": p.false_positives, "added": p.added, "author": p.author, "reason": p.reason,
                "fired": fired.get(rid, 0) if db else None, "file": str(lr.path or ""),
            }
        )  # fmt: skip
    if json_out:
        kcli._emit(
            json.dumps(envelope("rules learned", None, list(LOAD_ERRORS), {"ok": True, "rules": rows}), indent=2)
        )
        return
    if not rows:
        kcli._emit("no learned rules (kir learn DB --rules mines them from search stores)")
    for r in rows:
        fired_text = f", fired {r['fired']}" if r["fired"] is not None else ""
        kcli._emit(
            f"{r['id']} ({r['severity']}): support {r['support']}{fired_text}, added {r['added'] or '-'} by {r['author'] or '-'}"
        )
        kcli._emit(f"  {r['reason']}")
    if LOAD_ERRORS:
        kcli._emit("\nlearned-rule files that did not load:\n" + "\n".join(d.render() for d in LOAD_ERRORS))


def register(app: typer.Typer) -> None:
    """Mount `kir learn` on the `kir` group, and `kir rules learned` on `kir rules`."""
    app.command("learn")(learn_cmd)
    verifier_cli.rules_app.command("learned")(rules_learned)
