"""The tactic proposer's choice of what to measure: the best predicted child of each tactic
first, then the next best of any, in the cost model's order."""

from __future__ import annotations

from agent.propose.base import Proposal
from agent.propose.tactic import _diverse
from agent.search.tree import Move


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
