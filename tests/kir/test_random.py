"""`rand(seed, offsets)` and `randint(seed, offsets)`: Philox4x32-10, the same bits everywhere.

`kir.random` (what a task's reference and the reference interpreter use) gives the numbers
Triton's `tl.randint` / `tl.rand` give, for signed and 64-bit seeds and 32- and 64-bit offsets;
the C++ backends carry the same generator (the mtia-sim run below, and the dropout example in
tests/examples on every backend). Bad seeds and offsets are located errors.
"""

from __future__ import annotations

import numpy as np
import pytest

from costmodel import predict
from kir.diagnostics import KirError
from kir.interp import run
from kir.parser import parse
from kir.random import rand, randint, uniform
from lowering.targets.triton.runtime import run_triton

DRAW = """kernel draw<BLOCK = 256>(seed: global SEED[1], f: out global f32[N], i: out global u32[N])
  target TARGET grid(cdiv(N, BLOCK)) LAUNCH
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  s = load(seed[0])
  o = OFFS
  store(f[offs], rand(s, o), mask = mask)
  store(i[offs], randint(s, o), mask = mask)
}
"""


def draw(seed_dtype="i64", offsets="offs * 7 - 300", target="sm_90", launch="warps(4)"):
    text = DRAW.replace("SEED", seed_dtype).replace("OFFS", offsets).replace("TARGET", target)
    return parse(text.replace("LAUNCH", launch))


def offsets_of(expr: str, n: int) -> np.ndarray:
    offs = np.arange(n, dtype=np.int32)
    if expr == "offs * 7 - 300":
        return offs * np.int32(7) - np.int32(300)
    return offs.astype(np.int64) * np.int64(3_000_000_007) - np.int64(5)


def test_known_values():
    """Philox4x32-10 with key (0, 0) and counter (0, 0, 0, 0) starts 0x6627e8d5 (Random123's
    known-answer vector), and rand maps a word to [0, 1) through its non-negative i32."""
    assert int(randint(0, np.zeros(1, np.uint32))[0]) == 0x6627E8D5
    words = np.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF], np.uint32)
    got = uniform(words)
    assert got[0] == 0 and got[4] == 0 and got[3] == got[2] and 0 < got[1] < 1e-9 and got[2] < 1.0
    u = rand(123, np.arange(100_000, dtype=np.int32))
    assert abs(float(u.mean()) - 0.5) < 0.01 and u.min() >= 0 and u.max() < 1


@pytest.mark.parametrize("seed", [0, 12345, -7, 2**40 + 3])
@pytest.mark.parametrize("offsets", ["offs * 7 - 300", "cast<i64>(offs) * 3000000007 - 5"])
def test_triton_and_the_interpreter_draw_the_same_bits(seed, offsets):
    n = 600
    inputs = {"seed": np.array([seed], np.int64), "f": np.zeros(n, np.float32), "i": np.zeros(n, np.uint32)}
    program = draw(offsets=offsets)
    want_offsets = offsets_of(offsets, n)
    expected_i = randint(seed, want_offsets)
    interp = run(program, {k: v.copy() for k, v in inputs.items()})
    triton = run_triton(program, {k: v.copy() for k, v in inputs.items()}, interpret=True)
    for got in (interp, triton):
        assert np.array_equal(got["i"], expected_i)
        assert np.array_equal(got["f"], uniform(expected_i))


def test_the_simulator_draws_the_same_bits():
    from lowering.targets.mtia_sim.runtime import run_mtia

    n = 300
    program = draw(seed_dtype="i32", target="mtia-sim", launch="warps(1)")
    inputs = {"seed": np.array([-99], np.int32), "f": np.zeros(n, np.float32), "i": np.zeros(n, np.uint32)}
    got = run_mtia(program, inputs).outputs
    expected = randint(-99, offsets_of("offs * 7 - 300", n))
    assert np.array_equal(got["i"], expected) and np.array_equal(got["f"], uniform(expected))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("rand(offs, offs)", "the seed is one value"),
        ("rand(s, cast<f32>(offs))", "the offsets are integers, not f32"),
        ("rand(cast<f32>(s), offs)", "the seed are integers, not f32"),
        ("rand(s, cast<i16>(offs))", "32- or 64-bit integers, not i16"),
        ("rand(s)", "rand(seed, offsets)"),
    ],
)
def test_a_bad_seed_or_offset_is_located(call, message):
    text = DRAW.replace("SEED", "i64").replace("TARGET", "sm_90").replace("LAUNCH", "warps(4)")
    text = text.replace("rand(s, o)", call, 1).replace("OFFS", "offs")
    with pytest.raises(KirError) as err:
        parse(text)
    d = err.value.diagnostics[0]
    assert message in d.message and d.span.line == 8


def test_the_cost_model_counts_the_rounds():
    shapes = {"N": 1 << 26}
    heavy = predict(draw(), "sm_90", shapes=shapes)
    assert (
        any(t.name.startswith("integer") and "rand" in t.name for t in heavy.breakdown)
        or heavy.counts.get("int_ops", 0) >= 60 * shapes["N"]
    )
