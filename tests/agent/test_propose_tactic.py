"""The tactic proposer's choice of what to measure: the best predicted child of each tactic
first, then the next best of any, in the cost model's order; a child the backend cannot lower
stopped before compile; children of one source and another launch kept apart; a move that
enables a faster one measured (one move of lookahead)."""

from __future__ import annotations

from pathlib import Path

from agent.pipeline import Candidate
from agent.propose.base import Proposal
from agent.propose.tactic import TacticProposer, _diverse
from agent.search.tree import Move, Node

ROOT = Path(__file__).resolve().parents[2]


def _p(tactic: str, value: int, predicted: float) -> Proposal:
    return Proposal(
        f"{tactic}{value}", Move("tactic", tactic, (("v", value),)), f"{tactic}{value}", predicted=predicted
    )


def test_one_child_of_each_tactic_before_a_second_of_any():
    ranked = [_p("persistent", 132, 1.0), _p("persistent", 264, 1.1), _p("retile", 128, 2.0), _p("warps", 8, 3.0)]
    assert [p.key for p in _diverse(ranked, 3)] == ["persistent132", "retile128", "warps8"]
    assert [p.key for p in _diverse(ranked, 4)] == ["persistent132", "persistent264", "retile128", "warps8"]


def test_fewer_tactics_than_slots_fill_with_the_next_best():
    ranked = [_p("retile", v, t) for v, t in ((64, 1.0), (128, 2.0), (256, 3.0))]
    assert [p.key for p in _diverse(ranked, 2)] == ["retile64", "retile128"]
    assert _diverse([], 4) == []


def _seed_context(task_name: str, params: dict, shapes: dict, backend: str, measure_top: int, target=None):
    """The proposer's context for a suite task's seed (its parameters `params`) at `shapes`."""
    from agent.propose.base import Context
    from agent.tasks import load_task
    from kir.parser import parse_file

    task = load_task(ROOT / "benchmarks" / "tasks" / task_name)
    text = parse_file(task.programs["seed"].file).with_params(**params).text()
    seed = Node(0, None, Candidate(text).parsed().key(), text, Move("seed", "seed"))
    return Context(
        node=seed, task=task, backend=backend, target=target, preset="test", shapes=shapes, measure_top=measure_top
    )


GEMM_SMALL = ({"BM": 32, "BN": 32, "BK": 16}, {"M": 64, "N": 64, "K": 64})


def test_a_child_the_backend_cannot_lower_is_stopped_before_compile():
    # a bf16 GEMM with BK = 16: retile offers BK = 8, which Triton's tl.dot refuses (K >= 16)
    context = _seed_context("gemm", *GEMM_SMALL, backend="triton", measure_top=4)
    proposals = TacticProposer().propose(context)
    bk8 = [p for p in proposals if p.move.name == "retile" and dict(p.move.params) == {"param": "BK", "value": 8}]
    assert len(bk8) == 1 and bk8[0].stopped
    assert bk8[0].static.stage == "lower" and bk8[0].static.errors[0].rule == "lower.dot-shape"


def test_children_with_one_source_and_other_tiles_or_warps_are_all_proposed():
    # Triton takes tiles as constexpr arguments and warps at launch: a retile or warps child
    # lowers to the parent's source, and is still another kernel, never deduplicated as the same
    context = _seed_context("gemm", *GEMM_SMALL, backend="triton", measure_top=64)
    moves = {(p.move.name, tuple(sorted(p.move.params))) for p in TacticProposer().propose(context)}
    assert ("retile", (("param", "BM"), ("value", 64))) in moves
    assert ("retile", (("param", "BN"), ("value", 16))) in moves
    assert ("warps", (("warps", 8),)) in moves


def test_a_move_that_enables_a_faster_one_is_measured():
    # rmsnorm_backward on mtia-sim: its row loop's DMA rows start at multiples of N, which it does
    # not promise, so `pipeline` alone changes nothing and neither does fix-shape N = 300; the
    # two together pipeline the loop. Looking one move ahead, a child of either gets the
    # prediction of both as its potential and is measured; without it, neither is
    shapes = {"M": 8, "N": 300, "G": 4}  # the test preset
    context = _seed_context("rmsnorm_backward", {"BLOCK": 512}, shapes, "mtia-sim", 4, target="mtia-sim")
    enabling = ("pipeline", "fix-shape")
    looked = [p for p in TacticProposer().propose(context) if not p.stopped]
    ahead = [p for p in looked if p.move.name in enabling]
    assert ahead and all(p.potential is not None and p.potential < p.predicted for p in ahead)
    plain = [p for p in TacticProposer(lookahead=0).propose(context) if not p.stopped]
    assert not [p for p in plain if p.move.name in enabling]
