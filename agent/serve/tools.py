"""KIR's verbs as MCP tools (`kir serve --mcp`, the `mcp` SDK's FastMCP, over stdio or streamable
HTTP), each answering typed structured output that outside agents read without scraping text.

- `check`, `cost`, `compile`, `run`: one candidate through the pipeline to that stage; the
  answer is its Record (`RecordOut`: stage, ok, diagnostics with spans, estimate, lowered
  source, compile report, verdict). A program that is wrong is a Record that says why, not an
  error: the diagnostics are what a model fixes. `run` reports progress while the harness works.
- `tactics_list`, `tactics_apply`: the tactics (those that apply to a program, with their
  parameter values) and one applied: the new program's text.
- `search_submit`, `search_status`, `search_result`: a `kir search` started in the background
  on a store, read back from it while it runs and after.
- `kb_search`: the knowledge base (agent.kb), by text, rule ids, target and bottleneck.
- `rules_explain`: a rule's explanation and its rejected and accepted examples.

Arguments a model can correct (a task, backend, tactic or rule that does not exist, a parameter
outside its domain) raise `ToolError`: the call's result is an error whose text says what would
be right. Malformed requests are the SDK's protocol errors. Every text field is capped at
`MAX_TEXT` characters; a capped answer says so (`truncated`).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import BaseModel, Field

import tactics
from agent.pipeline import Candidate, Record, evaluate
from agent.store import StoreError, open_store
from agent.tasks import find_task, load_task, task_names
from agent.tasks.task import SCALE_PREFIX, TaskError
from kir.diagnostics import Diagnostic, KirError
from kir.names import suggest
from kir.parser import parse
from lowering import targets

MAX_TEXT = 20_000
ROOT = Path(__file__).resolve().parents[2]


class SpanOut(BaseModel):
    file: str | None = None
    line: int | None = None
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None


class RelatedOut(SpanOut):
    label: str = ""


class DiagnosticOut(SpanOut):
    """One diagnostic: rule id, severity, where (its span's fields), the message, the hint,
    related spans and the counterexample (shape values, an interleaving) where the verifier
    found one."""

    rule: str
    severity: str
    message: str
    hint: str = ""
    related: list[RelatedOut] = Field(default_factory=list)
    counterexample: Any = None


class RecordOut(BaseModel):
    """A candidate's Record (agent.pipeline.Record): the stage that stopped it or the last asked
    for, whether it got through, and what each stage found."""

    ok: bool
    stage: str
    until: str
    candidate: str = ""
    kernel: str | None = None
    target: str | None = None
    backend: str | None = None
    task: str | None = None
    preset: str | None = None
    params: dict[str, int] = Field(default_factory=dict)
    ops: int | None = None
    diagnostics: list[DiagnosticOut] = Field(default_factory=list)
    estimate: dict[str, Any] | None = None
    lowered: dict[str, Any] | None = None
    report: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None
    seconds: dict[str, float] = Field(default_factory=dict)
    truncated: bool = False


class TacticOut(BaseModel):
    name: str
    summary: str
    numerics: str
    params: list[dict[str, Any]]
    values: dict[str, list[Any]] | None = None  # for a program: the values that make sense there


class TacticsOut(BaseModel):
    tactics: list[TacticOut]


class AppliedOut(BaseModel):
    text: str
    params: dict[str, Any]
    diagnostics: list[DiagnosticOut] = Field(default_factory=list)
    truncated: bool = False


class SearchOut(BaseModel):
    name: str
    db: str
    task: str
    running: bool
    nodes: int = 0
    evaluations: int = 0
    best_score: float | None = None
    seed_score: float | None = None
    stopped: str | None = None
    log_tail: str = ""


class SearchResultOut(SearchOut):
    best_text: str | None = None
    path: list[dict[str, Any]] = Field(default_factory=list)
    truncated: bool = False


class HitOut(BaseModel):
    id: str
    title: str
    kind: str = ""
    score: float | None = None
    snippet: str = ""


class KbOut(BaseModel):
    hits: list[HitOut]


class RuleOut(BaseModel):
    id: str
    family: str
    severity: str
    summary: str
    explanation: str
    bad: str
    good: str
    bad_line: int | None = None
    diagnostics: list[DiagnosticOut] = Field(default_factory=list)


# ---- conversions ------------------------------------------------------------------------------


def _cap(value: Any, flag: list[bool]) -> Any:
    """`value` with every string longer than MAX_TEXT cut (flag[0] set when one was)."""
    if isinstance(value, str) and len(value) > MAX_TEXT:
        flag[0] = True
        return value[:MAX_TEXT]
    if isinstance(value, dict):
        return {k: _cap(v, flag) for k, v in value.items()}
    if isinstance(value, list):
        return [_cap(v, flag) for v in value]
    return value


def diagnostic_out(d: Diagnostic | dict[str, Any]) -> DiagnosticOut:
    data = d.to_json() if isinstance(d, Diagnostic) else d
    return DiagnosticOut(**{k: v for k, v in data.items() if k in DiagnosticOut.model_fields})


def record_out(record: Record) -> RecordOut:
    flag = [False]
    data = _cap(record.to_json(), flag)
    data.pop("schema", None)
    data.pop("file", None)
    data["diagnostics"] = [diagnostic_out(d) for d in data.get("diagnostics") or []]
    return RecordOut(**{k: v for k, v in data.items() if k in RecordOut.model_fields}, truncated=flag[0])


def _candidate(text: str, params: dict[str, int] | None) -> Candidate:
    if not isinstance(text, str) or not text.strip():
        raise ToolError("`text` is empty: give the KIR program's text")
    return Candidate(text, tuple(sorted((params or {}).items())), "<mcp>")


def _task(name: str):
    """A task by name (the suite, $KIR_TASK_PATH), folder, or KernelBench file."""
    folder = find_task(name)
    path = folder if folder is not None else Path(name)
    if folder is None and not (path.suffix == ".py" and path.is_file()):
        known = task_names()
        near = suggest(name, known)
        raise ToolError(f"no task `{name}`: a task folder, a KernelBench .py file or one of {', '.join(known)}"
                        + (f" ({near})" if near else ""))  # fmt: skip
    try:
        return load_task(path)
    except (TaskError, KirError) as err:
        raise ToolError(f"task `{name}` does not load: {err}") from None


def _choice(what: str, value: str, allowed: tuple[str, ...] | list[str]) -> None:
    if value not in allowed:
        near = suggest(value, list(allowed))
        raise ToolError(f"no {what} `{value}`: one of {', '.join(allowed)}" + (f" ({near})" if near else ""))


# ---- the server -------------------------------------------------------------------------------


def server(searches_dir: str | Path | None = None) -> FastMCP:
    """The MCP server with every tool. `searches_dir` holds the stores and logs of the searches
    it starts (default: ./kir-searches)."""
    mcp = FastMCP(
        "kir",
        log_level="WARNING",
        instructions="KIR: a typed IR for GPU kernels, with a verifier, a cost model and lowerings.",
    )
    folder = Path(searches_dir or "kir-searches")
    running: dict[str, subprocess.Popen] = {}

    @mcp.tool()
    def check(text: str, target: str | None = None, params: dict[str, int] | None = None) -> RecordOut:
        """Parse and verify a KIR program (for `target`, default its own): its Record, with every
        diagnostic located."""
        return record_out(evaluate(_candidate(text, params), until="verify", target=target))

    @mcp.tool()
    def cost(
        text: str,
        target: str | None = None,
        params: dict[str, int] | None = None,
        shapes: dict[str, int] | None = None,
        task: str | None = None,
        preset: str | None = None,
    ) -> RecordOut:
        """Verify and cost a program: the predicted time, bottleneck and breakdown by op, at the
        given shape values (or a task's preset)."""
        loaded = _task(task) if task else None
        chosen = _preset(loaded, preset)
        return record_out(
            evaluate(_candidate(text, params), until="cost", target=target, task=loaded, preset=chosen, shapes=shapes)
        )

    @mcp.tool()
    def compile(  # noqa: A001 - the verb's name
        text: str, backend: str = "triton", target: str | None = None, params: dict[str, int] | None = None
    ) -> RecordOut:
        """Lower and compile a program for a backend (triton, gluon, cuda, hip, mtia-sim): the
        compiler's report (registers, shared memory, spills) or its errors."""
        _choice("backend", backend, tuple(targets.compiling()))
        return record_out(evaluate(_candidate(text, params), until="compile", backend=backend, target=target))

    @mcp.tool()
    async def run(
        text: str,
        task: str,
        ctx: Context,
        backend: str = "interp",
        preset: str | None = None,
        params: dict[str, int] | None = None,
        seeds: list[int] | None = None,
        timeout: float = 600.0,
    ) -> RecordOut:
        """Check a program against a task's reference on a backend (the harness: fresh seeds,
        poisoned outputs, a higher-precision reference), with progress while it runs."""
        _choice("backend", backend, tuple(targets.runtimes()))
        loaded = _task(task)
        chosen = _preset(loaded, preset)
        candidate = _candidate(text, params)
        await ctx.report_progress(0, 1, f"checking on {backend} at {chosen}")
        work = asyncio.ensure_future(
            asyncio.to_thread(
                evaluate,
                candidate,
                until="run",
                backend=backend,
                task=loaded,
                preset=chosen,
                seeds=seeds,
                timeout=timeout,
            )  # fmt: skip
        )
        started = time.monotonic()
        while not work.done():
            await asyncio.wait({work}, timeout=1.0)
            if not work.done():
                await ctx.report_progress(min(0.9, (time.monotonic() - started) / max(timeout, 1.0)), 1, "running")
        record = work.result()
        await ctx.report_progress(1, 1, f"{record.stage}: {'ok' if record.ok else 'failed'}")
        return record_out(record)

    @mcp.tool()
    def tactics_list(text: str | None = None, target: str | None = None) -> TacticsOut:
        """Every tactic (name, summary, numerics, parameters); given a program, only those that
        apply to it, with the parameter values that make sense there."""
        if text is None:
            return TacticsOut(tactics=[_tactic_out(t, None) for t in tactics.all()])
        program = _parsed(text)
        return TacticsOut(tactics=[_tactic_out(t, d) for t, d in tactics.applicable(program, target)])

    @mcp.tool()
    def tactics_apply(
        text: str, tactic: str, params: dict[str, Any] | None = None, target: str | None = None
    ) -> AppliedOut:
        """Apply one tactic to a program: the new program's text, and its verifier diagnostics."""
        _choice("tactic", tactic, tactics.names())
        program = _parsed(text)
        chosen = tactics.get(tactic)
        try:
            result = chosen.apply(program, target, **(params or {}))
            values = chosen.bind(program, params or {})
        except KirError as err:
            raise ToolError(
                "; ".join(d.message + (f" ({d.hint})" if d.hint else "") for d in err.diagnostics)
            ) from None
        from verifier.check import check_program

        flag = [False]
        new_text = _cap(result.text(), flag)
        return AppliedOut(
            text=new_text, params=dict(values), diagnostics=[diagnostic_out(d) for d in check_program(result, target)],
            truncated=flag[0],
        )  # fmt: skip

    @mcp.tool()
    def search_submit(
        task: str,
        budget: int = 20,
        backend: str = "mtia-sim",
        strategy: str = "beam",
        preset: str | None = None,
        name: str | None = None,
    ) -> SearchOut:
        """Start `kir search` on a task in the background; read it with search_status and
        search_result by the name this returns."""
        loaded = _task(task)
        _choice("backend", backend, tuple(targets.runtimes()))
        if budget < 1:
            raise ToolError("`budget` is the number of measured evaluations: at least 1")
        folder.mkdir(parents=True, exist_ok=True)
        label = name or f"{loaded.name}-{strategy}-{backend}-{int(time.time() * 1000)}"
        if not label.replace("-", "").replace("_", "").isalnum():
            raise ToolError("`name` may hold letters, digits, '-' and '_' only")
        db = folder / f"{label}.sqlite"
        cmd = [
            sys.executable, "-m", "agent.cli", "search", str(loaded.folder), "--budget", str(budget), "--backend", backend,
            "--strategy", strategy, "--db", str(db), "--name", label, "--json",
        ]  # fmt: skip
        if preset:
            cmd += ["--preset", preset]
        log = open(folder / f"{label}.log", "w")  # noqa: SIM115 - the child writes it after this returns
        running[label] = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
        return SearchOut(name=label, db=str(db), task=loaded.name, running=True)

    def _status(label: str) -> tuple[SearchOut, Any]:
        db = folder / f"{label}.sqlite"
        proc = running.get(label)
        if proc is None and not db.exists():
            raise ToolError(f"no search `{label}`: " + (", ".join(sorted(running)) or "none was submitted"))
        log = folder / f"{label}.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        is_running = proc is not None and proc.poll() is None
        out = SearchOut(name=label, db=str(db), task="", running=is_running, log_tail=tail)
        tree = None
        if db.exists():
            from agent.search.tree import Tree

            try:
                with open_store(str(db)) as store:
                    found = next((s for s in store.searches() if s["name"] == label), None)
                    if found is not None:
                        tree = Tree.of(store.nodes(found["id"]))
                        out.task = found["task"]
            except StoreError as err:
                raise ToolError(str(err)) from None
        if tree is not None and len(tree):
            out.nodes = len(tree)
            out.evaluations = sum(
                1 for n in tree if n.record is not None and n.stage not in ("parse", "verify", "cost")
            )
            best = tree.best()
            out.best_score = None if best is None else best.score
            out.seed_score = tree.root.score if tree.root is not None else None
        if not is_running and tail:
            try:
                out.stopped = json.loads(tail[tail.index("{") :]).get("progress", {}).get("stopped")
            except (ValueError, AttributeError):
                out.stopped = None
        return out, tree

    @mcp.tool()
    def search_status(name: str) -> SearchOut:
        """A submitted search's state: running or not, nodes, evaluations, best and seed scores."""
        return _status(name)[0]

    @mcp.tool()
    def search_result(name: str) -> SearchResultOut:
        """A search's best program and the path of moves to it (so far, while it runs)."""
        out, tree = _status(name)
        result = SearchResultOut(**out.model_dump())
        if tree is not None and tree.best() is not None:
            flag = [False]
            best = tree.best()
            result.best_text = _cap(best.text, flag)
            result.truncated = flag[0]
            path = []
            node = best
            while node is not None:
                path.append({"id": node.id, "move": node.move.describe(), "score": node.score})
                node = tree.get(node.parent) if node.parent is not None else None
            result.path = list(reversed(path))
        return result

    @mcp.tool()
    def kb_search(
        query: str, rules: list[str] | None = None, target: str | None = None, bottleneck: str | None = None,
        limit: int = 5,
    ) -> KbOut:  # fmt: skip
        """The knowledge base's documents for a question, rule ids, a target and a bottleneck:
        the language reference, the hardware manuals, rule explanations, tactic docs."""
        from agent import kb  # built on first use: the index is read only when asked

        hits = kb.search(
            query, rules=list(rules or []), target=target, bottleneck=bottleneck, limit=max(1, min(limit, 50))
        )
        return KbOut(hits=[HitOut(**_hit(h)) for h in hits])

    @mcp.tool()
    def rules_explain(rule: str) -> RuleOut:
        """A verifier rule: why it exists, a program it rejects with what it says, and the fixed twin."""
        import verifier
        from verifier.check import check_program
        from verifier.learned import load_learned_rules

        verifier.load_rules()
        load_learned_rules()
        found = verifier.RULES.get(rule)
        if found is None:
            near = suggest(rule, list(verifier.RULES))
            raise ToolError(f"no rule `{rule}`" + (f" ({near})" if near else ": see tactics_list / the rule list"))
        try:
            diags = [d for d in check_program(parse(found.bad, file="bad.kir"), found.target) if d.rule == found.id]
        except KirError as err:
            diags = err.diagnostics
        return RuleOut(
            id=found.id, family=found.family, severity=found.severity, summary=found.summary,
            explanation=found.explanation, bad=found.bad, good=found.good, bad_line=found.bad_line,
            diagnostics=[diagnostic_out(d) for d in diags],
        )  # fmt: skip

    return mcp


def _preset(task, preset: str | None) -> str | None:
    """The preset, checked against the task's (default: `test` where it has one)."""
    if task is None:
        return preset
    known = ("default", *task.presets)
    if preset is None:
        return "test" if "test" in task.presets else "default"
    if preset.startswith(SCALE_PREFIX):
        try:
            task.preset(preset)
        except TaskError as err:
            raise ToolError(str(err)) from None
        return preset
    if preset not in known:
        raise ToolError(f"task `{task.name}` has no preset `{preset}`: one of {', '.join(known)}, or {SCALE_PREFIX}F")
    return preset


def _parsed(text: str):
    try:
        return parse(text, "<mcp>")
    except KirError as err:
        first = err.diagnostics[0]
        where = f"line {first.span.line}: " if first.span else ""
        raise ToolError(f"the program does not parse: {where}{first.message}") from None


def _tactic_out(t, values: dict[str, tuple[Any, ...]] | None) -> TacticOut:
    data = t.to_json()
    return TacticOut(
        name=data["name"], summary=data["summary"], numerics=data["numerics"], params=data["params"],
        values=None if values is None else {k: list(v) for k, v in values.items()},
    )  # fmt: skip


def _hit(h: Any) -> dict[str, Any]:
    data = h.to_json()
    return {k: data[k] for k in ("id", "title", "kind", "score", "snippet")}
