"""`kir seed` and `kir solve`: from a KernelBench problem file to a seed, and to a solution.

    kir seed PROBLEM.py [--out DIR] [--json]
    kir solve PROBLEM.py [--budget N] [--seconds S] [--out solution.py] [--work DIR]
                         [--backend B] [--preset P] [--json]

`seed` prints the seed KIR program the frontend makes for the file (`--out DIR`: the task folder
too: reference.py, task.toml, seed.kir), or the located diagnostic of what it cannot translate.
`solve` makes the task folder (under `--work`, default `build/solve/<problem>`), searches from
the seed (`kir search`: beam, on the GPU with Triton at the file's own sizes where there is one,
else Triton's interpreter at the scaled `test` preset), writes the best program as a KernelBench
`ModelNew` file (`--out`, default `<problem>_solution.py` beside the work folder's task) and
checks that file against the problem with the harness.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kir.cli import SCHEMAS, BackendOpt, JsonOpt, PresetOpt, TimeoutOpt, _finish, _guarded, _one_of, _writable, usage
from kir.diagnostics import Diagnostic, KirError

SCHEMAS["seed"] = ("problem", "form", "kernel", "text", "bind", "notes", "folder")
SCHEMAS["solve"] = ("problem", "folder", "search", "solution", "check")
ROOT = Path(__file__).resolve().parents[2]

ProblemArg = Annotated[str, typer.Argument(metavar="PROBLEM", help="A problem file in the KernelBench format (.py).")]
PRESETS = ("test", "bench", "default")  # the frontend's task folders have these, and scale:F


def _problem(path: str) -> None:
    """Refuse, before any work, what is not a problem file."""
    from kir.check import MAX_SOURCE_BYTES

    p = Path(path)
    if not p.exists():
        raise usage(f"no problem file {path}", "a .py file in the KernelBench format", "io.read")
    if not p.is_file():
        raise usage(f"{path} is not a file", "a .py file in the KernelBench format", "io.read")
    if p.suffix != ".py":
        raise usage(f"{path} is not a Python file", "a .py file in the KernelBench format", "io.read")
    if p.stat().st_size > MAX_SOURCE_BYTES:
        raise usage(f"{path} is larger than {MAX_SOURCE_BYTES} bytes", rule="io.read")


def _folder(path: str | None, flag: str) -> None:
    if path is not None and Path(path).exists() and not Path(path).is_dir():
        raise usage(f"{flag} {path}: it is there and is not a folder", rule="io.write")


def seed_cmd(
    problem: ProblemArg,
    out: Annotated[
        str | None,
        typer.Option("--out", "-o", metavar="DIR", help="Write the task folder (reference.py, task.toml, seed.kir)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """The seed KIR program of a PyTorch problem file (torch.fx, agent/frontend), or the line of
    the op it cannot translate."""
    from agent.frontend.make import seed_of, seed_task

    def body(outcome) -> None:
        _problem(problem)
        _folder(out, "--out")
        outcome.source = Path(problem).read_text(errors="replace")
        made = seed_task(problem, out) if out else seed_of(problem)
        seed = made.seed
        outcome.fields.update(
            problem=problem, form=seed.form, kernel=seed.name, text=seed.text,
            bind={a.name: a.source for a in seed.args}, notes=seed.notes, folder=str(made.folder) if made.folder else None,
        )  # fmt: skip
        outcome.text = seed.text
        outcome.lines += [f"# note: {n}" for n in seed.notes]
        if made.folder:
            outcome.lines.append(f"# the task folder: {made.folder}")

    _finish(_guarded(problem, body, "making the seed"), json_out, "seed")


def solve_cmd(
    problem: ProblemArg,
    budget: Annotated[int, typer.Option("--budget", min=1, help="Measured evaluations of the search at most.")] = 50,
    seconds: Annotated[
        float | None, typer.Option("--seconds", min=1.0, help="The search's wall seconds at most.")
    ] = None,
    out: Annotated[str | None, typer.Option("--out", "-o", metavar="FILE", help="The solution file to write.")] = None,
    work: Annotated[
        str | None, typer.Option("--work", metavar="DIR", help="Where the task folder and the store go.")
    ] = None,
    backend: BackendOpt = None,
    preset: PresetOpt = None,
    timeout: TimeoutOpt = 600.0,
    json_out: JsonOpt = False,
) -> None:
    """Frontend, search, and the best program written back as a KernelBench `ModelNew` file,
    checked against the problem."""
    from agent.frontend.make import seed_task
    from agent.frontend.solution import write_solution
    from agent.harness.isolate import run_job
    from kir.parser import parse

    def body(outcome) -> None:
        from agent.tasks.task import SCALE_PREFIX
        from lowering import targets as registry

        _problem(problem)
        _folder(work, "--work")
        if out is not None:
            _writable(out)
        if backend is not None:
            _one_of("backend", backend, tuple(registry.runtimes()), "cli.backend", " for kir solve")
        if preset is not None and preset not in PRESETS:
            try:
                factor = float(preset.removeprefix(SCALE_PREFIX)) if preset.startswith(SCALE_PREFIX) else 0.0
            except ValueError:
                factor = 0.0
            if not 0 < factor <= 1:
                raise usage(f"no preset `{preset}`", f"one of {', '.join(PRESETS)}, or scale:F", "cli.preset")
        outcome.source = Path(problem).read_text(errors="replace")
        import torch

        gpu = torch.cuda.is_available()
        chosen_backend = backend or ("triton" if gpu else "triton-interp")
        chosen_preset = preset or ("bench" if gpu else "test")
        stem = Path(problem).stem
        folder = Path(work) if work else ROOT / "build" / "solve" / stem
        made = seed_task(problem, folder / "task")
        db = folder / "search.sqlite"
        if db.exists():
            db.unlink()
        cmd = [
            sys.executable, "-m", "agent.cli", "search", str(folder / "task"), "--backend", chosen_backend,
            "--preset", chosen_preset, "--budget", str(budget), "--db", str(db), "--timeout", str(timeout),
            "--peers", "none", "--json",  # the solution is timed beside the peers below
        ]  # fmt: skip
        if seconds:
            cmd += ["--seconds", str(seconds)]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        try:
            found = json.loads(done.stdout)
        except ValueError:
            raise KirError(
                Diagnostic("solve.search", "error", None, f"the search failed: {done.stderr.strip()[-500:]}")
            ) from None
        best = found.get("best") or _checked_seed(db)  # a CPU backend times nothing: the seed, checked
        if not found.get("ok", True) or not best:
            diags = found.get("diagnostics") or []
            why = "; ".join(d.get("message", "") for d in diags)[:500] or "no program passed"
            raise KirError(Diagnostic("solve.search", "error", None, f"the search found no correct program: {why}"))
        program = parse(best["text"], str(folder / "best.kir"))
        (folder / "best.kir").write_text(best["text"])
        target = Path(out) if out else folder / f"{stem}_solution.py"
        write_solution(made.task, program, Path(problem), target)
        job: dict[str, Any] = {"task": str(folder / "task"), "candidate": {"kind": "python", "file": str(target.resolve())},
               "preset": chosen_preset, "device": "cuda" if gpu else "cpu"}  # fmt: skip
        if gpu:  # timed beside PyTorch eager and torch.compile, as a search times its nodes
            job.update(time={"sets": 3, "runs": 50, "peers": ["eager", "compile"]}, warm=True)
        check = run_job(job, timeout=timeout)
        progress = found.get("progress") or {}
        outcome.fields.update(
            problem=problem, folder=str(folder), search=progress, solution=str(target),
            check=check,
        )  # fmt: skip
        outcome.lines.append(
            f"{problem}: {made.seed.form} seed, {progress.get('evaluations')} evaluations on {chosen_backend} "
            f"({chosen_preset}); best {best.get('score')} against the seed's {progress.get('seed_score')}"
        )
        metrics = check.get("metrics") or {}
        timing = ""
        if metrics.get("ms"):
            timing = f"; {metrics['ms']:.4f} ms"
            if metrics.get("eager_ms"):
                timing += f", eager {metrics['eager_ms']:.4f} ms"
            if metrics.get("compile_ms"):
                timing += f", torch.compile {metrics['compile_ms']:.4f} ms"
        verdict = "correct" if check.get("ok") else f"NOT correct (stopped at {check.get('stage')})"
        outcome.lines.append(f"wrote {target}: {verdict} against the problem{timing}")
        if not check.get("ok"):
            for d in check.get("diagnostics") or []:
                outcome.diagnostics.append(
                    Diagnostic(d.get("rule", "solve.check"), "error", None, str(d.get("message", ""))[:1000])
                )

    _finish(_guarded(problem, body, "solving"), json_out, "solve")


def _checked_seed(db: Path) -> dict | None:
    """The search's root where its check passed and nothing was timed (a CPU backend)."""
    from agent.search.tree import Tree
    from agent.store import open_store

    if not db.exists():
        return None
    with open_store(str(db)) as store:
        searches = store.searches()
        if not searches:
            return None
        tree = Tree.of(store.nodes(searches[-1]["id"]))
    root = tree.root
    if root is None or root.record is None or not root.record.ok:
        return None
    return {"id": root.id, "score": None, "text": root.text}


def register(app: typer.Typer) -> None:
    app.command("seed")(seed_cmd)
    app.command("solve")(solve_cmd)
