"""Wins -> tactics: recurring sequences of moves on the best paths of finished searches, kept as
data (`tactics/learned/*.toml`), offered first by the tactic proposer where they apply.

A learned tactic is a short sequence of registered tactics, each step with a rule for each of its
parameters:
- a literal (`rows = 1`): every best path it was mined from used that value;
- `"shape"` (fix-shape's `value`): the task's own value of the symbol the step fixes, as every
  mined path fixed the symbol at the task's shape;
- `"best"`: the values disagreed; the step takes the value of its domain the cost model predicts
  fastest, given the steps before it.

Mining (`mine_tactics`): the best path of each search in the stores (the fastest node's chain of
moves), one per task (the fastest), and every run of 1 to `MAX_STEPS` consecutive moves on it.
A run of tactic names recurring on the paths of at least `MIN_TASKS` tasks becomes a candidate,
unless it is one tactic with every parameter `"best"` (that is the tactic itself: nothing learned).

The gate (`gate_tactic`): a learned tactic is kept only if it helps on tasks it was not mined
from. On every held-out task whose seed it applies to, the program it makes is measured beside
the seed (the same harness and backend, mtia-sim's cycles by default); it is kept when it is at
least 1% faster on one, correct on all, and, over those it applies to, faster in the geometric
mean.

Its record since (`records`): in the stores given, how many nodes it made (proposed) and how many
of them were on their search's best path (won).
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tactics as tactic_registry
from agent.pipeline import Candidate, evaluate
from agent.search.tree import Node, Tree
from agent.store import open_store
from agent.tasks import find_task, load_task
from costmodel import CostModel
from kir.check import load_program
from kir.diagnostics import KirError
from kir.program import Program
from verifier.facts import CHECKS

ROOT = Path(__file__).resolve().parents[2]
LEARNED_DIR = ROOT / "tactics" / "learned"
ENV_DIR = "KIR_LEARNED_TACTICS"
MIN_TASKS = 2
MAX_STEPS = 3
CHOICES = 64  # a "best" step costs at most this many of its parameter values
MIN_GAIN = 1.01  # "helps": at least this speedup on one held-out task (the simulator is exact)
PREFIX = "learned."


@dataclass(frozen=True)
class Step:
    tactic: str
    params: tuple[tuple[str, Any], ...]  # name -> a literal, "shape" or "best"

    def describe(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.tactic}({inner})" if inner else self.tactic


@dataclass
class LearnedTactic:
    name: str  # learned.<words>
    steps: tuple[Step, ...]
    mined_from: tuple[str, ...]  # tasks
    backend: str = ""
    sources: tuple[str, ...] = ()  # the searches whose best paths it came from
    gate: dict[str, Any] = field(default_factory=dict)  # held-out task -> {"seed", "result", "speedup"}
    proposed: int = 0
    won: int = 0
    path: Path | None = None

    def describe(self) -> str:
        return " > ".join(s.describe() for s in self.steps)

    def to_toml(self) -> str:
        lines = [
            f"name = {json.dumps(self.name)}",
            f"summary = {json.dumps(self.describe())}",
            f"backend = {json.dumps(self.backend)}",
            f"mined_from = {json.dumps(list(self.mined_from))}",
            f"sources = {json.dumps(list(self.sources))}",
            "",
        ]
        for s in self.steps:
            lines.append("[[steps]]")
            lines.append(f"tactic = {json.dumps(s.tactic)}")
            if s.params:
                inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in s.params)
                lines.append(f"params = {{ {inner} }}")
        lines += ["", "[record]", f"proposed = {self.proposed}", f"won = {self.won}", ""]
        for task, g in sorted(self.gate.items()):
            lines.append(f"[gate.{json.dumps(task)}]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in sorted(g.items())]
        return "\n".join(lines) + "\n"


def read_tactic(path: Path) -> LearnedTactic:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    steps = tuple(Step(s["tactic"], tuple(sorted(s.get("params", {}).items()))) for s in data["steps"])
    record = data.get("record", {})
    return LearnedTactic(
        data["name"], steps, tuple(data.get("mined_from", ())), data.get("backend", ""),
        tuple(data.get("sources", ())), dict(data.get("gate", {})), int(record.get("proposed", 0)),
        int(record.get("won", 0)), path,
    )  # fmt: skip


def library_dir() -> Path:
    """Where the learned tactics are: $KIR_LEARNED_TACTICS, else tactics/learned."""
    return Path(os.environ.get(ENV_DIR) or LEARNED_DIR)


def load(directory: Path | None = None) -> list[LearnedTactic]:
    """The learned tactics kept in `directory` (default `library_dir()`; a file that does not
    read is skipped)."""
    directory = directory or library_dir()
    out = []
    for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
        try:
            out.append(read_tactic(path))
        except (OSError, KeyError, TypeError, ValueError):
            continue
    return out


# ---- applying one -------------------------------------------------------------------------------


def _predict(program: Program, target: str | None, shapes: Mapping[str, int]) -> float | None:
    sizes = {k: v for k, v in shapes.items() if k not in program.params}
    try:
        return CostModel().predict(program, target, dict(program.params), sizes, checks=CHECKS).time_s
    except KirError:
        return None


def apply(lt: LearnedTactic, program: Program, target: str | None, shapes: Mapping[str, int]) -> Program | None:
    """The program the steps make, or None where a step does not apply."""
    for step in lt.steps:
        try:
            tactic = tactic_registry.get(step.tactic)
        except KirError:
            return None
        if tactic.precondition(program, target):
            return None
        domains = tactic.domains(program, target, shapes)
        rules = dict(step.params)
        choices: list[dict[str, Any]] = [{}]
        for name, rule in step.params:
            if rule == "best":
                options = list(domains.get(name, ()))[:CHOICES]
                choices = [{**c, name: v} for c in choices for v in options][:CHOICES]
        best: tuple[float, Program] | None = None
        for choice in choices:
            values: dict[str, Any] = {name: choice.get(name, rule) for name, rule in rules.items()}
            for name, rule in rules.items():
                if rule == "shape":  # the task's own value of the symbol the step fixes
                    symbol = values.get("symbol")
                    if not isinstance(symbol, str) or symbol not in shapes:
                        values = {}
                        break
                    values[name] = shapes[symbol]
            if rules and not values:
                continue
            try:
                child = tactic.apply(program, target=target, **values)
            except KirError:
                continue
            t = _predict(child, target, shapes)
            if t is not None and (best is None or t < best[0]):
                best = (t, child)
        if best is None:
            return None
        program = best[1]
    return program


# ---- mining -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Path_:
    task: str
    search: str
    score: float
    moves: tuple[tuple[str, dict[str, Any]], ...]  # (tactic, params) from the seed on
    shapes: Mapping[str, int]
    backend: str


def best_paths(dbs: Iterable[str]) -> list[Path_]:
    """One best path a task: the fastest of the stores' searches of that task."""
    found: dict[str, Path_] = {}
    for db in dbs:
        with open_store(db) as store:
            for s in store.searches():
                nodes = sorted(store.nodes(s["id"]), key=lambda n: n.id)
                if not nodes:
                    continue
                tree = Tree()
                for n in nodes:
                    tree.add(n)
                best = tree.best()
                if best is None or best.score is None:
                    continue
                chain: list[Node] = list(tree.chain(best.id))[1:]
                moves = tuple((n.move.name, dict(n.move.params)) for n in chain if n.move.proposer == "tactic")
                config = s.get("config") or {}
                shapes = task_shapes(s["task"], config.get("preset", "test"))
                p = Path_(
                    s["task"], f"{Path(db).name}#{s['name']}", best.score, moves, shapes, config.get("backend", "")
                )
                if s["task"] not in found or p.score < found[s["task"]].score:
                    found[s["task"]] = p
    return sorted(found.values(), key=lambda p: p.task)


def task_shapes(task: str, preset: str) -> dict[str, int]:
    """The shape values of a task's preset, found by name (`agent.tasks.find_task`); empty where
    the task or the preset is not found."""
    folder = find_task(task)
    if folder is None:
        return {}
    try:
        return load_task(folder).shape_values(preset)
    except (KirError, KeyError, ValueError):
        return {}


def mine_tactics(paths: list[Path_], min_tasks: int = MIN_TASKS) -> list[LearnedTactic]:
    runs: dict[tuple[str, ...], list[tuple[Path_, int]]] = defaultdict(list)
    for p in paths:
        moved = [m[0] for m in p.moves]
        for length in range(1, MAX_STEPS + 1):
            for start in range(len(moved) - length + 1):
                runs[tuple(moved[start : start + length])].append((p, start))
    out = []
    for names, where in sorted(runs.items()):
        tasks = sorted({p.task for p, _ in where})
        if len(tasks) < min_tasks:
            continue
        steps = []
        for k, name in enumerate(names):
            instances = [p.moves[start + k][1] for p, start in where]
            shapes = [p.shapes for p, _ in where]
            rules: list[tuple[str, Any]] = []
            for param in sorted(instances[0]):
                values = [inst.get(param) for inst in instances]
                if all(v == values[0] for v in values):
                    rules.append((param, values[0]))
                elif (
                    name == "fix-shape"
                    and param == "value"
                    and all(
                        inst.get("value") == sh.get(str(inst.get("symbol")))
                        for inst, sh in zip(instances, shapes, strict=True)
                    )
                ):
                    rules.append((param, "shape"))
                else:
                    rules.append((param, "best"))
            steps.append(Step(name, tuple(rules)))
        if len(steps) == 1 and all(v == "best" for _, v in steps[0].params):
            continue  # the tactic itself: nothing learned
        words = "-".join(s.tactic for s in steps)
        literal = "-".join(
            f"{v}" for s in steps for _, v in s.params if v not in ("best", "shape") and isinstance(v, int)
        )
        name = f"{PREFIX}{words}{'-' + literal if literal else ''}"
        backend = sorted({p.backend for p, _ in where})[0]
        out.append(
            LearnedTactic(name, tuple(steps), tuple(tasks), backend, tuple(sorted({p.search for p, _ in where})))
        )
    return out


# ---- the gate and the record ------------------------------------------------------------------------


_SCORES: dict[tuple[str, str, str], float | None] = {}


def _score(program: Program, task, backend: str) -> float | None:
    """The program's measured score on the task (cycles on mtia-sim, ms on a GPU); None where it
    is not correct. Kept by candidate key: a held-out seed is measured once."""
    key = (Candidate.from_program(program).key(), task.name, backend)
    if key not in _SCORES:
        _SCORES[key] = _measure(program, task, backend)
    return _SCORES[key]


def _measure(program: Program, task, backend: str) -> float | None:
    record = evaluate(Candidate.from_program(program), until="run", backend=backend, task=task, preset="test")
    if not record.ok:
        return None
    metrics = (record.verdict or {}).get("metrics") or {}
    value = metrics.get("cycles") if backend == "mtia-sim" else metrics.get("ms")
    return float(value) if value is not None else None


def gate_tactic(lt: LearnedTactic, held_out: Iterable[str], backend: str = "mtia-sim") -> bool:
    """Measure the learned tactic on each held-out task's seed; True when it is kept."""
    speedups = []
    for name in held_out:
        folder = find_task(name)
        if folder is None:
            continue
        task = load_task(folder)
        spec = task.programs.get("seed")
        if spec is None:
            continue
        seed = load_program(spec.file).with_params(**spec.params_for("test"))
        target = "mtia-sim" if backend == "mtia-sim" else None
        made = apply(lt, seed, target, task.shape_values("test"))
        if made is None:
            continue
        before, after = _score(seed, task, backend), _score(made, task, backend)
        if before is None:
            continue
        speedup = before / after if after else 0.0
        lt.gate[name] = {"seed": before, "result": after if after is not None else -1.0, "speedup": round(speedup, 4)}
        speedups.append(speedup)
    if not speedups or not any(s >= MIN_GAIN for s in speedups) or 0.0 in speedups:
        return False
    return math.exp(sum(math.log(s) for s in speedups) / len(speedups)) > 1.0


def records(learned: list[LearnedTactic], dbs: Iterable[str]) -> None:
    """Each learned tactic's record in the stores: nodes it made, and those on a best path."""
    by_name = {lt.name: lt for lt in learned}
    for lt in learned:
        lt.proposed = lt.won = 0
    for db in dbs:
        with open_store(db) as store:
            for s in store.searches():
                nodes = sorted(store.nodes(s["id"]), key=lambda n: n.id)
                tree = Tree()
                for n in nodes:
                    tree.add(n)
                best = tree.best()
                on_path = {n.id for n in tree.chain(best.id)} if best is not None else set()
                for n in nodes:
                    made = by_name.get(n.move.name)
                    if made is None:
                        continue
                    made.proposed += 1
                    made.won += n.id in on_path
