"""Do cache hints help the streaming tasks on the GPU? Plain Triton kernels of silu(a) * b,
rmsnorm and id hashing (the suite's tuned tiles and neighbours), with and without
`eviction_policy="evict_first"` on the streamed loads, `cache_modifier=".cs"` on the stores and
`evict_last` on rmsnorm's weight, timed against torch.compile in the same process
(`triton.testing.do_bench`, L2 flushed, median; three interleaved rounds, the middle one kept).
Also writes the Triton code torch.compile generated for each (inductor_*.txt), to compare.

    OUT=results/ python benchmarks/cache_hints.py        # on the GPU

KIR has no cache hints; this decides whether it needs them (results/ablations-h200-2026-11-29/
cache-hints: they made every one of these kernels slower or no faster)."""

import json
import os
from pathlib import Path

import torch
import triton
import triton.language as tl
from torch._inductor.utils import run_and_get_code
from triton.testing import do_bench

OUT = os.environ.get("OUT", ".")
DEV = "cuda"


@triton.jit
def silu_k(a, b, y, N, BM: tl.constexpr, BN: tl.constexpr, EF: tl.constexpr, CS: tl.constexpr):
    n0 = tl.program_id(0) * BN
    m0 = tl.program_id(1) * BM
    offs = (m0 + tl.arange(0, BM))[:, None] * N + (n0 + tl.arange(0, BN))[None, :]
    if EF:
        av = tl.load(a + offs, eviction_policy="evict_first").to(tl.float32)
        bv = tl.load(b + offs, eviction_policy="evict_first").to(tl.float32)
    else:
        av = tl.load(a + offs).to(tl.float32)
        bv = tl.load(b + offs).to(tl.float32)
    r = (av * tl.sigmoid(av) * bv).to(tl.bfloat16)
    if CS:
        tl.store(y + offs, r, cache_modifier=".cs")
    else:
        tl.store(y + offs, r)


@triton.jit
def rms_k(x, w, y, N, BLOCK: tl.constexpr, EF: tl.constexpr, CS: tl.constexpr, EL: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    if EF:
        v = tl.load(x + row * N + cols, eviction_policy="evict_first").to(tl.float32)
    else:
        v = tl.load(x + row * N + cols).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(v * v, axis=0) / N + 1e-6)
    if EL:
        wv = tl.load(w + cols, eviction_policy="evict_last").to(tl.float32)
    else:
        wv = tl.load(w + cols).to(tl.float32)
    r = (v * rstd * wv).to(tl.bfloat16)
    if CS:
        tl.store(y + row * N + cols, r, cache_modifier=".cs")
    else:
        tl.store(y + row * N + cols, r)


@triton.jit
def hash_k(x, out, N, BLOCK: tl.constexpr, EF: tl.constexpr, CS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    if EF:
        h = tl.load(x + offs, mask=m, eviction_policy="evict_first")
    else:
        h = tl.load(x + offs, mask=m)
    h = h * -7046029254386353131
    h = h ^ ((h >> 29) & 34359738367)
    r = h % 1000003
    r = tl.where(r < 0, r + 1000003, r)
    if CS:
        tl.store(out + offs, r, mask=m, cache_modifier=".cs")
    else:
        tl.store(out + offs, r, mask=m)


def trial(fns: dict) -> dict[str, float]:
    """Microseconds per variant: three rounds over all of them, interleaved; the middle one."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(3):
        for k, f in fns.items():
            times[k].append(do_bench(f, warmup=50, rep=300, return_mode="median"))
    return {k: sorted(v)[1] * 1e3 for k, v in times.items()}


def compiled(name: str, fn, *args):
    """torch.compile of `fn`, its generated code written to OUT/inductor_<name>.txt."""
    c = torch.compile(fn)
    _, code = run_and_get_code(c, *args)
    Path(OUT, f"inductor_{name}.txt").write_text("\n\n".join(code))
    return c


def silu_mul() -> dict[str, float]:
    M = N = 8192
    a = torch.randn(M, N, device=DEV, dtype=torch.bfloat16)
    b = torch.randn_like(a)
    y = torch.empty_like(a)
    ref = compiled("silu", lambda a, b: torch.nn.functional.silu(a) * b, a, b)
    fns = {"compile": lambda: ref(a, b)}
    for BM, BN, W in [(4, 1024, 4), (2, 1024, 4), (1, 2048, 4), (8, 1024, 8)]:
        for ef in (0, 1):
            for cs in (0, 1):
                grid = (N // BN, M // BM)
                fns[f"{BM}x{BN}w{W}ef{ef}cs{cs}"] = lambda BM=BM, BN=BN, W=W, ef=ef, cs=cs, grid=grid: silu_k[grid](
                    a, b, y, N, BM, BN, ef, cs, num_warps=W
                )
    return trial(fns)


def rms_ref(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(torch.bfloat16)


def rms_inputs():
    """x, w and y of the rmsnorm kernels: 8192 x 8192 bf16."""
    x = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    return x, torch.randn(8192, device=DEV, dtype=torch.bfloat16), torch.empty_like(x)


def rmsnorm() -> dict[str, float]:
    M = N = 8192
    x, w, y = rms_inputs()
    ref = compiled("rmsnorm", rms_ref, x, w)
    fns = {"compile": lambda: ref(x, w)}
    for W in (8, 16):
        for ef, el, cs in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, 1, 1)]:
            fns[f"w{W}ef{ef}el{el}cs{cs}"] = lambda W=W, ef=ef, el=el, cs=cs: rms_k[(M,)](
                x, w, y, N, N, ef, cs, el, num_warps=W
            )
    return trial(fns)


@triton.jit
def rms_two_pass_k(x, w, y, N, CH: tl.constexpr, HINTS: tl.constexpr):
    """torch.compile's rmsnorm: the sum of squares over the row in CH-wide chunks, then the row
    read again (from L1 or L2) and written; with HINTS its eviction policies (the first pass's
    loads `evict_last`, the second pass's `evict_first`, the weight `evict_last`)."""
    row = tl.program_id(0)
    acc = tl.zeros([CH], tl.float32)
    for c in range(0, N, CH):
        cols = c + tl.arange(0, CH)
        if HINTS:
            v = tl.load(x + row * N + cols, eviction_policy="evict_last").to(tl.float32)
        else:
            v = tl.load(x + row * N + cols).to(tl.float32)
        acc += v * v
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + 1e-6)
    for c in range(0, N, CH):
        cols = c + tl.arange(0, CH)
        if HINTS:
            v = tl.load(x + row * N + cols, eviction_policy="evict_first").to(tl.float32)
            wv = tl.load(w + cols, eviction_policy="evict_last").to(tl.float32)
        else:
            v = tl.load(x + row * N + cols).to(tl.float32)
            wv = tl.load(w + cols).to(tl.float32)
        tl.store(y + row * N + cols, (v * rstd * wv).to(tl.bfloat16))


def rmsnorm_two_pass() -> dict[str, float]:
    """The one-pass kernel (the suite's tuned program) beside torch.compile's two-pass shape,
    with and without its cache hints, at several chunk widths and warps."""
    M = N = 8192
    x, w, y = rms_inputs()
    ref = torch.compile(rms_ref)
    fns = {"compile": lambda: ref(x, w), "one-pass w16": lambda: rms_k[(M,)](x, w, y, N, N, 0, 0, 0, num_warps=16)}
    for CH, W in [(1024, 4), (1024, 8), (2048, 8), (2048, 16), (4096, 8), (4096, 16)]:
        for hints in (0, 1):
            fns[f"two-pass {CH} w{W} hints{hints}"] = lambda CH=CH, W=W, hints=hints: rms_two_pass_k[(M,)](
                x, w, y, N, CH, hints, num_warps=W
            )
    return trial(fns)


def id_hash() -> dict[str, float]:
    N = 16 * 1024 * 1024
    x = torch.randint(-(2**62), 2**62, (N,), device=DEV, dtype=torch.int64)
    out = torch.empty_like(x)

    def hash_ref(x):
        h = x * -7046029254386353131
        h = h ^ ((h >> 29) & 34359738367)
        return torch.remainder(h, 1000003)

    ref = compiled("hash", hash_ref, x)
    fns = {"compile": lambda: ref(x)}
    for BLOCK, W in [(512, 4), (1024, 4), (2048, 8)]:
        for ef in (0, 1):
            for cs in (0, 1):
                fns[f"{BLOCK}w{W}ef{ef}cs{cs}"] = lambda BLOCK=BLOCK, W=W, ef=ef, cs=cs: hash_k[
                    (triton.cdiv(N, BLOCK),)
                ](x, out, N, BLOCK, ef, cs, num_warps=W)
    return trial(fns)


SECTIONS = {"silu_mul": silu_mul, "rmsnorm": rmsnorm, "id_hash": id_hash, "rmsnorm_two_pass": rmsnorm_two_pass}


def main() -> None:
    """Every section, or those named on the command line."""
    import sys

    res = {}
    for name in sys.argv[1:] or ["silu_mul", "rmsnorm", "id_hash"]:
        fn = SECTIONS[name]
        res[name] = fn()
        print(name, {k: round(v, 2) for k, v in res[name].items()}, flush=True)
    suffix = "-".join(sys.argv[1:])
    Path(OUT, f"cache-hints-{suffix}.json" if suffix else "cache-hints.json").write_text(
        json.dumps(res, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
