"""`kir search`: search over KIR programs for a task, and show what a search found.

    kir search TASK [--seed FILE] [--strategy beam|greedy|mcts|evolve] [--budget N] [--seconds S]
                    [--gpu-seconds S] [--stall N] [--roofline F] [--executor inline|pool] [--workers N] [--db PATH]
                    [--name NAME] [--resume] [--backend B] [--target T] [--preset P] [--measure-top K]
                    [--width W] [--memory parent|siblings|both|fresh] [--random-seed N] [--time] [--json]
    kir search show DB [--name NAME] [--json]

TASK is a suite task's name or a task folder. The seed is the task's `seed.kir` with its
parameters for the preset (or `--seed FILE`). Every node is written to the store (`--db`, a
SQLite file, default `search-TASK.sqlite`; or a `postgresql://` URL) when proposed and again
when evaluated; `--resume` continues the search of that name after an interruption (`kill -9`
included), measuring only what had not come back. Each round prints a line (the best so far
against the seed and, where the harness timed it, torch.compile; evaluations; failures by
stage). `show` prints the tree as a table and the best path with each move.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from agent.search import MEMORIES
from kir.cli import (
    DEFAULT_PRESET,
    SCHEMAS,
    BackendOpt,
    JsonOpt,
    PresetOpt,
    TargetOpt,
    TimeoutOpt,
    _check_target,
    _finish,
    _guarded,
    usage,
)
from kir.diagnostics import KirError

SCHEMAS["search"] = ("task", "db", "name", "strategy", "backend", "preset", "progress", "best", "path")
SCHEMAS["search show"] = ("task", "name", "nodes", "best", "path")

STRATEGIES = ("beam", "greedy", "mcts", "evolve", "sweep")
EXECUTORS = ("inline", "pool", "ray")
PROPOSERS = ("tactic", "mutate", "llm")
TIMED: dict[str, Any] = {"sets": 3, "runs": 50, "peers": ["eager", "compile"]}
GPU_TIMING: dict[str, Any] = {"time": TIMED, "warm": True}


PEERS = ("eager", "compile")


def _timing(peers: str) -> dict[str, Any]:
    """The harness's timing settings with the peers of `--peers` (torch.compile's warmed once
    with the seed, where it is timed)."""
    chosen = [] if peers.strip() == "none" else [p.strip() for p in peers.split(",")]
    if any(p not in PEERS for p in chosen) or len(set(chosen)) != len(chosen):
        raise usage(f"--peers '{peers}' is not a list of distinct peers", "eager, compile, eager,compile or none")
    if chosen == list(PEERS):
        return GPU_TIMING
    timing: dict[str, Any] = {"time": {**TIMED, "peers": chosen}}
    return {**timing, "warm": True} if "compile" in chosen else timing


def _task_folder(task: str) -> Path:
    from agent.tasks import find_task, task_names

    folder = find_task(task)
    if folder is None:
        from kir.names import suggest

        known = task_names()
        raise usage(f"no task '{task}'", suggest(task, known) or f"tasks: {', '.join(known)}")
    return folder


def _choice(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        from kir.names import suggest

        raise usage(f"unknown {what} '{value}'", suggest(value, allowed) or f"one of {', '.join(allowed)}")


def _describe(score: float | None, backend: str) -> str:
    if score is None:
        return "-"
    return f"{score:.0f} cycles" if backend == "mtia-sim" else f"{score:.4f} ms"


def _path(tree) -> list[dict[str, Any]]:
    best = tree.best()
    if best is None:
        return []
    return [{"id": n.id, "move": n.move.describe(), "score": n.score} for n in tree.chain(best.id)]


def search_cmd(
    task: Annotated[str, typer.Argument(metavar="TASK", help="A suite task's name or a task folder; or `show`.")],
    db_arg: Annotated[str | None, typer.Argument(metavar="[DB]", help="For `show`: the store.")] = None,
    seed: Annotated[str | None, typer.Option("--seed", metavar="FILE", help="The program to start from.")] = None,
    strategy: Annotated[
        str, typer.Option("--strategy", help="beam, greedy, mcts, evolve, or sweep (the seed's children only).")
    ] = "beam",
    proposer: Annotated[
        str,
        typer.Option(
            "--proposer",
            help="tactic (tactics ranked by the cost model), mutate (bugs, for agent.learn's corpus) or llm (a model "
            "writes the child: --llm-* and KIR_LLM_* settings, agent/propose/endpoints.py).",
        ),
    ] = "tactic",
    llm_provider: Annotated[
        str | None, typer.Option("--llm-provider", help="openai (any OpenAI-compatible server) or anthropic.")
    ] = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="The model (else KIR_LLM_MODEL).")] = None,
    llm_base_url: Annotated[
        str | None, typer.Option("--llm-base-url", metavar="URL", help="The API's base URL (else KIR_LLM_BASE_URL).")
    ] = None,
    repairs: Annotated[
        int, typer.Option("--repairs", min=0, max=10, help="LLM: replies fed their diagnostics back, per expansion.")
    ] = 2,
    tokens: Annotated[
        int | None, typer.Option("--tokens", min=1, help="LLM: tokens (prompt and reply) at most.")
    ] = None,
    money: Annotated[
        float | None,
        typer.Option("--money", min=0.0, help="LLM: money at most, at KIR_LLM_PRICE_IN/OUT per million tokens."),
    ] = None,
    learned: Annotated[
        bool,
        typer.Option(
            "--learned/--no-learned",
            help="Offer the learned tactics (tactics/learned, kir learn --tactics) first and rank with the learned calibration (costmodel/learned, kir learn --calibrate) (default: on).",
        ),
    ] = True,
    budget: Annotated[int, typer.Option("--budget", min=1, help="Measured evaluations at most.")] = 200,
    seconds: Annotated[float | None, typer.Option("--seconds", min=1.0, help="Wall seconds at most.")] = None,
    gpu_seconds: Annotated[
        float | None, typer.Option("--gpu-seconds", min=1.0, help="Device seconds (GPU runs) at most.")
    ] = None,
    stall: Annotated[
        int | None, typer.Option("--stall", min=1, help="Stop after N rounds without a better best.")
    ] = None,
    roofline: Annotated[
        float | None,
        typer.Option(
            "--roofline",
            min=0.01,
            max=1.0,
            help="Stop once the best reaches this fraction of the roofline floor (floor / best).",
        ),
    ] = None,
    executor: Annotated[
        str, typer.Option("--executor", help="inline, pool or ray (a Ray cluster: RAY_ADDRESS, else a local one).")
    ] = "pool",
    workers: Annotated[
        int, typer.Option("--workers", min=1, max=256, help="Pool processes (ray: the local cluster's CPUs).")
    ] = 2,
    db: Annotated[
        str | None, typer.Option("--db", metavar="PATH", help="The store (SQLite path or postgresql:// URL).")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="The search's name in the store.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the search of this name.")] = False,
    backend: BackendOpt = None,
    target: TargetOpt = None,
    preset: PresetOpt = None,
    measure_top: Annotated[
        int, typer.Option("--measure-top", min=1, max=64, help="Children measured per expansion.")
    ] = 4,
    width: Annotated[int, typer.Option("--width", min=1, max=64, help="Nodes expanded per round.")] = 2,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory",
            help="What a proposer sees of the tree: parent, siblings, both or fresh (default: the strategy's choice).",
        ),
    ] = None,
    random_seed: Annotated[int, typer.Option("--random-seed", min=0, help="The search's random seed.")] = 0,
    timed: Annotated[
        bool | None, typer.Option("--time/--no-time", help="Time on the GPU (default: on for GPU backends).")
    ] = None,
    peers: Annotated[
        str,
        typer.Option(
            "--peers",
            metavar="LIST",
            help="What the seed is timed beside on a GPU: eager, compile, both (eager,compile) or none.",
        ),
    ] = "eager,compile",
    timeout: TimeoutOpt = 600.0,
    json_out: JsonOpt = False,
) -> None:
    """Search over KIR programs for TASK from its seed (on mtia-sim unless --backend says
    otherwise); or `kir search show DB`: the tree as a table and the best path."""
    if task == "show":
        _show(db_arg, name, json_out)
        return
    backend = "mtia-sim" if backend is None else backend
    preset = DEFAULT_PRESET if preset is None else preset

    def body(out) -> None:
        if db_arg is not None:
            raise usage(f"unexpected argument '{db_arg}'", "give the store with --db")
        _choice("strategy", strategy, STRATEGIES)
        _choice("proposer", proposer, PROPOSERS)
        _choice("executor", executor, EXECUTORS)
        llm_settings = {"provider": llm_provider, "model": llm_model, "base_url": llm_base_url}
        if proposer != "llm" and any(v is not None for v in llm_settings.values()):
            raise usage("--llm-provider, --llm-model and --llm-base-url are for --proposer llm")
        endpoint = None
        if proposer == "llm":
            from agent.propose.endpoints import Endpoint, EndpointError

            try:
                endpoint = Endpoint.from_settings(llm_settings)
            except EndpointError as err:
                raise usage(str(err)) from None
        if memory is not None:
            _choice("memory operator", memory, MEMORIES)
        if executor == "ray":
            import importlib.util

            if importlib.util.find_spec("ray") is None:
                raise usage("the ray executor needs Ray, which is not installed", "pip install 'ray>=2.40,<3'")
        _check_target(target)
        if name is not None and not name.strip():
            raise usage("the search's --name is empty")
        folder = _task_folder(task)
        from agent.execute import CPU_BACKENDS, make_executor
        from agent.learn.tactics import load as load_learned
        from agent.propose.mutate import MutationProposer
        from agent.propose.tactic import TacticProposer
        from agent.search import registry
        from agent.search.loop import Budget, Settings, run_search
        from agent.store import StoreError, open_store
        from agent.tasks import load_task
        from costmodel import CostModel
        from kir.check import load_program
        from lowering import targets

        _choice("backend", backend, tuple(targets.runtimes()))
        loaded = load_task(folder)
        if preset not in loaded.presets:
            _choice("preset", preset, tuple(loaded.presets))
        if seed is None:
            spec = loaded.programs.get("seed")
            if spec is None:
                raise usage(f"task {loaded.name} has no seed program", "give one with --seed FILE")
            program = load_program(spec.file).with_params(**spec.params_for(preset))
        else:
            program = load_program(seed)
            # one of the task's programs: its parameters for the preset, as `kir run` binds them
            entry = next((s for s in loaded.programs.values() if s.file.resolve() == Path(seed).resolve()), None)
            if entry is not None:
                program = program.with_params(**entry.params_for(preset))
        gpu = backend not in CPU_BACKENDS
        timing = _timing(peers)  # checked on every backend
        harness = timing if (timed if timed is not None else gpu) else {}
        chosen_target = target or ("mtia-sim" if backend == "mtia-sim" else None)
        floor = None
        if roofline is not None:
            from agent.search.roofline import floor as roofline_floor

            unit = "cycles" if backend == "mtia-sim" else "ms" if "time" in harness else None
            if unit is None:
                raise usage(
                    f"--roofline needs timed scores: {backend} is not timed here", "time the candidates with --time"
                )
            floor = roofline_floor(program, loaded, preset, chosen_target or program.kernel.target.data, unit)
        settings = Settings(
            task=loaded, backend=backend, target=chosen_target, preset=preset, measure_top=measure_top,
            seed=random_seed, timeout=timeout, harness=harness, floor=floor,
        )  # fmt: skip
        db_path = db or f"search-{loaded.name}.sqlite"
        search_name = name or f"{loaded.name}-{strategy}-{backend}-{preset}-{random_seed}"
        out.fields.update(
            task=loaded.name, db=db_path, name=search_name, strategy=strategy, backend=backend, preset=preset
        )
        try:
            store = open_store(db_path)
        except StoreError as err:
            raise usage(str(err)) from None
        with store:
            existing = {s["name"]: s for s in store.searches()}
            if search_name in existing and existing[search_name]["nodes"] and not resume:
                raise usage(
                    f"{db_path} has a search named {search_name} already",
                    "continue it with --resume, or choose another --name or --db",
                )
            config = {
                "strategy": strategy, "proposer": proposer, "learned": learned, "backend": backend, "target": settings.target, "preset": preset,
                "measure_top": measure_top, "width": width, "memory": memory, "random_seed": random_seed, "harness": harness,
            }  # fmt: skip
            search_id = store.search(search_name, loaded.name, config)
            chosen = registry.get(strategy)(random.Random(random_seed), width=width, memory=memory)

            def on_round(progress, tree) -> None:
                if json_out:
                    return
                p = progress.to_json()
                stages = Counter(n.stage for n in tree if n.score is None and n.record is not None)
                best = tree.best()
                peer = ""
                root = tree.root
                if best is not None and root.record is not None:
                    compile_ms = ((root.record.verdict or {}).get("metrics") or {}).get("compile_ms")
                    if compile_ms and best.score:
                        peer = f", {compile_ms / best.score:.2f}x torch.compile"
                speed = f" ({p['speedup']:.3f}x the seed{peer})" if p["speedup"] else ""
                failed = ", ".join(f"{k} {v}" for k, v in sorted(stages.items())) or "none"
                print(
                    f"round {p['rounds']}: {p['evaluations']} evaluations ({p['reused']} from the store), "
                    f"best {_describe(p['best_score'], backend)}{speed}; stopped or failed: {failed}",
                    file=sys.stderr,
                    flush=True,
                )

            if endpoint is not None:
                from agent.propose.llm import LLMProposer

                chosen_proposer: Any = LLMProposer(
                    endpoint, store=store, search=search_id, tokens=tokens, money=money, repairs=repairs,
                    retrieve=_retriever(), model=CostModel.learned() if learned else CostModel(),
                )  # fmt: skip
            elif proposer == "tactic":
                chosen_proposer = (
                    TacticProposer(learned=load_learned(), model=CostModel.learned()) if learned else TacticProposer()
                )
            else:
                chosen_proposer = MutationProposer()
            with make_executor(executor, workers=workers) as ex:
                result = run_search(
                    settings, program.text(), chosen, chosen_proposer, ex, store, search_id,
                    Budget(evaluations=budget, seconds=seconds, gpu_seconds=gpu_seconds, stall=stall, roofline=roofline,
                           tokens=tokens, money=money),
                    on_round=on_round,
                )  # fmt: skip
        out.fields["progress"] = result.progress.to_json()
        best = result.tree.best()
        out.fields["best"] = None if best is None else {"id": best.id, "score": best.score, "text": best.text}
        out.fields["path"] = _path(result.tree)
        p = result.progress.to_json()
        out.lines.append(
            f"search {search_name}: {p['stopped']}; {p['evaluations']} evaluations in {p['seconds']:.0f} s"
        )
        out.lines.append(
            f"best {_describe(p['best_score'], backend)} against the seed's {_describe(p['seed_score'], backend)}"
            + (f": {p['speedup']:.3f}x" if p["speedup"] else "")
        )
        out.lines += [
            f"  {i}. {step['move']}: {_describe(step['score'], backend)}" for i, step in enumerate(out.fields["path"])
        ]
        out.lines.append(
            f"stopped statically {p['share_stopped_statically']:.0%} of the proposals, "
            f"failed at run {p['share_failed_at_run']:.0%} of the measured"
        )

    _finish(_guarded(None, body, "searching"), json_out, "search")


def _retriever():
    """What the knowledge base (agent.kb) retrieves for the LLM proposer's prompt: the three
    documents its rule ids, bottleneck and target find, a line each."""
    from agent import kb

    def retrieve(rules, bottleneck, target) -> list[str]:
        hits = kb.search(" ".join(rules), rules=list(rules), target=target, bottleneck=bottleneck, limit=3)
        return [f"- {h.doc.title} ({h.doc.id}): {h.snippet}" for h in hits]

    return retrieve


def _show(db: str | None, name: str | None, json_out: bool) -> None:
    def body(out) -> None:
        if db is None:
            raise usage("kir search show needs the store", "kir search show DB")
        if not db.startswith(("postgresql://", "postgres://")) and not Path(db).is_file():
            raise usage(f"no store at {db}")
        from agent.search.tree import Tree
        from agent.store import StoreError, open_store

        try:
            store = open_store(db)
        except StoreError as err:
            raise usage(str(err)) from None
        with store:
            searches = store.searches()
            if not searches:
                raise usage(f"{db} holds no search")
            chosen = next((s for s in searches if s["name"] == name), None) if name else searches[-1]
            if chosen is None:
                raise usage(
                    f"{db} has no search named {name}", f"its searches: {', '.join(s['name'] for s in searches)}"
                )
            tree = Tree.of(store.nodes(chosen["id"]))
        backend = chosen["config"].get("backend", "")
        out.fields.update(task=chosen["task"], name=chosen["name"], nodes=[n.to_json() for n in tree], path=_path(tree))
        best = tree.best()
        out.fields["best"] = None if best is None else {"id": best.id, "score": best.score, "text": best.text}
        out.lines.append(f"{chosen['name']} ({chosen['task']}): {len(tree)} nodes")
        out.lines.append(f"{'id':>5} {'parent':>6} {'round':>5} {'stage':<9} {'score':>14}  move")
        for n in tree:
            parent = "-" if n.parent is None else str(n.parent)
            out.lines.append(
                f"{n.id:5d} {parent:>6} {n.round:5d} {n.stage or n.status:<9} {_describe(n.score, backend):>14}  {n.move.describe()}"
            )
        out.lines.append(
            "best path: " + " -> ".join(f"{s['move']} ({_describe(s['score'], backend)})" for s in out.fields["path"])
        )

    _finish(_guarded(db, body, "reading the store"), json_out, "search show")


def register(app: typer.Typer) -> None:
    """Mount `kir search` on the `kir` group."""
    app.command("search")(search_cmd)


__all__ = ["KirError", "register"]
