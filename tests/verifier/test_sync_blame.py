"""Synchronization errors are reported at the statement whose change fixes them, each with a
counterexample trace, and every hint, applied to the text, gives a program the synchronization
rules accept. Small programs of their own (role structures unlike the corpora's), each a bad
program with the line to change marked `# <-` and its fixed twin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kir.diagnostics import apply_edits
from tests.verifier.harness import describe, diagnose, marked

ROOT = Path(__file__).resolve().parents[2]

# one producer warp loads two tiles once, each announced on its own barrier; the K copy was
# pasted from the Q line and still signals q_ready
SIGNAL = """\
kernel qk<BM = 64, D = 64>(q: global bf16[L, D] align(16), k: global bf16[L, D] align(16), o: out global f32[L, L])
  where L % BM == 0
  target sm_90 grid(L / BM, L / BM) warpgroups(2)
{
  qs = smem(bf16[BM, D], swizzle = 128)
  ks = smem(bf16[BM, D], swizzle = 128)
  q_ready = mbarrier(1, count = 1)
  k_ready = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BM
  role fetch warpgroups(0) regs(40) {
    expect(q_ready[0], bytes = sizeof(qs[0 : BM]))
    tma.load(q[m0 : m0 + BM, 0 : D], qs[0 : BM], signal = q_ready[0])
    expect(k_ready[0], bytes = sizeof(ks[0 : BM]))
    tma.load(k[n0 : n0 + BM, 0 : D], ks[0 : BM], signal = q_ready[0])  # <-
  }
  role math warpgroups(1) regs(232) {
    wait(q_ready[0], parity = 0)
    wait(k_ready[0], parity = 0)
    s = wgmma(qs[0 : BM], trans(ks[0 : BM]), zeros(f32[BM, BM]))
    wgmma.wait(0)
    store(o[m0 : m0 + BM, n0 : n0 + BM], s)
  }
}
"""

# the reader's only wait on a barrier that completes once asks for parity 1
FIRST_PARITY = SIGNAL.replace("signal = q_ready[0])  # <-", "signal = k_ready[0])").replace(
    "    wait(k_ready[0], parity = 0)\n", "    wait(k_ready[0], parity = 1)  # <-\n"
)

# a staging role writes the tile with plain stores and hands it to a role that stores it out
# with the TMA (the async proxy): the fence belongs to the writer, after its store
HANDOVER = """\
kernel stage_out<BM = 64, BN = 64>(x: global f32[M, N] align(16), y: out global f32[M, N] align(16))
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(8)
{
  buf = smem(f32[BM, BN])
  ready = mbarrier(1, count = 4)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  role stage warps(0, 1, 2, 3) {
    r0 = role_rank() * (BM / 4)
    store(buf[r0 : r0 + BM / 4], load(x[m0 + r0 : m0 + r0 + BM / 4, n0 : n0 + BN]) * 2.0)  # <-
    arrive(ready[0])
  }
  role out warps(4) {
    wait(ready[0], parity = 0)
    tma.store(buf[0 : BM], y[m0 : m0 + BM, n0 : n0 + BN])
    tma.store_wait(0)
  }
}
"""

# two cp.async copies in a row, waited for but never committed
NO_COMMIT = """\
kernel add_tiles<B = 128>(a: global f32[N], b: global f32[N], c: out global f32[N])
  where N % B == 0
  target sm_80 grid(N / B) warps(1)
{
  sa = smem(f32[B])
  sb = smem(f32[B])
  i0 = program_id(0) * B
  cp.async(a[i0 : i0 + B], sa[0 : B])
  cp.async(b[i0 : i0 + B], sb[0 : B])  # <-
  cp.async.wait(0)
  store(c[i0 : i0 + B], load(sa[0 : B]) + load(sb[0 : B]))
}
"""

# a double buffer whose wait keeps two groups in flight: the tile about to be read among them
WAIT_DEPTH = """\
kernel row_max<BM = 16, BK = 64>(x: global f32[M, K], y: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(2)
{
  buf = smem(f32[2, BM, BK])
  m0 = program_id(0) * BM
  cp.async(x[m0 : m0 + BM, 0 : BK], buf[0])
  cp.async.commit()
  best = full(f32[BM], -inf)
  for t in 0 .. K / BK {
    k1 = (t + 1) * BK
    cp.async(x[m0 : m0 + BM, k1 : k1 + BK], buf[(t + 1) % 2], mask = t + 1 < K / BK)
    cp.async.commit()
    cp.async.wait(2)  # <-
    barrier()
    best = maximum(best, max(load(buf[t % 2]), axis = 1))
    barrier()
  }
  store(y[m0 : m0 + BM], best)
}
"""

# plain stores of each tile into one shared buffer, read back by other warps; the next trip's
# store can overwrite the tile while a slow warp still reads it
REFILL = """\
kernel col_sums<BM = 32, BN = 64>(x: global f32[M, N], y: out global f32[N])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(N / BN) warps(4)
{
  tile = smem(f32[BM, BN])
  n0 = program_id(0) * BN
  acc = zeros(f32[BN])
  for r in 0 .. M / BM {
    store(tile[0 : BM], load(x[r * BM : r * BM + BM, n0 : n0 + BN]))
    barrier()
    acc = acc + sum(load(tile[0 : BM]), axis = 0)  # <-
  }
  store(y[n0 : n0 + BN], acc)
}
"""

# three roles would be judged by the general count; two roles whose loops differ in rounding
TRIPS = """\
kernel pairs<B = 64>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(1) warps(2)
{
  buf = smem(f32[B])
  role put warps(0) {
    for i in 0 .. N / B {  # <-
      store(buf[0 : B], load(x[i * B + arange(0, B)], mask = i * B + arange(0, B) < N))
      barrier()
      barrier()
    }
  }
  role take warps(1) {
    for j in 0 .. (N + B - 1) / B {
      barrier()
      v = load(buf[0 : B])
      store(y[j * B + arange(0, B)], v, mask = j * B + arange(0, B) < N)
      barrier()
    }
  }
}
"""

# a second accumulator chain whose last wgmma is read right after a wait that keeps it in flight
IN_FLIGHT = """\
kernel two_dots<BM = 64, BN = 64, BK = 64>(a: global bf16[M, K] align(16), b: global bf16[K, N] align(16), c: out global f32[M, N])
  where M % BM == 0, N % BN == 0, K == BK
  target sm_90 grid(M / BM, N / BN) warpgroups(1)
{
  as = smem(bf16[BM, BK], swizzle = 128)
  bs = smem(bf16[BK, BN], swizzle = 128)
  got = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  expect(got[0], bytes = sizeof(as[0 : BM]) + sizeof(bs[0 : BK]))
  tma.load(a[m0 : m0 + BM, 0 : BK], as[0 : BM], signal = got[0])
  tma.load(b[0 : BK, n0 : n0 + BN], bs[0 : BK], signal = got[0])
  wait(got[0], parity = 0)
  acc = wgmma(as[0 : BM], bs[0 : BK], zeros(f32[BM, BN]))
  wgmma.wait(1)  # <-
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc * 0.5)
}
"""

# the consumer warps never release the stage the producer waits on before refilling it
NO_RELEASE = """\
kernel scale_rows<B = 128, S = 2>(x: global f32[R, B], y: out global f32[R, B])
  target sm_90 grid(1) warps(2)
{
  ring = smem(f32[S, B])
  filled = mbarrier(S, count = 1)
  drained = mbarrier(S, count = 1)
  role put warps(0) {
    for r in 0 .. R {
      s = r % S
      wait(drained[s], parity = (r / S + 1) % 2)
      store(ring[s], load(x[r, 0 : B]))
      arrive(filled[s])
    }
  }
  role get warps(1) {
    for r in 0 .. R {
      t = r % S
      wait(filled[t], parity = (r / S) % 2)
      store(y[r, 0 : B], load(ring[t]) * 3.0)  # <-
    }
  }
}
"""

# eight warps copy a tile with cp.async and read it back after their own wait only
VISIBILITY = """\
kernel tile_norms<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M])
  where M % BM == 0, N == BN
  target sm_80 grid(M / BM) warps(8)
{
  t = smem(f32[BM, BN])
  m0 = program_id(0) * BM
  cp.async(x[m0 : m0 + BM, 0 : BN], t[0 : BM])
  cp.async.commit()
  cp.async.wait(0)  # <-
  v = load(t[0 : BM])
  store(y[m0 : m0 + BM], sqrt(sum(v * v, axis = 1)))
}
"""

CASES = {
    "signal-barrier": (SIGNAL, "sync.signal-barrier", "signal = q_ready[0])  # <-|signal = k_ready[0])"),
    "first-wait-parity": (FIRST_PARITY, "sync.parity", "parity = 1)  # <-|parity = 0)"),
    "handover-fence": (
        HANDOVER,
        "sync.missing-fence",
        "* 2.0)  # <-|* 2.0)\n    fence.async()",
    ),
    "no-commit": (NO_COMMIT, "sync.cp-async-group", "sb[0 : B])  # <-|sb[0 : B])\n  cp.async.commit()"),
    "wait-depth": (WAIT_DEPTH, "sync.cp-async-group", "cp.async.wait(2)  # <-|cp.async.wait(1)"),
    "refill": (REFILL, "sync.refill-without-barrier", "axis = 0)  # <-|axis = 0)\n    barrier()"),
    "trips": (TRIPS, "sync.barrier-divergent", "0 .. N / B {  # <-|0 .. (N + B - 1) / B {"),
    "in-flight": (IN_FLIGHT, "sync.wgmma-result-in-flight", "wgmma.wait(1)  # <-|wgmma.wait(0)"),
    "no-release": (NO_RELEASE, "sync.overwrite-before-release", "* 3.0)  # <-|* 3.0)\n      arrive(drained[t])"),
    "visibility": (VISIBILITY, "sync.copy-visibility", "cp.async.wait(0)  # <-|cp.async.wait(0)\n  barrier()"),
}


def _fixed(text: str, edit: str) -> str:
    old, new = edit.split("|")
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize("name", list(CASES))
def test_bad_program_is_blamed_at_the_line_to_change_with_a_trace(name):
    text, rule, _ = CASES[name]
    line, _ = marked(text)
    diags = diagnose(text, f"{name}.kir")
    hits = [d for d in diags if d.rule == rule and d.span is not None and d.span.line == line]
    assert hits, f"expected {rule} at line {line}, got {describe(diags)}"
    cex = hits[0].counterexample
    assert cex is not None and cex.get("trace"), hits[0]
    assert all("op" in ev for ev in cex["trace"])
    assert "; trace: " in hits[0].message
    assert json.loads(json.dumps(hits[0].to_json()))["counterexample"]["trace"] == cex["trace"]


@pytest.mark.parametrize("name", list(CASES))
def test_fixed_twin_is_clean(name):
    text, _, edit = CASES[name]
    fixed = _fixed(text, edit)
    bad = [d for d in diagnose(fixed, f"{name}.good.kir") if d.severity in ("error", "warning")]
    assert not bad, describe(bad)


def test_a_single_warp_needs_no_barrier_between_its_own_reads_and_writes():
    one_warp = REFILL.replace("warps(4)", "warps(1)").replace("    barrier()\n", "")
    assert not [d for d in diagnose(one_warp, "one.kir") if d.rule == "sync.refill-without-barrier"]


# ---- every hint, applied, passes ----------------------------------------------------------------

PROGRAMS = sorted((ROOT / "tests/verifier/user_corpus/sync").glob("*.bad.kir")) + sorted(
    (ROOT / "tests/verifier/corpus/sync").glob("*.bad.kir")
)


@pytest.mark.parametrize("path", PROGRAMS, ids=[f"{p.parent.name}/{p.name}" for p in PROGRAMS])
def test_every_sync_hint_applied_gives_a_program_without_sync_errors(path):
    text = path.read_text()
    hinted = [d for d in diagnose(text, path.name) if d.rule.startswith("sync.") and d.hint]
    for d in hinted:
        assert d.edits, f"{d.rule}: a hint that is not an edit: {d.hint!r}"
        fixed = apply_edits(text, d.edits)
        left = [e for e in diagnose(fixed, path.name) if e.rule.startswith("sync.") and e.is_error]
        assert not left, f"{d.rule}@{d.span.line if d.span else '?'} hint {d.hint!r} leaves {describe(left)}"


@pytest.mark.parametrize("path", PROGRAMS, ids=[f"{p.parent.name}/{p.name}" for p in PROGRAMS])
def test_every_sync_error_has_a_counterexample(path):
    diags = diagnose(path.read_text(), path.name)
    missing = [d for d in diags if d.rule.startswith("sync.") and d.is_error and d.counterexample is None]
    assert not missing, describe(missing)


# ---- the interpreter's trace ------------------------------------------------------------------


def test_the_interpreter_adds_its_trace_to_a_race_only_when_asked():
    import numpy as np

    from kir.diagnostics import KirError
    from kir.interp import run
    from kir.parser import parse

    racy = NO_RELEASE.replace("      wait(filled[t], parity = (r / S) % 2)\n", "")
    program = parse(racy, "racy.kir")
    inputs = {"x": np.ones((4, 128), dtype=np.float32)}
    for trace in (False, True):
        with pytest.raises(KirError) as err:
            run(program, inputs, trace=trace)
        (d,) = err.value.diagnostics
        assert d.rule == "interp.race" and d.counterexample is not None
        if not trace:
            assert "trace" not in d.counterexample
            continue
        events = d.counterexample["trace"]
        assert events and all({"role", "op"} <= set(ev) for ev in events)
        # the access that finds the race ends the trace (the race is reported at the read that
        # ran before its write, which comes earlier)
        assert events[-1]["op"] == "store to ring[0] fails here"
        assert any(ev["op"] == "load from ring[0]" and ev["line"] == d.span.line for ev in events)
        assert any(ev.get("barrier", "").startswith("drained[") and "phase" in ev for ev in events)


def test_roles_that_take_turns_through_equal_barriers_in_a_loop_are_clean_on_gfx90a():
    # issue 25: roles that call barrier() as often as each other, whole wavefronts on gfx90a,
    # are neither divergent nor an overwrite before release (the next trip's store waits for
    # the barrier after the read)
    text = """\
kernel turns<B = 64>(x: global f32[N], y: out global f32[N])
  target gfx90a grid(1) warps(4)
{
  buf = smem(f32[B])
  role put warps(0, 1) {
    h = role_rank() * (B / 2)
    for i in 0 .. (N + B - 1) / B {
      offs = i * B + h + arange(0, B / 2)
      store(buf[h : h + B / 2], load(x[offs], mask = offs < N))
      barrier()
      barrier()
    }
  }
  role take warps(2, 3) {
    h = role_rank() * (B / 2)
    for j in 0 .. (N + B - 1) / B {
      barrier()
      offs = j * B + h + arange(0, B / 2)
      store(y[offs], load(buf[h : h + B / 2]) * 2.0, mask = offs < N)
      barrier()
    }
  }
}
"""
    found = [d for d in diagnose(text, "turns.kir") if d.rule.startswith("sync.") or d.is_error]
    assert not found, describe(found)
