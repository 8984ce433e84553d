"""`cp.async.wait(n)` (and `wgmma.wait(n)`, `tma.store_wait(n)`) takes a static expression of
parameters (docs/language.md, "Static expressions"): an S-stage ring waits with
`cp.async.wait(S - 2)`. The count stays symbolic in the
IR, so a new parameter value changes it; the interpreter binds it, the C backends print the folded
constant, and what cannot fold (a shape symbol, a run-time value) or is negative is refused where
it is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kir.diagnostics import KirError
from kir.interp import run
from kir.parser import parse
from lowering.entry import lower
from tests.verifier.harness import describe, diagnose

RING = """
kernel row_sums<BM = 32, BK = 32, S = 3>(x: global f32[M, K], y: out global f32[M])
  where M % BM == 0, K % BK == 0, K / BK >= S
  target {target} grid(M / BM) warps({warps})
{{
  buf = smem(f32[S, BM, BK])
  m0 = program_id(0) * BM
  for i in 0 .. S - 1 {{
    cp.async(x[m0 : m0 + BM, i * BK : i * BK + BK], buf[i])
    cp.async.commit()
  }}
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {{
    cp.async.wait({pending})
    barrier()
    acc = acc + sum(load(buf[k % S]), axis = 1)
    barrier()
    nxt = k + S - 1
    cp.async(x[m0 : m0 + BM, nxt * BK : nxt * BK + BK], buf[nxt % S], mask = nxt < K / BK)
    cp.async.commit()
  }}
  store(y[m0 : m0 + BM], acc)
}}
"""
WAIT_LINE = 14


def ring(pending: str = "S - 2", target: str = "sm_80") -> str:
    return RING.format(pending=pending, target=target, warps=1 if target == "mtia-sim" else 4)


def test_the_count_prints_back_as_written_and_checks_clean():
    program = parse(ring())
    assert "cp.async.wait(S - 2)" in program.text()
    assert not [d for d in diagnose(ring()) if d.severity in ("error", "warning")]


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_the_interpreter_binds_the_parameters(stages):
    x = np.random.default_rng(0).standard_normal((64, 32 * 6)).astype(np.float32)
    out = run(parse(ring()), {"x": x}, {"S": stages})
    np.testing.assert_allclose(out["y"], x.sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    ("backend", "target", "text"),
    [("cuda", "sm_80", "kir_cp_async_wait<{}>();"), ("mtia-sim", "mtia-sim", "kir_pe.dma_wait({},")],
)
@pytest.mark.parametrize("stages", [3, 4])
def test_the_c_backends_print_the_folded_count(backend, target, text, stages):
    program = parse(ring(target=target))
    source = lower(program.with_params(S=stages), backend).source
    assert text.format(stages - 2) in source


@pytest.mark.parametrize(("backend", "target"), [("cuda", "sm_80"), ("mtia-sim", "mtia-sim")])
def test_a_count_that_parameters_make_negative_is_refused_at_the_wait(backend, target):
    with pytest.raises(KirError) as err:
        lower(parse(ring(target=target)), backend, {"S": 1})
    (d,) = err.value.diagnostics
    assert d.span is not None and d.span.line == WAIT_LINE, d
    assert "cp.async.wait(-1)" in d.message


@pytest.mark.parametrize(
    ("pending", "says"),
    [
        ("K / BK - 1", "shape symbol K"),
        ("S - 4", "is -1"),
        ("S / (S - 3)", "divides by zero"),
        ("k", "run-time value"),
    ],
)
def test_what_does_not_fold_to_a_count_is_types_static_at_the_wait(pending, says):
    diags = diagnose(ring(pending))
    hits = [d for d in diags if d.rule == "types.static" and d.span is not None and d.span.line == WAIT_LINE]
    assert hits and says in hits[0].message, describe(diags)


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("path", "header", "wait", "emitted"),
    [
        (
            "examples/gemm_hopper_ws.kir",
            "S = 4>(",
            "wgmma.wait",
            {"cuda": "kir_wgmma_wait<{}>();", "gluon": "warpgroup_mma_wait({},"},
        ),
        (
            "benchmarks/tasks/gemm/persistent.kir",
            "NSM = 132>(",
            "tma.store_wait",
            {"cuda": "kir_bulk_wait_read<{}>();", "gluon": "tma.store_wait({})"},
        ),
    ],
)
def test_wgmma_and_tma_store_waits_take_parameters_too(path, header, wait, emitted):
    """The program with its waits' 0 written as a parameter W = 0: the same code, W folded."""
    text = (ROOT / path).read_text()
    program = parse(text.replace(header, header.replace(">(", ", W = 0>(")).replace(f"{wait}(0)", f"{wait}(W)"))
    assert f"{wait}(W)" in program.text()
    assert not [d for d in diagnose(program.text()) if d.is_error]
    for backend, line in emitted.items():
        assert line.format(0) in lower(program, backend).source
        with pytest.raises(KirError) as err:
            lower(program, backend, {"W": -1})
        assert f"{wait}(-1)" in err.value.diagnostics[0].message
