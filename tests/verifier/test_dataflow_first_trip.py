"""`dataflow.read-before-write` on the first trip of a loop: a double buffer whose prologue fills
the slot the first trip does not read is blamed at the prologue (the line to change), with the
read related and the slot to fill in the hint; prologues that fill what is read are clean."""

from __future__ import annotations

from kir.diagnostics import Diagnostic
from tests.verifier.harness import describe, diagnose

RULE = "dataflow.read-before-write"


def at(diags: list[Diagnostic], line: int) -> list[Diagnostic]:
    return [d for d in diags if d.rule == RULE and d.span is not None and d.span.line == line]


DMA = """\
kernel row_sums<BM = 16, BK = 256>(x: global f32[M, K], out: out global f32[M])
  where M % BM == 0, K % BK == 0
  target mtia-sim grid(M / BM) warps(1)
{{
  buf = smem(f32[2, BM, BK])
  m0 = program_id(0) * BM
  cp.async(x[m0 : m0 + BM, 0 : BK], buf[{slot}])
  cp.async.commit()
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {{
    more = k + 1 < K / BK
    cp.async(x[m0 : m0 + BM, (k + 1) * BK : (k + 1) * BK + BK], buf[(k + 1) % 2], mask = more)
    cp.async.commit()
    cp.async.wait(1)
    acc = acc + sum(load(buf[k % 2]), axis = 1)
  }}
  store(out[m0 : m0 + BM], acc)
}}
"""


def test_a_prologue_into_the_wrong_slot_is_blamed_at_the_prologue():
    bad = diagnose(DMA.format(slot=1))
    hit = at(bad, 7)
    assert hit and "`buf[0]`" in hit[0].message and "`buf[0]`" in hit[0].hint, describe(bad)
    assert [r.span.line for r in hit[0].related] == [15]
    assert not [d for d in diagnose(DMA.format(slot=0)) if d.rule == RULE]  # the hint, applied


STAGED = """\
kernel staged<BM = 32, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_80 grid(M / BM) warps(4)
{{
  buf = smem(f32[3, BM, BN])
  m0 = program_id(0) * BM
{prologue}
  barrier()
  for j in 0 .. N / BN {{
    t = load(buf[j % 3])
    barrier()
    store(buf[(j + 2) % 3], load(x[m0 : m0 + BM, (j + 2) * BN : (j + 2) * BN + BN], mask = (j + 2) * BN < N))
    barrier()
    store(y[m0 : m0 + BM, j * BN : j * BN + BN], t)
  }}
}}
"""

RING_PROLOGUE = """\
  for p in 0 .. 2 {
    store(buf[p], load(x[m0 : m0 + BM, p * BN : p * BN + BN], mask = p * BN < N))
  }"""


def test_a_ring_filled_by_a_prologue_loop_is_clean():
    good = diagnose(STAGED.format(prologue=RING_PROLOGUE))
    assert not [d for d in good if d.rule == RULE], describe(good)


def test_a_ring_whose_prologue_loop_skips_the_first_stage_is_reported_at_the_read():
    bad = diagnose(STAGED.format(prologue=RING_PROLOGUE.replace("store(buf[p]", "store(buf[p + 1]")))
    assert at(bad, 12), describe(bad)  # no single prologue write to blame: the read
