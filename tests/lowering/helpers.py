"""What the lowering tests share: snapshots of emitted code, and the checks a pass's output must pass."""

from __future__ import annotations

import os
from pathlib import Path

from kir.interp import run as interp_run
from kir.parser import parse
from kir.program import same_ir
from verifier.check import check_program


def check_snapshot(path: Path, text: str) -> None:
    """`text` is the snapshot at `path`; with KIR_UPDATE_SNAPSHOTS set, it becomes the snapshot."""
    if os.environ.get("KIR_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {path}: run with KIR_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(), f"emitted source differs from {path}; KIR_UPDATE_SNAPSHOTS=1 to accept"


def kernel_part(source: str) -> str:
    """An emitted C++ kernel from its signature on (the helpers before it are checked once)."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('extern "C"'))
    return "\n".join(lines[start:]) + "\n"


def assert_clean(program, target: str = "sm_90"):
    """A pass's output verifies for `target` and round-trips through its text; the reparsed program."""
    errors = [d for d in check_program(program, target) if d.is_error]
    assert not errors, errors
    text = program.text()
    again = parse(text)
    assert same_ir(program, again)
    assert again.text() == text
    return again


def run(program, inputs, params=None):
    """Interpret `program` on copies of `inputs` (the interpreter writes its outputs in place)."""
    return interp_run(program, {k: v.copy() for k, v in inputs.items()}, params or {})


# One warpgroup and no roles: TMA loads, wgmma, an epilogue in the accumulator's layout, a
# branch, a carried scalar, and a TMA store through shared memory.
TMA_STORE_TEXT = """\
kernel gemm_tma_store<BM = 64, BN = 128, BK = 64>(
    a: global bf16[M, K] align(16),
    b: global bf16[K, N] align(16),
    c: out global bf16[M, N] align(16),
)
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warpgroups(1)
{
  as = smem(bf16[1, BM, BK], swizzle = 128)
  bs = smem(bf16[1, BK, BN], swizzle = 128)
  cs = smem(bf16[1, BM, BN], swizzle = 128)
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  ph = 0
  for k in 0 .. K / BK {
    expect(bar[0], bytes = sizeof(as[0]) + sizeof(bs[0]))
    tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[0], signal = bar[0])
    tma.load(b[k * BK : k * BK + BK, n0 : n0 + BN], bs[0], signal = bar[0])
    wait(bar[0], parity = ph)
    ph = ph ^ 1
    acc = wgmma(as[0], bs[0], acc)
    wgmma.wait(0)
  }
  if K > BK {
    acc = acc * 2.0
  }
  store(cs[0], cast<bf16>(maximum(acc, -acc) - 1.0))
  fence.async()
  tma.store(cs[0], c[m0 : m0 + BM, n0 : n0 + BN])
  tma.store_wait(0)
}
"""


# Masked block loads and stores through a 1-D shared buffer: an explicit-level program of the
# plainest kind (the Gluon backend takes it).
SOFTSIGN_TEXT = """\
kernel row_softsign<BN = 256>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BN
  target sm_90 grid(M) warps(4)
{
  buf = smem(f32[BN])
  row = program_id(0)
  m = arange(0, BN) < N
  v = load(x[row, 0 : BN], mask = m, other = 0.0)
  store(buf[0 : BN], v)
  barrier()
  u = load(buf[0 : BN])
  store(y[row, 0 : BN], u / (1.0 + abs(u)), mask = m)
}
"""
