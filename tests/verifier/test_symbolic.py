"""The symbolic layer of the verifier: KIR's integer semantics in z3, lanes and broadcasting,
counterexamples, what a query assumes, congruences, and the proof cache."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import z3

from kir import symexpr as sx
from kir.dialect import tile as tl
from kir.parser import parse
from verifier.context import Context
from verifier.symbolic import CACHE, Symbolic, c_div, c_rem, readable


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    """Every test starts with an empty proof cache of its own."""
    monkeypatch.setenv("KIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KIR_Z3_CACHE", "1")
    CACHE.reset()
    yield
    CACHE.reset()


def sym_of(text: str, params: dict[str, int] | None = None) -> tuple[Symbolic, dict]:
    """The evaluator of a program and its values by name."""
    program = parse(text, file="t.kir")
    ctx = Context(program, None, params)
    values = {}
    for op in program.kernel.walk():
        for r in op.results:
            if r.name_hint:
                values[r.name_hint] = r
    return ctx.symbolic, values


def proves(s: Symbolic, claim) -> bool:
    return s.counterexample(claim) is None


# ---- C integer semantics -----------------------------------------------------------------------------


@pytest.mark.parametrize("a, b", list(itertools.product([-7, -6, -1, 0, 1, 5, 7], [-3, -2, 2, 3])))
def test_division_truncates_toward_zero(a, b):
    """`/` and `%` as in C (and the interpreter): -7 / 2 == -3, -7 % 2 == -1."""
    x, y = z3.Ints("x y")
    want_q, want_r = sx.c_div(a, b), sx.c_rem(a, b)
    for q, r in ((c_div(x, y), c_rem(x, y)), (c_div(x, b), c_rem(x, b))):  # symbolic and constant divisor
        s = z3.Solver()
        s.add(x == a, y == b, z3.Or(q != want_q, r != want_r))
        assert s.check() == z3.unsat, (a, b)
    assert z3.simplify(c_div(z3.IntVal(a), z3.IntVal(b))).as_long() == want_q


def test_kir_division_and_shift_of_negative_values():
    s, v = sym_of(
        """
kernel k(x: global i32[N]) target sm_90 grid(1) warps(1) {
  a = 0 - 7
  q = a / 2
  r = a % 2
  h = a >> 1
  m = a & 3
}
"""
    )
    assert proves(s, s.value(v["q"]).expr == -3)
    assert proves(s, s.value(v["r"]).expr == -1)
    assert proves(s, s.value(v["h"]).expr == -4)  # arithmetic shift: floor, not truncation
    assert proves(s, s.value(v["m"]).expr == 1)  # -7 & 3 == 1 in two's complement


def test_static_sizes_use_c_division_too():
    s, _ = sym_of("kernel k(x: global f32[N]) target sm_90 grid(1) warps(1) { }")
    assert proves(s, s.sym(sx.Bin("/", sx.Int(-7), sx.Int(2))) == -3)
    assert proves(s, s.sym(sx.Bin("cdiv", sx.Int(7), sx.Int(2))) == 4)


# ---- lanes and broadcasting -------------------------------------------------------------------------

GATHER = """
kernel g<BM = 4, BN = 8>(x: global f32[M, N]) target sm_90 grid(cdiv(M, BM)) warps(1) {
  rows = program_id(0) * BM + arange(0, BM)
  cols = arange(0, BN)
  idx = rows[:, None] * N + cols[None, :]
  t = trans(idx)
}
"""


def test_broadcasting_substitutes_lanes():
    s, v = sym_of(GATHER)
    i, j = s.lanes((sx.Int(4), sx.Int(8)), "t")
    term = s.value(v["idx"], (i, j))
    p = s.pids[0]
    assert not term.tainted
    assert proves(s, term.expr == (p * 4 + i) * s.names["N"] + j)
    # a dimension of extent 1 sits at lane 0 when broadcast
    expanded = s.at(v["rows"], (i,))
    assert proves(s, expanded.expr == p * 4 + i)
    # trans swaps the lanes
    tt = s.value(v["t"], (j, i))
    assert proves(s, tt.expr == term.expr)


def test_lanes_range_over_the_tile():
    s, v = sym_of(GATHER)
    (i,) = s.lanes((sx.Int(4),), "r")
    rows = s.value(v["rows"], (i,)).expr
    assert proves(s, z3.And(rows >= 0, rows < s.pids[0] * 4 + 4))
    assert not proves(s, rows < s.pids[0] * 4 + 3)
    assert s.lanes((sx.Int(4),), "r") == (i,)  # the same tag gives the same lanes


# ---- counterexamples ---------------------------------------------------------------------------------

VADD = """
kernel vadd<BLOCK = 128>(x: global f32[N], z: out global f32[N]) target sm_90 grid(cdiv(N, BLOCK)) warps(4) {
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
}
"""


def test_counterexample_names_symbols_program_ids_and_lanes():
    s, v = sym_of(VADD)
    (lane,) = s.lanes((sx.Int(128),), "st")
    offs = s.value(v["offs"], (lane,)).expr
    cex = s.counterexample(offs < s.names["N"], evaluate={"index": offs})
    assert cex is not None
    assert {"N", "program_id(0)", "lane0@st", "index"} <= set(cex)
    assert cex["index"] == cex["program_id(0)"] * 128 + cex["lane0@st"] >= cex["N"]
    assert 0 <= cex["program_id(0)"] < -(-cex["N"] // 128)  # inside the grid
    shown = readable({k: w for k, w in cex.items() if k != "index"}, 1)
    assert list(shown) == ["N", "program_id", "lane"] and len(shown["program_id"]) == 1


def test_counterexample_leaves_out_unknowns_and_is_none_when_claim_holds():
    s, v = sym_of(VADD)
    (lane,) = s.lanes((sx.Int(128),), "a")
    offs = s.value(v["offs"], (lane,)).expr
    assert s.counterexample(offs >= 0) is None
    unknown = s.fresh("data")
    cex = s.counterexample(offs + unknown >= 0)
    assert cex is not None and not any(k.startswith("?") for k in cex)


def test_where_constraints_are_assumed():
    text = VADD.replace("target", "where N % BLOCK == 0\n  target")
    s, v = sym_of(text)
    (lane,) = s.lanes((sx.Int(128),), "a")
    assert proves(s, s.value(v["offs"], (lane,)).expr < s.names["N"])


def test_parameters_are_constants_and_can_be_overridden():
    s, v = sym_of(VADD, {"BLOCK": 64})
    (lane,) = s.lanes((sx.Int(64),), "a")
    assert proves(s, s.value(v["offs"], (lane,)).expr == s.pids[0] * 64 + lane)


LOOPS = """
kernel loops<S = 4>(x: global f32[K]) where K % 64 == 0 target sm_90 grid(1) warpgroups(3) {
  role mma warpgroups(1, 2) regs(232) {
    r = role_rank() * 64
    for k in 0 .. K / 64 {
      s = k % S
      if k < 3 {
        t = k + 1
      }
    }
  }
}
"""


def test_loop_variables_ranks_and_if_paths():
    s, v = sym_of(LOOPS)
    st = s.value(v["s"]).expr
    assert proves(s, z3.And(st >= 0, st < 4))
    r = s.value(v["r"]).expr
    assert proves(s, z3.Or(r == 0, r == 64))
    t = v["t"]
    path = s.path(t.owner)
    assert proves(s, z3.Implies(path.expr, s.value(t).expr <= 3))
    assert not proves(s, s.value(t).expr <= 3)
    cex = s.counterexample(s.value(v["s"]).expr < 3)
    assert cex is not None and "k" in cex and cex["k"] % 4 == 3


def test_a_query_about_sizes_does_not_assume_a_loop_runs():
    """The range of `k` mentions K; asking about K alone must not bring `k`'s facts in (they
    would assume that the loop runs, so K >= 192)."""
    s, v = sym_of(
        """
kernel loops(x: global f32[K]) where K % 64 == 0 target sm_90 grid(1) warps(4) {
  for k in 2 .. K / 64 {
    t = k + 1
  }
}
"""
    )
    assert proves(s, s.value(v["t"]).expr >= 3)  # meets k: its range is known from now on
    cex = s.counterexample(s.names["K"] >= 192)
    assert cex is not None and "k" not in cex and cex["K"] in (64, 128)
    assert proves(s, z3.Implies(s.loop_vars[v["t"].owner.operands[0]] >= 0, s.names["K"] >= 192))


def test_taint_names_the_value_it_cannot_follow():
    s, v = sym_of(
        """
kernel t<B = 16>(idx: global i32[N], x: global f32[N]) target sm_90 grid(1) warps(4) {
  lanes = arange(0, B)
  rows = load(idx[lanes], mask = lanes < N)
  r2 = rows + 1
  lo = zeros(i32[B])
  for it in 0 .. 4 {
    lo = maximum(lo, lanes)
  }
  f = cast<i32>(cast<f32>(lanes))
  best = argmin(cast<f32>(lanes), axis = 0)
}
"""
    )
    (lane,) = s.lanes((sx.Int(16),), "a")
    r2 = s.at(v["r2"], (lane,))
    assert r2.tainted and "`rows` (loaded from memory)" in r2.why
    from kir.dialect.structure import ForOp

    loop = next(op for op in v["r2"].owner.parent_block().ops if isinstance(op, ForOp))
    carried = s.value(loop.body.block.args[1], (lane,))
    assert carried.tainted and "carried by the loop" in carried.why
    assert s.at(v["f"], (lane,)).tainted
    best = s.value(v["best"])  # data-dependent but bounded: not tainted
    assert not best.tainted and proves(s, z3.And(best.expr >= 0, best.expr < 16))


CARRIED = """
kernel walk<BK = 32, B = 16>(x: global f32[K], bounds: global f32[N]) where K % BK == 0 target sm_90 grid(1) warps(4) {
  off = 0
  lo = zeros(i32[B])
  hi = full(i32[B], N)
  sneaky = 0
  for k in 1 .. K / BK {
    a = off + 1
    mid = (lo + hi) / 2
    right = load(bounds[mid], mask = mid < N, other = inf) < 0.0
    lo = where(right, mid + 1, lo)
    hi = where(right, hi, mid)
    sneaky = sneaky - k
    off = off + BK
  }
}
"""


def test_induction_variables_are_exact():
    """`off = off + BK` is `(k - 1) * BK` at iteration k: known, untainted."""
    s, v = sym_of(CARRIED)
    a = s.value(v["a"])
    k = next(iter(s.loop_vars.values()))
    assert not a.tainted
    assert proves(s, a.expr == (k - 1) * 32 + 1)


def test_carried_bounds_are_proved_by_induction():
    """lo and hi of a binary search stay >= 0 (so mid does), though nothing bounds them above
    without knowing the data; a carried value going down keeps no lower bound."""
    s, v = sym_of(CARRIED)
    (lane,) = s.lanes((sx.Int(16),), "a")
    mid = s.at(v["mid"], (lane,))
    assert mid.tainted and "carried by the loop" in mid.why
    assert proves(s, mid.expr >= 0)
    assert not proves(s, mid.expr < s.names["N"])
    loop = next(iter(s.loop_vars)).block.parent_op()
    sneaky = s.value(next(a for a in loop.body.block.args if a.name_hint == "sneaky"))
    assert sneaky.tainted and proves(s, sneaky.expr <= 0) and not proves(s, sneaky.expr >= -5)


def test_congruences_handle_products_of_unknowns():
    s, v = sym_of(
        """
kernel c<BLOCK = 256>(x: global f32[M, N]) where N % 256 == 0 target sm_90 grid(M, N / BLOCK) warps(4) {
  off = program_id(0) * N + program_id(1) * BLOCK + 1
}
"""
    )
    r, m = s.congruence(s.value(v["off"]).expr * 4)
    assert m % 16 == 0 and r % 16 == 4  # always 4 bytes past a 16-byte boundary
    assert s.congruence(z3.IntVal(12)) == (12, 0)
    assert s.congruence(s.pids[0]) == (0, 1)


def test_equal_values():
    s, v = sym_of(
        """
kernel e<BM = 64>(x: global f32[M]) target sm_90 grid(M / BM) warps(4) {
  a = program_id(0) * BM
  b = BM * program_id(0)
  c = a + 1
}
"""
    )
    assert s.equal(v["a"], v["b"]) and not s.equal(v["a"], v["c"])


def test_equal_values_over_an_unknown():
    """A counter carried by a loop is unknown, but the same computation over it is the same
    value (a ring stage `base % S` computed twice: the wait and the read it guards)."""
    s, v = sym_of(
        """
kernel e<S = 2>(x: global i32[M]) target sm_90 grid(1) warps(4) {
  base = 0
  for t in 0 .. M {
    n = load(x[t])
    st1 = base % S
    st2 = base % S
    nx = (base + 1) % S
    base = base + n
  }
}
"""
    )
    assert s.value(v["st1"]).tainted
    assert s.equal(v["st1"], v["st2"]) and not s.equal(v["st1"], v["nx"])


# ---- the proof cache -----------------------------------------------------------------------------------


def test_cache_answers_a_repeated_query_without_the_solver():
    s1, v1 = sym_of(VADD)
    (lane,) = s1.lanes((sx.Int(128),), "a")
    claim = s1.value(v1["offs"], (lane,)).expr < s1.names["N"]
    first = s1.counterexample(claim)
    assert s1.solver_calls == 1 and CACHE.misses >= 1
    s2, v2 = sym_of(VADD)
    (lane2,) = s2.lanes((sx.Int(128),), "other-tag")  # lanes renamed canonically in the key
    again = s2.counterexample(s2.value(v2["offs"], (lane2,)).expr < s2.names["N"])
    assert s2.solver_calls == 0 and CACHE.hits >= 1
    assert again is not None and "lane0@other-tag" in again  # the names of the asking query
    assert again["N"] == first["N"]


def test_cache_persists_on_disk(tmp_path, monkeypatch):
    s, v = sym_of(VADD)
    (lane,) = s.lanes((sx.Int(128),), "a")
    s.counterexample(s.value(v["offs"], (lane,)).expr < s.names["N"])
    CACHE.flush()
    assert (tmp_path / "cache" / "z3-proofs.json").exists()
    CACHE.reset()  # a new process
    s2, v2 = sym_of(VADD)
    (lane2,) = s2.lanes((sx.Int(128),), "a")
    s2.counterexample(s2.value(v2["offs"], (lane2,)).expr < s2.names["N"])
    assert s2.solver_calls == 0


def test_cache_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("KIR_Z3_CACHE", "0")
    CACHE.reset()
    for _ in range(2):
        s, v = sym_of(VADD)
        (lane,) = s.lanes((sx.Int(128),), "a")
        s.counterexample(s.value(v["offs"], (lane,)).expr < s.names["N"])
        assert s.solver_calls == 1
    assert CACHE.hits == 0


def test_solver_gives_up_is_kept_in_memory_only(tmp_path, monkeypatch):
    """A query the solver gave up on is not asked again in this process (it would give up again,
    after the same timeout, at every check of the same candidate), and never written to disk."""
    import verifier.symbolic as symbolic

    monkeypatch.setattr(symbolic, "SOLVER_TIMEOUT_MS", 1)
    a, b, c = z3.Ints("a b c")
    hard = z3.Implies(z3.And(a > 0, b > 0, c > 0), a * a * a + b * b * b != c * c * c)  # Fermat, n = 3
    s, _ = sym_of(VADD)
    got = s.counterexample(hard)
    if got is None or "unknown" not in got:
        pytest.skip("the solver decided Fermat's n = 3 within 1 ms")
    again, _ = sym_of(VADD)
    assert again.counterexample(hard) == got and again.solver_calls == 0
    assert not any(val is not None and "unknown" in val for val in CACHE.memory.values())
    CACHE.flush()
    on_disk = tmp_path / "cache" / "z3-proofs.json"
    assert not on_disk.exists() or "unknown" not in on_disk.read_text()
    CACHE.reset()  # a new process asks the solver again
    fresh, _ = sym_of(VADD)
    fresh.counterexample(hard)
    assert fresh.solver_calls == 1


def test_a_disk_entry_of_another_shape_is_no_answer(tmp_path):
    s, v = sym_of(VADD)
    (lane,) = s.lanes((sx.Int(128),), "a")
    claim = s.value(v["offs"], (lane,)).expr < s.names["N"]
    s.counterexample(claim)
    CACHE.flush()
    on_disk = tmp_path / "cache" / "z3-proofs.json"
    entries = json.loads(on_disk.read_text())
    on_disk.write_text(json.dumps({k: [1, 2] for k in entries}))  # lists, not answers
    CACHE.reset()
    s2, v2 = sym_of(VADD)
    (lane2,) = s2.lanes((sx.Int(128),), "a")
    assert s2.counterexample(s2.value(v2["offs"], (lane2,)).expr < s2.names["N"]) is not None
    assert s2.solver_calls == 1


def test_load_ops_are_tainted_but_indices_are_not():
    s, v = sym_of(
        """
kernel l<B = 8>(x: global i32[N]) target sm_90 grid(1) warps(1) {
  i = arange(0, B)
  y = load(x[i], mask = i < N)
}
"""
    )
    (lane,) = s.lanes((sx.Int(8),), "a")
    assert not s.at(v["i"], (lane,)).tainted
    assert s.at(v["y"], (lane,)).tainted
    assert isinstance(v["y"].owner, tl.LoadOp)


# ---- the layer at work: the bounds rules ------------------------------------------------------------------

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.kir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_have_no_bounds_errors(path):
    """Indices loaded from memory (embedding_bag) are unproven, never wrong; carried indices
    (bucketize) are proved by induction."""
    from verifier import verify

    diags = [d for d in verify(parse(path.read_text(), file=str(path))) if d.rule.startswith("bounds.")]
    assert not [d for d in diags if d.severity == "error"], [d.message for d in diags]
    expected = {"embedding_bag": {"bounds.unproven"}}.get(path.stem, set())
    assert {d.rule for d in diags} == expected


def test_bounds_error_carries_the_counterexample():
    from verifier import verify

    text = VADD.replace("}", "  store(z[offs], load(x[offs], mask = offs < N))\n}")
    [diag] = [d for d in verify(parse(text, file="t.kir")) if d.rule == "bounds.global-access"]
    cex = diag.counterexample
    assert list(cex) == ["N", "program_id", "lane"]
    assert cex["program_id"][0] * 128 + cex["lane"][0] >= cex["N"]
    assert f"N = {cex['N']}" in diag.message and "program_id = [" in diag.message


SWIZZLED = """
kernel s<T = 1024>(x: global f32[B], y: out global f32[T]) where T % 32 == 0 target sm_90 grid(1) warps(4) {
  i = arange(0, T)
  held = i ^ ((i >> 5) & 31)
  table = load(x[held], mask = held < B)
  store(y[i], gather(table, held, axis = 0))
}
"""


def test_xor_with_a_small_value_keeps_the_high_bits():
    """`i ^ ((i >> 5) & 31)` stays in i's 32-aligned row: in bounds of a table of T % 32 == 0
    slots, and of nothing smaller."""
    from verifier import verify

    program = parse(SWIZZLED, file="t.kir")
    assert not [d for d in verify(program) if d.rule.startswith("bounds.")]
    s, v = sym_of(SWIZZLED)
    (lane,) = s.lanes((sx.Int(1024),), "a")
    held = s.at(v["held"], (lane,)).expr
    assert proves(s, z3.And(held >= lane - lane % 32, held <= lane - lane % 32 + 31))
    assert not proves(s, held == lane)  # the low bits are not known
    # a table of 1000 slots (not a multiple of 32) is not proved: the last row reaches 1023
    bad = SWIZZLED.replace("where T % 32 == 0", "").replace("y: out global f32[T]", "y: out global f32[1000]")
    bad = bad.replace("arange(0, T)", "arange(0, 1000)")
    rules = {d.rule for d in verify(parse(bad, file="t.kir"))}
    assert rules & {"bounds.gather-index", "bounds.unproven"}


def test_xor_with_an_unknown_value_is_not_modelled():
    s, v = sym_of(
        """
kernel s<B = 8>(x: global i32[N], k: global i32[1]) target sm_90 grid(1) warps(1) {
  i = arange(0, B)
  j = i ^ load(k[0])
}
"""
    )
    (lane,) = s.lanes((sx.Int(8),), "a")
    assert s.at(v["j"], (lane,)).tainted


_DESCENT = """
kernel descent<LEVELS = 5, T = 32>(x: global f32[N], table: global f32[T], out: out global i32[N])
  target sm_90 grid(cdiv(N, 128)) warps(4)
{
  offs = program_id(0) * 128 + arange(0, 128)
  v = load(x[offs], mask = offs < N)
  k = full(i32[128], 1)
  for it in 0 .. LOOP {
    k = STEP
  }
  store(out[offs], k, mask = offs < N)
}
"""


@pytest.mark.parametrize(
    ("loop", "step", "proved"),
    [
        # a tree descent in breadth-first order: after `it` levels the node is below 2^(it + 1)
        ("LEVELS", "2 * k + cast<i32>(load(table[k]) < v)", True),
        ("LEVELS", "4 * k + 3 * cast<i32>(load(table[k]) < v)", False),  # base 4 from 1 passes 32
        ("LEVELS + 1", "2 * k + cast<i32>(load(table[k]) < v)", False),  # one level too many
        ("LEVELS", "2 * k + 2 * cast<i32>(load(table[k]) < v)", False),  # not a base-2 digit
    ],
)
def test_a_value_appending_a_digit_every_trip_is_bounded_trip_by_trip(loop, step, proved):
    from verifier.check import check_program

    program = parse(_DESCENT.replace("LOOP", loop).replace("STEP", step), file="descent.kir")
    rules = {d.rule for d in check_program(program, "sm_90")}
    assert ("bounds.unproven" not in rules and "bounds.load" not in rules) == proved, rules
