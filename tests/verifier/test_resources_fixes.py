"""The resources rules' hints are edits (a parameter's default, a role's units or budget, an
mbarrier's count); applied to a corpus program, each gives its fixed twin (comments and blank
lines aside), and a consequence gets its cause's fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.verifier.harness import code, fixed

HERE = Path(__file__).parent

TWINS = [
    ("corpus/resources/gemm_ws_consumer_budget_240", "resources.register-file", 34),
    ("corpus/resources/gemm_ws_consumers_as_warps", "resources.registers", 34),
    ("corpus/resources/gemm_ws_half_warpgroup_rows", "resources.wgmma-shape", 40),
    ("corpus/resources/gemm_ws_producer_on_consumer_warpgroup", "resources.role-overlap", 34),
    ("corpus/resources/gemm_ws_producer_one_warp", "resources.regs-warpgroup", 24),
    ("corpus/resources/gemm_ws_producer_one_warp", "resources.register-file", 34),
    ("corpus/resources/skinny_dot_m8", "resources.dot-shape", 16),
    ("corpus/resources/tma_box_512_rows", "resources.tma-box", 14),
    ("user_corpus/resources/ws_gemm_register_budgets_over", "resources.register-file", 29),
]


@pytest.mark.parametrize(("name", "rule", "line"), TWINS, ids=[f"{n}:{r}" for n, r, _ in TWINS])
def test_the_edit_gives_the_fixed_twin(name, rule, line):
    after, _ = fixed(name, rule, line)
    assert code(after) == code((HERE / f"{name}.good.kir").read_text())


def test_a_budget_over_part_of_a_warpgroup_is_the_cause_of_the_register_file_error():
    # the producer's warps(0) leaves warps 1..3 at the launch budget: the sum is over because of it
    _, hint = fixed("corpus/resources/gemm_ws_producer_one_warp", "resources.register-file", 34)
    assert "`warpgroups(0)`" in hint and "resources.regs-warpgroup" in hint


def test_overlapping_roles_are_separated_keeping_their_units_in_program_order():
    _, hint = fixed("corpus/resources/gemm_ws_producer_on_consumer_warpgroup", "resources.role-overlap", 34)
    assert hint == "give each role its own warps: `role load warpgroups(0)`"
