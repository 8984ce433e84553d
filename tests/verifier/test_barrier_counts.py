"""CTA barriers as the hardware counts them: roles may each call barrier() as long as every role
arrives as many times (calls times the trips of the loops around them inside the role); unequal
counts, or a barrier under an if, are `sync.barrier-divergent` at the role that arrives more."""

from __future__ import annotations

import pytest

from kir.parser import parse
from verifier.check import check_program

HEAD = """\
kernel k<B = 128>(x: global f32[N], y: out global f32[N])
  where N % B == 0
  target {target} grid(N / B) warps({warps})
{{
  buf = smem(f32[B])
  i = program_id(0) * B + arange(0, B)
  role producer warps({first}) {{
    store(buf[0 : B], load(x[i]))
{producer}
  }}
  role consumer warps({second}) {{
{consumer}
    store(y[i], load(buf[0 : B]) * 2.0)
  }}
}}
"""


def program(producer: str, consumer: str, target: str = "sm_90") -> str:
    # whole wavefronts on gfx90a (two KIR warps each)
    warps, first, second = ("2", "0", "1") if target == "sm_90" else ("4", "0, 1", "2, 3")
    return HEAD.format(target=target, warps=warps, first=first, second=second, producer=producer, consumer=consumer)


def divergent(text: str) -> list:
    return [d for d in check_program(parse(text, "b.kir")) if d.rule == "sync.barrier-divergent"]


@pytest.mark.parametrize(
    ("producer", "consumer"),
    [
        ("    barrier()", "    barrier()"),
        ("    barrier()\n    barrier()", "    barrier()\n    barrier()"),
        ("    for j in 0 .. 2 {\n      barrier()\n    }", "    barrier()\n    barrier()"),
        ("    for j in 0 .. N / B {\n      barrier()\n    }", "    for t in 0 .. N / B {\n      barrier()\n    }"),
    ],
)
def test_equal_counts_are_not_divergent(producer, consumer):
    assert divergent(program(producer, consumer)) == []


def test_equal_counts_on_gfx90a_are_not_divergent():
    assert divergent(program("    barrier()", "    barrier()", "gfx90a")) == []


@pytest.mark.parametrize(
    ("producer", "consumer", "line", "words"),
    [
        ("    barrier()\n    barrier()", "    barrier()", 9, "2 times, but `consumer` once"),
        ("    barrier()", "", 9, "once, but `consumer` never"),
        ("    for j in 0 .. 3 {\n      barrier()\n    }", "    barrier()\n    barrier()", 10, "3 times"),
        ("    for j in 0 .. N / B {\n      barrier()\n    }", "    barrier()", 10, "set by its loops"),
    ],
)
def test_unequal_counts_are_divergent_at_the_role_that_arrives_more(producer, consumer, line, words):
    found = divergent(program(producer, consumer))
    assert [d.span.line for d in found] == [line], found
    assert words in found[0].message and found[0].related


def test_a_barrier_under_an_if_is_divergent():
    text = program("    if program_id(0) > 0 {\n      barrier()\n    }", "    barrier()")
    assert any("under an if" in d.message for d in divergent(text))
