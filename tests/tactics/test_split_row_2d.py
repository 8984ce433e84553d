"""split-row on kernels whose values have more axes than the columns' (an embedding bag's
[BL, BD] tile of table rows, a block of rows): the column tile is the arange whose columns no
op mixes, found by following them through the body. What it writes for the embedding bag; the
refusals, located at the op that mixes the columns; and the results, bitwise equal on the
reference interpreter with column blocks that do not divide the row."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tactics
from kir.interp import run
from kir.parser import parse, parse_file
from kir.program import Program, same_ir
from tests.tactics.corpus import SUITE
from tests.tactics.test_preconditions import check_pair, line_of, program, twin

SPLIT = tactics.get("split-row")

EMBEDDING_BAG_SPLIT = """\
  where L <= BL
  target sm_90 grid(cdiv(D, BD), NB) warps(4)
{
  bag = program_id(1)
  j = arange(0, BL)
  cols = program_id(0) * BD + arange(0, BD)
  jmask = j < L
  cmask = cols < D
  rows = load(idx[bag, j], mask = jmask)
  vals = load(table[rows[:, None], cols[None, :]], mask = jmask[:, None] & cmask[None, :])
  store(out[bag, cols], cast<bf16>(sum(cast<f32>(vals), axis = 0)), mask = cmask)
}
"""

# a block of BR rows a program, the row in one tile: values are [BR, BD], the columns on axis 1
ROWS = """
kernel rows<BR = 4, BD = 64>(x: global f32[M, D], w: global f32[D], y: out global f32[M, D])
  where D <= BD
  target sm_90 grid(cdiv(M, BR)) warps(4)
{
  rows = program_id(0) * BR + arange(0, BR)
  cols = arange(0, BD)
  rmask = rows < M
  cmask = cols < D
  mask = rmask[:, None] & cmask[None, :]
  v = load(x[rows[:, None], cols[None, :]], mask = mask, other = -inf)
  s = max(v, axis = 0)[None, :]
  store(y[rows[:, None], cols[None, :]], (v - s) * load(w[cols], mask = cmask)[None, :], mask = mask)
}
"""


def embedding_bag(**params: int) -> Program:
    return parse_file(SUITE / "embedding_bag" / "seed.kir").with_params(**params)


def test_the_embedding_bag_splits_its_row_tile_not_its_bag_tile():
    seed = embedding_bag()
    before = seed.text()
    split = SPLIT.apply(seed)
    assert seed.text() == before
    text = split.text()
    assert text.endswith(EMBEDDING_BAG_SPLIT), text
    assert "D <= BD" not in text
    again = parse(text, file=split.file)
    assert same_ir(split, again) and again.text() == text


def test_a_block_of_rows_splits_and_a_reduction_along_the_columns_is_refused_at_it():
    check_pair(
        "split-row",
        (
            ROWS, {}, "grid(cdiv(D, BD), cdiv(M, BR)) warps(4)\n{\n  rows = program_id(1) * BR + arange(0, BR)\n"
            "  cols = program_id(0) * BD + arange(0, BD)",
            twin(ROWS, "s = max(v, axis = 0)[None, :]", "s = max(v, axis = 1)[:, None]"),
            "tactic.split-row.mixes", "s = max(v, axis = 1)",
        ),
    )  # fmt: skip


def test_a_tile_spanning_the_columns_without_them_is_refused_where_it_meets_them():
    # k = arange(0, BD) could be the column tile too: each is refused where it meets the other
    other = twin(ROWS, "  s = max(v, axis = 0)[None, :]\n", "  k = arange(0, BD)\n  s = cast<f32>(k)[None, :]\n")
    reasons = SPLIT.precondition(program(other))
    assert [d.rule for d in reasons] == ["tactic.split-row.shape"] * 2, reasons
    assert [d.span.line for d in reasons] == [line_of(other, "store(y")] * 2
    assert "`cols` as the column tile" in reasons[0].message and "`k` as the column tile" in reasons[1].message


def test_a_tile_spanning_the_columns_that_never_meets_them_is_refused_too():
    # the sum of w over k = arange(0, BD) is w's sum only while D <= BD, the clause the split drops
    total = twin(
        ROWS,
        "  s = max(v, axis = 0)[None, :]\n",
        "  k = arange(0, BD)\n  s = sum(load(w[k], mask = k < D), axis = 0)\n",
    )
    reasons = SPLIT.precondition(program(total))
    assert [(d.rule, d.span.line) for d in reasons] == [
        ("tactic.split-row.shape", line_of(total, "k = arange")),  # cols as the column tile
        ("tactic.split-row.mixes", line_of(total, "s = sum")),  # k as the column tile
    ], reasons


def test_columns_into_a_lane_moving_op_or_reached_only_through_a_mask_are_refused():
    moved = twin(ROWS, "s = max(v, axis = 0)[None, :]", "s = trans(trans(v))")
    reasons = SPLIT.precondition(program(moved))
    assert [(d.rule, d.span.line) for d in reasons] == [("tactic.split-row.mixes", line_of(moved, "s = trans"))]
    sliced = twin(ROWS, "load(w[cols], mask = cmask)", "load(w[0 : BD], mask = cmask)")
    reasons = SPLIT.precondition(program(sliced))
    assert [(d.rule, d.span.line) for d in reasons] == [("tactic.split-row.shape", line_of(sliced, "store(y"))]
    rows_only = twin(ROWS, "mask = rmask[:, None] & cmask[None, :]", "mask = rmask[:, None]")
    reasons = SPLIT.precondition(program(rows_only))
    assert [(d.rule, d.span.line) for d in reasons] == [("tactic.split-row.unmasked", line_of(rows_only, "v = load"))]


def same_bits(before: Program, after: Program, inputs: dict[str, np.ndarray]) -> None:
    want = run(before, {k: v.copy() for k, v in inputs.items()})
    got = run(after, {k: v.copy() for k, v in inputs.items()})
    assert set(got) == set(want)
    for name in want:
        assert got[name].tobytes() == want[name].tobytes(), name


@pytest.mark.parametrize("d", [1, 5, 16, 33, 47])
def test_the_embedding_bag_split_into_blocks_of_16_columns_keeps_every_bit(d):
    seed = embedding_bag(BL=8, BD=64)  # the whole row in one tile, as the seed needs
    split = SPLIT.apply(seed)
    blocks = tactics.get("retile").apply(split, param="BD", value=16)  # the last block partial unless 16 | D
    rng = np.random.default_rng(d)
    inputs = {
        "table": rng.standard_normal((40, d)).astype(ml_dtypes.bfloat16),
        "idx": rng.integers(0, 40, size=(3, 5), dtype=np.int64),
        "out": np.full((3, d), np.nan, dtype=ml_dtypes.bfloat16),
    }
    same_bits(seed, blocks, inputs)


@pytest.mark.parametrize("d", [5, 33])
def test_a_block_of_rows_split_into_blocks_of_16_columns_keeps_every_bit(d):
    before = program(ROWS)
    blocks = tactics.get("retile").apply(SPLIT.apply(before), param="BD", value=16)
    rng = np.random.default_rng(d)
    inputs = {
        "x": rng.standard_normal((6, d), dtype=np.float32),  # a partial last block of rows too
        "w": rng.standard_normal(d, dtype=np.float32),
        "y": np.full((6, d), np.nan, dtype=np.float32),
    }
    same_bits(before, blocks, inputs)
