"""The attention tactics (causal-skip, exp2-fold, dot-accumulate): each one's precondition pair (a
program it applies to, and what it writes; a near twin it refuses with its rule id at the line
it looked at), their refusals where the pattern does not hold, and the rewrites run on the
interpreter over shapes and tiles the property test's corpus (one program) does not draw."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tactics
from kir.diagnostics import KirError
from kir.interp import run
from kir.parser import parse_file
from tests.tactics.test_preconditions import check_pair, line_of, program, twin
from verifier.check import check_program

TASK = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks" / "causal_attention"

ATTN = """
kernel attn<BM = 16, BN = 16, HD = 16>(
    q: global f32[S, HD],
    k: global f32[S, HD],
    v: global f32[S, HD],
    o: out global f32[S, HD],
)
  where S % BM == 0, S % BN == 0
  target sm_90 grid(S / BM) warps(4)
{
  m0 = program_id(0) * BM
  scale = rsqrt(cast<f32>(HD))
  rows = m0 + arange(0, BM)
  qt = load(q[m0 : m0 + BM, 0 : HD])
  m_i = full(f32[BM], -inf)
  l_i = zeros(f32[BM])
  acc = zeros(f32[BM, HD])
  for j in 0 .. S / BN {
    keys = j * BN + arange(0, BN)
    s = dot<f32>(qt, trans(load(k[j * BN : j * BN + BN, 0 : HD]))) * scale
    s = where(keys[None, :] <= rows[:, None], s, -inf)
    m_new = maximum(m_i, max(s, axis = 1))
    p = exp(s - m_new[:, None])
    alpha = exp(m_i - m_new)
    l_i = l_i * alpha + sum(p, axis = 1)
    acc = acc * alpha[:, None] + dot<f32>(p, load(v[j * BN : j * BN + BN, 0 : HD]))
    m_i = m_new
  }
  store(o[m0 : m0 + BM, 0 : HD], acc / l_i[:, None])
}
"""

# tactic: (the program it applies to, its parameters, a fragment of the result; the twin, the
# rule it is refused with, a fragment of the line the reason points at)
PAIRS = {
    "causal-skip": (
        ATTN, {}, "  for j in 0 .. m0 / BN {\n    s = dot<f32>(qt, trans(load(k[j * BN : j * BN + BN, 0 : HD]))) * scale\n"
        "    m_new = maximum(m_i, max(s, axis = 1))",
        twin(ATTN, "l_i = l_i * alpha + sum(p, axis = 1)", "l_i = l_i + sum(s, axis = 1)"),
        "tactic.causal-skip.not-identity", "for j in",
    ),
    "exp2-fold": (
        ATTN, {}, "  scale = rsqrt(cast<f32>(HD)) * 1.4426950408889634\n",
        twin(ATTN, "0 : HD]))) * scale", "0 : HD])))"), "tactic.exp2-fold.not-scaled", "s = dot<f32>",
    ),
    "defer-scale": (
        ATTN, {"site": 0}, "    m_new = maximum(m_i, max(s, axis = 1) * scale)\n    p = exp(s * scale - m_new[:, None])\n",
        twin(ATTN, "scale = rsqrt(cast<f32>(HD))", "scale = 0.0 - rsqrt(cast<f32>(HD))"),
        "tactic.defer-scale.no-max", "kernel attn",
    ),
    "dot-accumulate": (
        ATTN, {"site": 0}, "acc = dot<f32>(p, load(v[j * BN : j * BN + BN, 0 : HD]), acc * alpha[:, None])",
        twin(ATTN, "acc * alpha[:, None] + dot<f32>", "acc * alpha[:, None] - dot<f32>"),
        "tactic.dot-accumulate.no-sum", "s = dot<f32>",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_applies_to_one_and_refuses_its_twin(name):
    result = check_pair(name, PAIRS[name])
    assert not [d for d in check_program(result) if d.is_error]


def inputs(s: int, hd: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {n: rng.standard_normal((s, hd)).astype(np.float32) for n in "qkv"}
    return {**out, "o": np.zeros((s, hd), np.float32)}


def outputs(prog, given: dict[str, np.ndarray], **params: int) -> np.ndarray:
    bound = prog.with_params(**params) if params else prog
    return run(bound, {k: v.copy() for k, v in given.items()})["o"]


# ---- causal-skip -------------------------------------------------------------------------------------


def test_causal_skip_writes_the_split_loops_and_the_clause():
    text = tactics.get("causal-skip").apply(program(ATTN)).text()
    assert "where S % BM == 0, S % BN == 0, BM % BN == 0\n" in text
    assert "  for j in 0 .. m0 / BN {\n" in text and "  for j in m0 / BN .. (m0 + BM) / BN {\n" in text
    assert text.count("where(keys[None, :] <= rows[:, None], s, -inf)") == 1
    assert text.count("keys = j * BN + arange(0, BN)") == 1
    # a clause the program has already is not written again
    said = twin(ATTN, "S % BN == 0", "S % BN == 0, BM % BN == 0")
    assert tactics.get("causal-skip").apply(program(said)).text().count("BM % BN == 0") == 1


@pytest.mark.parametrize("s, bm, bn", [(16, 16, 16), (64, 16, 16), (64, 32, 16), (96, 32, 8), (48, 16, 8)])
def test_causal_skip_is_bitwise_the_same(s, bm, bn):
    before = program(ATTN).with_params(BM=bm, BN=bn)
    after = tactics.get("causal-skip").apply(before)
    given = inputs(s, 16, seed=s + bm + bn)
    want, got = outputs(before, given), outputs(after, given)
    assert np.isfinite(want).all() and np.array_equal(got, want)


def test_causal_skip_after_the_grid_is_reversed_and_before_pipelining():
    reversed_ = tactics.get("reverse-order").apply(program(ATTN), axis=0)
    after = tactics.get("pipeline").apply(tactics.get("causal-skip").apply(reversed_), loop=0, stages=3)
    text = after.text()
    assert "for j in 0 .. m0 / BN pipeline(stages = 3) {" in text
    assert "for j in m0 / BN .. (m0 + BM) / BN {" in text  # the diagonal's BM / BN blocks: not pipelined
    given = inputs(80, 16, seed=5)
    assert np.array_equal(outputs(after, given), outputs(program(ATTN), given))


def test_causal_skip_on_the_seed_is_bitwise_the_same_at_the_bench_tiles():
    seed = parse_file(TASK / "seed.kir")
    after = tactics.get("causal-skip").apply(seed)
    rng = np.random.default_rng(7)
    import ml_dtypes

    shape = (1, 2, 256, 32)
    given = {n: rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for n in "qkv"}
    given["o"] = np.zeros(shape, ml_dtypes.bfloat16)
    for bm, bn in ((128, 64), (64, 64), (64, 32)):
        want = run(seed.with_params(BM=bm, BN=bn, HD=32), {k: x.copy() for k, x in given.items()})["o"]
        got = run(after.with_params(BM=bm, BN=bn, HD=32), {k: x.copy() for k, x in given.items()})["o"]
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), (bm, bn)


def refusal(text: str) -> tuple[str, int]:
    (d,) = tactics.get("causal-skip").precondition(program(text))
    assert d.span is not None
    return d.rule, d.span.line


@pytest.mark.parametrize(
    "old, new, rule, at",
    [
        # the strict mask: row m0 meets no key of its own block, so its max could stay -inf
        (
            "keys[None, :] <= rows[:, None]",
            "keys[None, :] < rows[:, None]",
            "tactic.causal-skip.no-causal-mask",
            "for j",
        ),
        # key 0 is never visited: the first row meets no key
        ("for j in 0 .. S / BN", "for j in 1 .. S / BN", "tactic.causal-skip.bounds", "for j"),
        # the loop stops short of the diagonal's last block where S is one query block
        ("for j in 0 .. S / BN", "for j in 0 .. S / BN - 1", "tactic.causal-skip.bounds", "for j"),
        ("<BM = 16, BN = 16", "<BM = 8, BN = 16", "tactic.causal-skip.where", "where S"),
        ("for j in 0 .. S / BN {", "for j in 0 .. S / BN step 2 {", "tactic.causal-skip.step", "for j"),
        (
            "    m_i = m_new\n",
            "    m_i = m_new\n    store(o[m0 : m0 + BM, 0 : HD], acc)\n",
            "tactic.causal-skip.effect",
            "store(o[m0 : m0 + BM, 0 : HD], acc)",
        ),
        # the running max restarted each block: -inf on a masked one, and exp(-inf - -inf) is NaN
        ("maximum(m_i, max(s, axis = 1))", "max(s, axis = 1)", "tactic.causal-skip.not-identity", "for j"),
        # keys of another extent than the block's
        (
            "keys = j * BN + arange(0, BN)",
            "keys = j * BM + arange(0, BN)",
            "tactic.causal-skip.no-causal-mask",
            "for j",
        ),
    ],
)
def test_causal_skip_refuses_what_it_cannot_justify(old, new, rule, at):
    bad = twin(ATTN, old, new)
    assert refusal(bad) == (rule, line_of(bad, at))


def test_causal_skip_refuses_the_tuned_program_and_the_explicit_level():
    tuned = parse_file(TASK / "tuned.kir")
    (d,) = tactics.get("causal-skip").precondition(tuned)
    assert d.rule == "tactic.causal-skip.diagonal-only"
    assert "for j in m0 / BN .. (m0 + BM) / BN" in tuned.source.splitlines()[d.span.line - 1]
    (d,) = tactics.get("causal-skip").precondition(parse_file(TASK / "ws.kir"))
    assert d.rule == "tactic.causal-skip.explicit"


# ---- exp2-fold ---------------------------------------------------------------------------------------


def test_exp2_fold_is_within_tolerance_and_reaches_both_loops():
    split = tactics.get("causal-skip").apply(program(ATTN))
    after = tactics.get("exp2-fold").apply(split)
    text = after.text()
    assert "exp(" not in text and text.count("p = exp2(s - m_new[:, None])") == 2
    given = inputs(64, 16, seed=3)
    np.testing.assert_allclose(outputs(after, given), outputs(program(ATTN), given), rtol=1e-5, atol=1e-6)


def test_exp2_fold_names_a_new_scale_where_the_old_one_is_used_elsewhere():
    shared = twin(ATTN, "acc / l_i[:, None]", "acc / l_i[:, None] * (scale * scale * cast<f32>(HD))")
    text = tactics.get("exp2-fold").apply(program(shared)).text()
    assert "  scale = rsqrt(cast<f32>(HD))\n  scale_log2e = scale * 1.4426950408889634\n" in text, text
    assert "* scale_log2e" in text and "(scale * scale * cast<f32>(HD))" in text


@pytest.mark.parametrize(
    "old, new, at",
    [
        # the row max stored (a log-sum-exp output) would be in base 2
        ("acc / l_i[:, None]", "acc / l_i[:, None] + m_i[:, None]", "store(o"),
        # a constant offset is not scaled with the rest
        ("p = exp(s - m_new[:, None])", "p = exp(s - m_new[:, None] - 1.0)", "p = exp"),
        # a product of two tiles: not a value times one scalar
        ("* scale\n", "* l_i[:, None]\n", "s = dot"),
    ],
)
def test_exp2_fold_refuses_a_domain_that_scaling_would_change(old, new, at):
    bad = twin(ATTN, old, new)
    (d,) = tactics.get("exp2-fold").precondition(program(bad))
    assert d.rule == "tactic.exp2-fold.not-scaled" and d.span.line == line_of(bad, at), d


def test_exp2_fold_refuses_the_softmax_seed_at_its_load():
    seed = parse_file(TASK.parent / "softmax" / "seed.kir")
    (d,) = tactics.get("exp2-fold").precondition(seed)
    assert d.rule == "tactic.exp2-fold.not-scaled" and "load(x" in seed.source.splitlines()[d.span.line - 1]
    (d,) = tactics.get("exp2-fold").precondition(parse_file(TASK / "tuned.kir"))
    assert d.rule == "tactic.exp2-fold.no-exp"


# ---- defer-scale ---------------------------------------------------------------------------------------


def test_defer_scale_is_bitwise_the_same_in_both_loops_and_composes():
    split = tactics.get("causal-skip").apply(program(ATTN))
    assert tactics.get("defer-scale").domains(split) == {"site": (0, 1)}
    once = tactics.get("defer-scale").apply(split, site=1)
    both = tactics.get("defer-scale").apply(once, site=0)
    text = both.text()
    assert text.count("s = dot<f32>(qt, trans(load(k[j * BN : j * BN + BN, 0 : HD])))\n") == 2, text
    assert text.count("p = exp(s * scale - m_new[:, None])") == 2
    given = inputs(64, 16, seed=8)
    want = outputs(program(ATTN), given)
    assert np.array_equal(outputs(both, given), want)
    folded = tactics.get("exp2-fold").apply(both)
    assert "scale = rsqrt(cast<f32>(HD)) * 1.4426950408889634\n" in folded.text()
    assert folded.text().count("p = exp2(s * scale - m_new[:, None])") == 2
    np.testing.assert_allclose(outputs(folded, given), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "old, new",
    [
        ("scale = rsqrt(cast<f32>(HD))", "scale = rsqrt(cast<f32>(HD) - 16.0)"),  # zero at HD = 16: not known positive
        ("* scale\n", "* m0f\n"),  # a value of the program, of any sign
        ("max(s, axis = 1)", "sum(s, axis = 1)"),  # no row max to move the scale past
    ],
)
def test_defer_scale_refuses_a_scale_not_known_positive_or_no_max(old, new):
    bad = twin(ATTN, old, new)
    if "m0f" in new:
        bad = twin(bad, "  scale = rsqrt", "  m0f = cast<f32>(m0) - 8.0\n  scale = rsqrt")
    (d,) = tactics.get("defer-scale").precondition(program(bad))
    assert d.rule == "tactic.defer-scale.no-max", d


# ---- dot-accumulate ----------------------------------------------------------------------------------


def test_dot_accumulate_is_bitwise_the_same_on_the_interpreter():
    before = program(ATTN)
    after = tactics.get("dot-accumulate").apply(before)
    assert tactics.get("dot-accumulate").domains(before) == {"site": (0,)}
    given = inputs(48, 16, seed=4)
    assert np.array_equal(outputs(after, given), outputs(before, given))
    with pytest.raises(KirError) as err:
        tactics.get("dot-accumulate").apply(before, site=1)
    assert [d.rule for d in err.value.diagnostics] == ["tactic.dot-accumulate.site"]


def test_dot_accumulate_leaves_a_broadcast_addend_and_a_shared_product():
    broadcast = twin(ATTN, "acc * alpha[:, None] + dot<f32>", "alpha[:, None] + dot<f32>")
    (d,) = tactics.get("dot-accumulate").precondition(program(broadcast))
    assert d.rule == "tactic.dot-accumulate.no-sum"


CAUSAL_SUM = """
kernel causal_sum<BM = 16, BN = 8>(x: global f32[S, S], y: out global f32[S])
  where S % BM == 0, S % BN == 0
  target sm_90 grid(S / BM) warps(4)
{
  m0 = program_id(0) * BM
  rows = m0 + arange(0, BM)
  acc = zeros(f32[BM])
  for j in 0 .. S / BN {
    keys = j * BN + arange(0, BN)
    xt = load(x[m0 : m0 + BM, j * BN : j * BN + BN])
    acc = acc + sum(where(keys[None, :] <= rows[:, None], xt, 0.0), axis = 1)
  }
  store(y[m0 : m0 + BM], acc)
}
"""


def test_causal_skip_takes_a_masked_sum_of_zeros_and_refuses_one_of_minus_inf():
    before = program(CAUSAL_SUM)
    after = tactics.get("causal-skip").apply(before)
    assert "for j in m0 / BN .. (m0 + BM) / BN {" in after.text()
    x = np.random.default_rng(6).standard_normal((48, 48)).astype(np.float32)
    given = {"x": x, "y": np.zeros(48, np.float32)}
    want = run(before, {k: v.copy() for k, v in given.items()})["y"]
    got = run(after, {k: v.copy() for k, v in given.items()})["y"]
    assert np.array_equal(got, want)
    np.testing.assert_allclose(want, np.tril(x).sum(axis=1), rtol=1e-5, atol=1e-5)
    minus_inf = twin(CAUSAL_SUM, "xt, 0.0)", "xt, -inf)")
    assert refusal(minus_inf) == ("tactic.causal-skip.not-identity", line_of(minus_inf, "for j"))


def test_exp2_fold_refuses_a_value_scaled_twice():
    twice = twin(ATTN, "p = exp(s - m_new[:, None])", "p = exp(s * scale - m_new[:, None])")
    (d,) = tactics.get("exp2-fold").precondition(program(twice))
    assert d.rule == "tactic.exp2-fold.not-scaled" and "twice" in d.message
    assert d.span.line == line_of(twice, "p = exp")
