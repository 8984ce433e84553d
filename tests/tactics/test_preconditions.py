"""Each tactic's precondition pair: a program it applies to, and a near twin it refuses with
its rule id at the line it looked at; and what applying it to the first one writes."""

from __future__ import annotations

import textwrap

import pytest

import tactics
from kir.diagnostics import KirError
from kir.parser import parse
from kir.program import Program

SCALE = """
kernel scale<BLOCK = 256>(x: global f32[N], s: global f32[R], y: out global f32[N])
  where R == 1
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
  store(y[offs], v / load(s[0]), mask = mask)
}
"""

ROWSUM = """
kernel rowsum<BM = 16, BK = 32>(a: global f32[M, K], y: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_90 grid(M / BM) warps(4)
{
  rows = program_id(0) * BM + arange(0, BM)
  acc = zeros(f32[BM])
  for k in 0 .. K / BK pipeline(stages = 2) {
    cols = k * BK + arange(0, BK)
    acc = acc + sum(load(a[rows[:, None], cols[None, :]]), axis = 1)
  }
  store(y[rows], acc)
}
"""


def program(text: str):
    return parse(textwrap.dedent(text).lstrip("\n"), file="t.kir")


def twin(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def line_of(text: str, fragment: str) -> int:
    lines = textwrap.dedent(text).lstrip("\n").splitlines()
    return next(i + 1 for i, line in enumerate(lines) if fragment in line)


# tactic: (the program it applies to, its parameters, a fragment of the result; the twin, the
# rule it is refused with, a fragment of the line the reason points at)
PAIRS = {
    "warps": (
        SCALE, {"warps": 16}, "warps(16)",
        twin(SCALE, "warps(4)", "warpgroups(1)"), "tactic.warps.warpgroups", "warpgroups(1)",
    ),
    "stages": (
        ROWSUM, {"stages": 4}, "pipeline(stages = 4)",
        twin(ROWSUM, " pipeline(stages = 2)", ""), "tactic.stages.no-pipeline", "for k in",
    ),
    "pipeline": (
        twin(ROWSUM, " pipeline(stages = 2)", ""), {"stages": 3}, "pipeline(stages = 3)",
        ROWSUM, "tactic.pipeline.no-loop", "for k in",
    ),
    "retile": (
        SCALE, {"param": "BLOCK", "value": 512}, "kernel scale<BLOCK = 512>",
        SCALE.replace("<BLOCK = 256>", "").replace("BLOCK", "256"), "tactic.retile.no-tile-param", "kernel scale",
    ),
    "fix-shape": (
        SCALE, {"symbol": "N", "value": 4096}, "where R == 1, N == 4096",
        twin(SCALE, "where R == 1", "where R == 1, N == 4096"), "tactic.fix-shape.none-free", "where R == 1",
    ),
    "reciprocal": (
        SCALE, {}, "v * (1.0 / load(s[0]))",
        twin(SCALE, "v / load(s[0])", "v / load(x[offs], mask = mask)"), "tactic.reciprocal.no-division", "store(y",
    ),
    "cache-policy": (
        SCALE, {"load": 1, "policy": "last"}, "load(s[0], evict = last)",
        twin(twin(SCALE, "  v = load(x[offs], mask = mask)\n", ""), "v / load(s[0])", "cast<f32>(offs)"),
        "tactic.cache-policy.no-load", "kernel scale",
    ),
}  # fmt: skip


def all_pairs() -> set[str]:
    """The tactics with a pair: here, and in each group's own file (tests/tactics/test_<group>.py
    with a `PAIRS` of the same form)."""
    import importlib
    import pkgutil

    import tests.tactics

    names = set(PAIRS)
    for info in pkgutil.iter_modules(tests.tactics.__path__):
        if info.name.startswith("test_") and info.name != "test_preconditions":
            names |= set(getattr(importlib.import_module(f"tests.tactics.{info.name}"), "PAIRS", {}))
    return names


def test_every_tactic_has_a_pair():
    assert all_pairs() == set(tactics.names())


def check_pair(name: str, pair: tuple) -> Program:
    """A tactic's precondition pair: it applies to the first program (which it leaves unchanged,
    writing `wrote` into its result) and refuses the near twin with `rule` at the line of
    `fragment`, both as its precondition's answer and when applied anyway. The result."""
    tactic = tactics.get(name)
    good, params, wrote, bad, rule, fragment = pair
    accepted = program(good)
    assert tactic.precondition(accepted) == []
    before = accepted.text()
    result = tactic.apply(accepted, **params)
    assert accepted.text() == before
    assert wrote in result.text(), result.text()
    refused = program(bad)
    reasons = tactic.precondition(refused)
    assert [d.rule for d in reasons] == [rule], reasons
    assert reasons[0].span is not None and reasons[0].span.line == line_of(bad, fragment), reasons[0]
    with pytest.raises(KirError) as err:
        tactic.apply(refused, **params)
    assert [d.rule for d in err.value.diagnostics] == [rule]
    return result


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_applies_to_one_and_refuses_its_twin(name):
    check_pair(name, PAIRS[name])


def test_a_bad_value_is_located_at_what_it_sets():
    with pytest.raises(KirError) as err:
        tactics.get("warps").apply(program(SCALE), warps=3)
    (d,) = err.value.diagnostics
    assert d.rule == "tactic.param" and d.span.line == line_of(SCALE, "warps(4)") and "power of two" in d.message


def test_values_that_do_not_fit_the_program_are_refused_with_reasons():
    bounded = twin(ROWSUM, "where M % BM == 0", "where M % BM == 0, BM <= BK")
    assert tactics.get("retile").apply(program(bounded), param="BM", value=32)  # BM <= BK holds
    with pytest.raises(KirError) as err:
        tactics.get("retile").apply(program(bounded), param="BM", value=64)
    (d,) = err.value.diagnostics
    assert d.rule == "tactic.retile.where" and d.span.line == line_of(bounded, "where") and "BM <= BK" in d.message
    with pytest.raises(KirError) as err:
        tactics.get("retile").apply(program(SCALE), param="N", value=64)
    (d,) = err.value.diagnostics
    assert d.rule == "tactic.retile.not-a-tile" and "BLOCK" in d.hint
    with pytest.raises(KirError) as err:
        tactics.get("stages").apply(program(ROWSUM), loop=1)
    assert [d.rule for d in err.value.diagnostics] == ["tactic.stages.loop"]
    with pytest.raises(KirError) as err:
        tactics.get("fix-shape").apply(program(SCALE), symbol="R", value=2)
    assert [d.rule for d in err.value.diagnostics] == ["tactic.fix-shape.symbol"]


def test_an_unknown_tactic_or_parameter_gets_a_suggestion():
    with pytest.raises(KirError) as err:
        tactics.get("wraps")
    assert err.value.diagnostics[0].rule == "tactic.unknown" and "'warps'" in err.value.diagnostics[0].hint
    with pytest.raises(KirError) as err:
        tactics.get("warps").apply(program(SCALE), wraps=8)
    assert err.value.diagnostics[0].rule == "tactic.param" and "'warps'" in err.value.diagnostics[0].hint


def test_applicable_lists_the_tactics_that_apply_with_their_domains():
    found = dict(tactics.applicable(program(SCALE), "sm_90", shapes={"N": 1000, "R": 1}))
    by_name = {t.name: d for t, d in found.items()}
    # every tactic whose precondition holds on this row kernel (split-row and one-pass do not: it
    # reduces the row, and computes no variance); row-band takes its blocks as the band's rows
    assert set(by_name) == {
        "warps", "retile", "fix-shape", "reciprocal", "cache-policy", "specialize-where", "align", "row-band",
    }  # fmt: skip
    assert by_name["row-band"] == {"rows": (1, 2, 4)}  # cdiv(1000, 256) = 4 blocks
    assert by_name["warps"]["warps"] == (1, 2, 8, 16, 32)
    assert by_name["fix-shape"] == {"symbol": ("N",), "value": (1000,)}  # R is fixed already
    exact = {t.name for t, _ in tactics.applicable(program(SCALE), numerics=("exact",))}
    assert "reciprocal" not in exact and "retile" not in exact and "warps" in exact
