"""Learning rules from failures: the mutation proposer makes real failing programs, the sweep
measures them into a store, and the miner proposes, gates and keeps (or refuses) a rule.

The failures are real: mutants of suite programs run on the reference interpreter through the
harness, in a store like a search's. A kept rule flags every failing program it was mined from
(at its marked line in its bad example, which is one of them) and no known-correct program; a
rule whose pattern a correct program also has is refused with that program named; `kir rules
retire` removes a kept rule and the failures kept with it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli import app
from agent.execute import make_executor
from agent.learn.mine import CONTEXT_FACTS, culprits, failures, group, known_correct, mine, propose
from agent.propose.mutate import KINDS, MutationProposer, mutants
from agent.search import registry
from agent.search.loop import Budget, Settings, run_search
from agent.store import open_store
from agent.tasks import load_task
from kir.parser import parse, parse_file
from verifier.learned import LOADED, forget, read_rule_file, run_rule

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "benchmarks" / "tasks"
runner = CliRunner()


def sweep(db: str, task: str, program: str, kinds: tuple[str, ...]) -> None:
    loaded = load_task(TASKS / task)
    spec = loaded.programs[program]
    text = parse_file(str(spec.file)).with_params(**spec.params_for("test")).text()
    with open_store(db) as store:
        sid = store.search(f"mut-{task}-{program}", task, {"proposer": "mutate"})
        strategy = registry.get("sweep")(random.Random(0))
        with make_executor("inline") as ex:
            run_search(
                Settings(task=loaded, backend="interp"),
                text,
                strategy,
                MutationProposer(kinds),
                ex,
                store,
                sid,
                Budget(evaluations=20),
            )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    """Off-by-one masks in two bucketize programs: each reads one boundary past the end at run
    time (the verifier only warns that it cannot prove the gathered index in bounds)."""
    db = str(tmp_path_factory.mktemp("learn") / "corpus.sqlite")
    for program in ("seed", "tuned"):
        sweep(db, "bucketize", program, ("mask-off-by-one",))
    return db


def test_every_kind_edits_what_it_says():
    gemm = parse_file(str(ROOT / "examples" / "gemm_hopper_ws.kir"))
    kinds = {move.name for move, _ in mutants(gemm)}
    assert {"drop-sync", "flip-parity", "arrive-count", "loop-bound", "shift-index"} <= kinds
    softmax = parse_file(str(TASKS / "softmax" / "seed.kir"))
    found = {move.name: (move, child) for move, child in mutants(softmax)}
    assert "mask-off-by-one" in found and "narrow" in found
    move, child = found["mask-off-by-one"]
    assert dict(move.params)["op"] == "kir.cmp" and " <= N" in child.text()
    move, child = found["narrow"]
    assert "cast<bf16>" in child.text() and parse(child.text()).text() == child.text()
    for move, child in mutants(gemm):  # the line named is the mutated op's line in the child
        params = dict(move.params)
        if move.name != "drop-sync":
            lines = child.text().splitlines()
            assert params["line"] <= len(lines), move


def test_a_mutant_the_verifier_catches_is_kept_stopped(tmp_path):
    db = str(tmp_path / "s.sqlite")
    sweep(db, "softmax", "seed", ("shift-index",))
    with open_store(db) as store:
        nodes = store.nodes(store.searches()[0]["id"])
    stopped = [n for n in nodes if n.parent is not None and n.stage in ("verify", "cost")]
    assert stopped and all(n.record is not None and n.record.errors for n in stopped)
    assert {d.rule for n in stopped for d in n.record.errors} & {"bounds.global-access", "dataflow.output-unwritten"}


def test_failures_are_found_and_grouped_at_the_mutated_op(corpus):
    found = list(failures([corpus]))
    assert len(found) == 2 and {f.rule for f in found} == {"interp.out-of-bounds"}
    assert all(f.kind == "mask-off-by-one" and f.op == "kir.cmp" for f in found)
    assert all(
        [dict(c)[("op",)] for c in culprits(f)] and all(dict(c)[("props", "predicate")] == "le" for c in culprits(f))
        for f in found
    )
    (g,) = group(found)
    assert g.signature == ("run", "interp.out-of-bounds", "mask-off-by-one", "kir.cmp") and g.programs == 2


def test_a_kept_rule_flags_its_failures_and_no_correct_program(corpus, tmp_path):
    out = tmp_path / "learned"
    out.mkdir()
    groups, proposed = mine([corpus], out, min_programs=2, min_tasks=1, skip_caught=False)
    (p,) = proposed
    assert not p.reasons, p.reasons
    path = out / f"{p.name}.toml"
    lr, problems = read_rule_file(path)
    assert lr is not None and not problems
    for f in groups[0].members:
        hits = run_rule(lr, f.text, "failure.kir", None)
        assert hits and hits[0].span.line in f.lines
    failure_files = sorted((out / "failures" / p.name).glob("*.kir"))
    assert len(failure_files) == 2 and lr.provenance.failures == tuple(str(f.relative_to(out)) for f in failure_files)
    assert lr.rule.bad.replace("  # <-", "") in {f.text for f in groups[0].members}  # a real failing program
    for name, text in known_correct([corpus]):
        assert not run_rule(lr, text, name, None), name
    conditions = {c.subject: c.tests for c in lr.conditions}
    assert conditions[("props", "predicate")] == (("eq", "le"),) and conditions[("operands", "rhs", "def")]
    # an error where the op's own facts suffice, a warning where it needed the op's surroundings
    contextual = any(c.subject[0] in CONTEXT_FACTS for c in lr.conditions)
    assert lr.rule.severity == ("warning" if contextual else "error")


def test_a_pattern_a_correct_program_has_is_refused(corpus):
    (g,) = group(failures([corpus]))
    correct = known_correct([corpus])
    assert not propose(g, correct).reasons
    # `mid <= B - 1` is `mid < B`: its bound is computed, not a shape symbol, and the rule tells it apart
    (_, text) = next((n, t) for n, t in correct if n.endswith("bucketize/seed.kir"))
    assert not propose(g, [*correct, ("minus.kir", text.replace("mask = mid < B", "mask = mid <= B - 1"))]).reasons
    # a correct program with the very compare, where it sits: its boundaries hold B + 1 values
    inclusive = text.replace("bounds: global f32[B]", "bounds: global f32[B + 1]").replace("mid < B,", "mid <= B,")
    assert "mid <= B," in inclusive and "f32[B + 1]" in inclusive
    parse(inclusive)
    p = propose(g, [*correct, ("inclusive.kir", inclusive)])
    assert p.reasons and "inclusive.kir" in p.reasons[0]


def test_kir_learn_and_retire(corpus, tmp_path, monkeypatch):
    out = tmp_path / "installed"
    monkeypatch.setenv("KIR_LEARNED_DIR", str(out))
    # the shipped rule mined from these failures catches them: nothing is left to mine
    shipped = "learned.mined-mask-off-by-one-939d3b86"
    caught = runner.invoke(
        app, ["learn", corpus, "--rules", "--dry-run", "--min-programs", "2", "--min-tasks", "1", "--json"]
    )
    data = json.loads(caught.output)
    assert caught.exit_code == 0 and data["groups"][0]["caught"] == [shipped] and data["rules"] == []
    monkeypatch.delitem(LOADED, shipped)  # as if it had not been mined yet
    dry = runner.invoke(
        app, ["learn", corpus, "--rules", "--dry-run", "--min-programs", "2", "--min-tasks", "1", "--json"]
    )
    data = json.loads(dry.output)
    assert dry.exit_code == 0 and data["failures"] == 2 and data["rules"][0]["kept"] and not out.exists()
    result = runner.invoke(app, ["learn", corpus, "--rules", "--min-programs", "2", "--min-tasks", "1"])
    assert result.exit_code == 0 and "kept as learned.mined-mask-off-by-one-" in result.output, result.output
    (path,) = out.glob("*.toml")
    rule_id = f"learned.{path.stem}"
    try:
        listed = json.loads(runner.invoke(app, ["rules", "learned", "--db", corpus, "--json"]).output)
        row = next(r for r in listed["rules"] if r["id"] == rule_id)
        assert row["support"] == 2 and row["fired"] == 0 and row["author"] == "kir learn"
        strict = runner.invoke(app, ["learn", corpus, "--rules", "--min-programs", "3", "--min-tasks", "1"])
        assert "0 groups recur" in strict.output
        retired = runner.invoke(app, ["rules", "retire", rule_id, "--json"])
        assert retired.exit_code == 0 and len(json.loads(retired.output)["removed"]) == 3
        assert not path.exists() and not (out / "failures" / path.stem).exists()
    finally:
        forget(rule_id)


def test_kinds_are_checked():
    with pytest.raises(ValueError, match="no mutation 'nope'"):
        MutationProposer(("nope",))
    assert set(KINDS) == {
        "shift-index", "mask-off-by-one", "loop-bound", "drop-sync", "flip-parity", "arrive-count", "narrow",
    }  # fmt: skip


# ---- learned tactics -------------------------------------------------------------------------------


def _store_with_paths(db: str, paths: dict[str, list[tuple[str, dict]]]) -> None:
    """A store holding, for each task, a chain seed -> moves, each faster than the last."""
    from agent.pipeline import Record
    from agent.search.tree import Move, Node

    with open_store(db) as store:
        for task, moves in paths.items():
            sid = store.search(f"beam-{task}", task, {"backend": "mtia-sim", "preset": "test"})
            cycles = 1000.0
            for i, (name, params) in enumerate([("seed", {}), *moves]):
                record = Record(
                    f"k{task}{i}", "<t>", "run", True, "run", verdict={"ok": True, "metrics": {"cycles": cycles}}
                )
                move = Move("seed" if i == 0 else "tactic", name, tuple(sorted(params.items())))
                store.put(
                    sid, Node(i, None if i == 0 else i - 1, f"k{task}{i}", "", move, status="evaluated", record=record)
                )
                cycles -= 100


def test_recurring_moves_become_learned_tactics_with_parameter_rules(tmp_path):
    from agent.learn.tactics import best_paths, mine_tactics

    db = str(tmp_path / "wins.sqlite")
    _store_with_paths(
        db,
        {
            "rmsnorm": [("fix-shape", {"symbol": "N", "value": 300}), ("row-band", {"rows": 1})],
            "silu_mul": [("fix-shape", {"symbol": "N", "value": 384}), ("row-band", {"rows": 1})],
            "gemm": [("retile", {"param": "BK", "value": 64})],
            "conv1d": [("retile", {"param": "BN", "value": 64})],
        },
    )
    paths = best_paths([db])
    assert [p.task for p in paths] == ["conv1d", "gemm", "rmsnorm", "silu_mul"]
    found = {t.name: t for t in mine_tactics(paths)}
    pair = found["learned.fix-shape-row-band-1"]
    assert pair.describe() == "fix-shape(symbol=N, value=shape) > row-band(rows=1)"  # the task's own N
    assert pair.mined_from == ("rmsnorm", "silu_mul")
    assert found["learned.retile-64"].describe() == "retile(param=best, value=64)"  # the value that won
    assert "learned.fix-shape" in found and "learned.retile" not in found  # all "best": the tactic itself


def test_a_learned_tactic_applies_with_the_task_shape_and_is_offered_first(tmp_path):
    from agent.learn.tactics import LearnedTactic, Step, apply, read_tactic
    from agent.propose.base import Context
    from agent.propose.tactic import TacticProposer
    from agent.search.tree import Move, Node

    lt = LearnedTactic(
        "learned.fix-shape-row-band-1",
        (Step("fix-shape", (("symbol", "N"), ("value", "shape"))), Step("row-band", (("rows", 1),))),
        ("layernorm", "silu_mul"),
        "mtia-sim",
    )
    path = tmp_path / f"{lt.name}.toml"
    path.write_text(lt.to_toml())
    again = read_tactic(path)
    assert again.steps == lt.steps and again.mined_from == lt.mined_from
    task = load_task(TASKS / "rmsnorm")
    spec = task.programs["seed"]
    seed = parse_file(str(spec.file)).with_params(**spec.params_for("test"))
    shapes = task.shape_values("test")
    made = apply(lt, seed, "mtia-sim", shapes)
    assert made is not None and f"N == {shapes['N']}" in made.text() and "for i in 0 .. R pipeline" in made.text()
    context = Context(
        node=Node(0, None, "root", seed.text(), Move("seed", "seed")), task=task, target="mtia-sim",
        backend="mtia-sim", preset="test", shapes=shapes, measure_top=3,
    )  # fmt: skip
    children = TacticProposer(learned=[lt]).propose(context)
    assert children[0].move.name == lt.name and children[0].text == made.text()
    assert all(c.move.name != lt.name for c in TacticProposer().propose(context))


def test_the_gate_keeps_what_helps_on_held_out_tasks():
    """Measured on mtia-sim: fixing gemm_bias_gelu's N at its shape is twice as fast (the mined
    fix-shape helps there); row-band(1) changes nothing on id_hash, so it is not kept."""
    from agent.learn.tactics import LearnedTactic, Step, gate_tactic

    fix = LearnedTactic(
        "learned.fix-shape", (Step("fix-shape", (("symbol", "best"), ("value", "shape"))),), ("rmsnorm",)
    )
    assert gate_tactic(fix, ["gemm_bias_gelu"])
    assert fix.gate["gemm_bias_gelu"]["speedup"] > 1.5 and fix.gate["gemm_bias_gelu"]["result"] > 0
    band = LearnedTactic("learned.row-band-1", (Step("row-band", (("rows", 1),)),), ("rmsnorm",))
    assert not gate_tactic(band, ["id_hash"]) and band.gate["id_hash"]["speedup"] < 1.01
    never = LearnedTactic("learned.reciprocal-0", (Step("reciprocal", (("site", 0),)),), ("softmax",))
    assert not gate_tactic(never, ["id_hash"]) and not never.gate  # applies to none


def test_a_learned_tactic_is_offered_on_its_backend_only():
    from agent.learn.tactics import LearnedTactic, Step
    from agent.propose.base import Context
    from agent.propose.tactic import TacticProposer
    from agent.search.tree import Move, Node

    lt = LearnedTactic(
        "learned.fix-shape", (Step("fix-shape", (("symbol", "N"), ("value", "shape"))),), ("a", "b"), "triton"
    )
    task = load_task(TASKS / "rmsnorm")
    spec = task.programs["seed"]
    seed = parse_file(str(spec.file)).with_params(**spec.params_for("test"))
    context = Context(
        node=Node(0, None, "root", seed.text(), Move("seed", "seed")), task=task, target="mtia-sim",
        backend="mtia-sim", preset="test", shapes=task.shape_values("test"), measure_top=3,
    )  # fmt: skip
    assert all(c.move.name != lt.name for c in TacticProposer(learned=[lt]).propose(context))
