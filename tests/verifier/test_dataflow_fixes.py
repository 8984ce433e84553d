"""The dataflow rules' hints are edits, and the edit is the fix the program meant: applied to a
corpus program, it gives that program's fixed twin (`X.good.kir`), line for line (comments
aside). The cases where the twin is written otherwise (a mask built at the store rather than
in a new definition, a constraint on another line) are checked by test_hints_apply only."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.diagnostics import apply_edits
from tests.verifier.harness import code, diagnose, fixed
from verifier import RULES, load_rules

load_rules()
HERE = Path(__file__).parent

# (program, line of the diagnostic, rule): the edit there gives the fixed twin.
TWINS = [
    ("corpus/dataflow/accumulate_into_output", 8, "dataflow.read-before-write"),
    ("corpus/dataflow/accumulator_reset_in_loop", 9, "dataflow.dead-store"),
    ("corpus/dataflow/column_from_wrong_axis", 9, "dataflow.write-overlap"),
    ("corpus/dataflow/copy_into_wrong_buffer", 11, "dataflow.smem-overlap"),
    ("corpus/dataflow/copy_into_wrong_buffer", 15, "dataflow.read-before-write"),
    ("corpus/dataflow/flat_ring_stage_stride", 34, "dataflow.smem-overlap"),
    ("corpus/dataflow/grid_one_short", 4, "dataflow.output-unwritten"),
    ("corpus/dataflow/if_skips_last_block", 8, "dataflow.output-unwritten"),
    ("corpus/dataflow/input_written_atomic", 9, "dataflow.input-written"),
    ("corpus/dataflow/input_written_inplace", 2, "dataflow.output-unwritten"),
    ("corpus/dataflow/input_written_inplace", 9, "dataflow.input-written"),
    ("corpus/dataflow/loop_stops_one_tile_early", 7, "dataflow.output-unwritten"),
    ("corpus/dataflow/output_stat_never_stored", 17, "dataflow.dead-store"),
    ("corpus/dataflow/peek_before_fill", 8, "dataflow.read-before-write"),
    ("corpus/dataflow/prefetch_stage_stride", 19, "dataflow.smem-overlap"),
    ("corpus/dataflow/softmax_default_other", 11, "dataflow.masked-reduce"),
    ("corpus/dataflow/split_k_plain_store", 19, "dataflow.write-overlap"),
    ("corpus/dataflow/store_mask_off_by_one", 7, "dataflow.output-unwritten"),
    ("corpus/dataflow/store_twice_same_place", 8, "dataflow.dead-store"),
    ("corpus/dataflow/sum_overwritten", 8, "dataflow.unused-value"),
    ("corpus/dataflow/sum_overwritten", 9, "dataflow.dead-store"),
    ("corpus/dataflow/tiles_step_half", 7, "dataflow.write-overlap"),
    ("corpus/dataflow/weight_loaded_not_applied", 14, "dataflow.unused-value"),
    ("corpus/resources/gemm_ws_consumers_as_warps", 40, "dataflow.smem-overlap"),
    ("corpus/types/program_id_beyond_grid", 9, "dataflow.output-unwritten"),
    ("user_corpus/bounds/gemm_store_mask_wrong_dim", 21, "dataflow.output-unwritten"),
    ("user_corpus/bounds/gemm_ws_column_split_offset", 36, "dataflow.smem-overlap"),
    ("user_corpus/bounds/gemm_ws_column_split_offset", 40, "dataflow.write-overlap"),
    ("user_corpus/dataflow/add_rmsnorm_writes_input", 18, "dataflow.input-written"),
    ("user_corpus/dataflow/chunked_cumsum_tail", 9, "dataflow.output-unwritten"),
    ("user_corpus/dataflow/conv_acc_reset_in_loop", 17, "dataflow.dead-store"),
]


@pytest.mark.parametrize(("program", "line", "rule"), TWINS, ids=[f"{p}@{n}" for p, n, _ in TWINS])
def test_the_edit_gives_the_fixed_twin(program: str, line: int, rule: str):
    after, _ = fixed(program, rule, line)
    assert code(after) == code((HERE / f"{program}.good.kir").read_text())


def _dataflow_diagnostics():
    programs = [(str(p.relative_to(HERE)), p.read_text()) for p in sorted(HERE.glob("*corpus/**/*.bad.kir"))]
    programs += [(f"{r} (bad example)", RULES[r].bad) for r in sorted(RULES)]
    return [(name, d) for name, text in programs for d in diagnose(text, name) if d.rule.startswith("dataflow.")]


def test_every_dataflow_hint_is_an_edit():
    """A dataflow diagnostic either gives its fix as edits, with a hint that says what they do,
    or gives no hint at all: never a prose hint the program cannot be fixed by."""
    found = _dataflow_diagnostics()
    assert len(found) >= 60
    prose = [(name, d.span.line if d.span else 0, d.rule, d.hint) for name, d in found if d.hint and not d.edits]
    assert not prose
    assert all(d.hint for _, d in found if d.edits)


def test_a_fix_that_does_not_hold_is_not_offered():
    """An output that nothing writes, with no misdirected write to send to it: dropping `out`
    is offered only when it holds (here it does), never a redirect that leaves it unwritten."""
    text = """
kernel copy<BLOCK = 256>(x: global f32[N], y: out global f32[N], z: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  store(y[offs], load(x[offs], mask = mask), mask = mask)
}
"""
    (diag,) = [d for d in diagnose(text) if d.rule == "dataflow.output-unwritten"]
    assert diag.hint == "drop `out` from `z`: the kernel does not produce it"
    fixed = apply_edits(text, diag.edits)
    assert "z: global f32[N]" in fixed
    assert not [d for d in diagnose(fixed) if d.is_error]
