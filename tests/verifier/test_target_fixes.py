"""The target rules' hints are edits: a program written for a target with TMA, mbarriers,
cp.async or wgmma is rewritten with what the target has, and each applied edit gives the
corpus program's fixed twin (comments and blank lines aside)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.diagnostics import apply_edits
from tests.verifier.harness import code, diagnose, fixed

HERE = Path(__file__).parent

TWINS = [
    ("corpus/target/blocked_layout_warp32_on_gfx942", "target.layout", 9),
    ("corpus/target/blocked_layout_warps_on_sm90", "target.layout", 16),
    ("corpus/target/cp_async_on_gfx90a", "target.cp-async", 11),
    ("corpus/target/fp8_on_gfx90a", "target.dtype", 2),
    ("corpus/target/fp8_on_gfx90a", "target.dtype", 8),
    ("corpus/target/mbarrier_handoff_on_gfx942", "target.mbarrier", 7),
    ("corpus/target/mbarrier_handoff_on_gfx942", "target.mbarrier", 15),
    ("corpus/target/role_on_mtia", "target.roles", 6),
    ("corpus/target/tma_load_on_gfx942", "target.tma", 12),
    ("corpus/target/tma_load_on_gfx942", "target.mbarrier", 13),
    ("corpus/target/tma_store_on_gfx90a", "target.tma", 11),
    ("corpus/target/wgmma_bf16_accumulator", "target.wgmma-dtype", 20),
    ("corpus/target/wgmma_on_sm80", "target.wgmma", 20),
    ("user_corpus/target/fp8_gemm_on_a100", "target.dtype", 19),
    ("user_corpus/target/tma_transpose_on_mi250", "target.mbarrier", 8),
    ("user_corpus/target/wgmma_on_a100", "target.wgmma", 28),
]


@pytest.mark.parametrize(("name", "rule", "line"), TWINS, ids=[f"{n}:{r}@{line}" for n, r, line in TWINS])
def test_the_edit_gives_the_fixed_twin(name, rule, line):
    after, _ = fixed(name, rule, line)
    assert code(after) == code((HERE / f"{name}.good.kir").read_text())


def test_every_diagnostic_of_one_rewrite_gets_the_whole_rewrite():
    """The mbarrier, its expect, the TMA copy and the wait are one pattern: each of their
    errors is fixed by the same edits, which remove all of them."""
    name = "corpus/target/tma_load_on_gfx942"
    text = (HERE / f"{name}.bad.kir").read_text()
    found = [d for d in diagnose(text, name) if d.rule.startswith("target.")]
    assert len(found) == 4 and len({d.edits for d in found}) == 1
    assert not [d for d in diagnose(apply_edits(text, found[0].edits), name) if d.is_error]


def test_a_tma_store_on_sm80_is_a_plain_store_and_its_wait_goes():
    after, hint = fixed("corpus/target/tma_store_on_sm80", "target.tma", 17)
    assert "  store(y[m0 : m0 + BM, n0 : n0 + BN], load(ys[0 : BM]))" in after and "store_wait" not in after
    assert hint.startswith("do without TMA: `store(y[m0 : m0 + BM, n0 : n0 + BN], load(ys[0 : BM]))`")


def test_f64_on_mtia_becomes_f32_on_its_line():
    after, hint = fixed("user_corpus/target/f64_sum_on_mtia", "target.dtype", 11)
    assert "  ss = sum(cast<f32>(v) * cast<f32>(v), axis = 0)" in after and hint.startswith("use f32")
