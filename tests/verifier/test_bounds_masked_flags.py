"""A value loaded under a mask is `other` (0 when absent) where the mask is false: a flag loaded
under `t < L` is false past L, so an access it guards is proved in bounds there, not left
`bounds.unproven`; a flag loaded without the mask still is."""

from __future__ import annotations

from tests.verifier.harness import describe, diagnose

POOL = """\
kernel pool<BL = 128, BD = 64>(x: global f32[B, L, D], valid: global i8[B, L], y: out global f32[B, D])
  where L <= BL, D % BD == 0
  target sm_90 grid(B, D / BD) warps(4)
{{
  b = program_id(0)
  d0 = program_id(1) * BD
  t = arange(0, BL)
  keep = {flag}
  xv = load(x[b, t[:, None], d0 + arange(0, BD)[None, :]], mask = keep[:, None])
  store(y[b, d0 : d0 + BD], sum(xv, axis = 0))
}}
"""


def unproven(text: str) -> list:
    return [d for d in diagnose(text) if d.rule == "bounds.unproven" and d.span is not None and d.span.line == 9]


def test_a_flag_loaded_under_the_bound_proves_the_access_it_guards():
    good = POOL.format(flag="load(valid[b, t], mask = t < L) != 0")
    assert not unproven(good), describe(diagnose(good))


def test_a_flag_whose_masked_lanes_are_true_does_not():
    text = POOL.format(flag="load(valid[b, t], mask = t < L, other = 1) != 0")
    assert unproven(text)  # past L the flag is 1 != 0: the access is not guarded there
