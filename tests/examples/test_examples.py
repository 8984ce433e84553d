"""Every example: canonical text, a round trip through the printer, and a run of the reference
interpreter that matches a float64 numpy reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kir.parser import parse, parse_file
from kir.program import same_ir
from tests.examples.references import CASES, Case

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL = sorted(p.stem for p in EXAMPLES.glob("*.kir"))


def test_every_example_has_a_reference_case():
    assert sorted(c.example for c in CASES) == ALL


@pytest.mark.parametrize("name", ALL)
def test_example_round_trips_and_is_canonical(name):
    path = EXAMPLES / f"{name}.kir"
    program = parse_file(path)
    text = program.text()
    again = parse(text)
    assert same_ir(program, again)
    assert again.text() == text, "formatting is not idempotent"
    assert text == path.read_text(), "the example is not in canonical form (run kir fmt --write)"
    assert again.content_hash() == program.content_hash()


@pytest.mark.parametrize("case", CASES, ids=[c.example for c in CASES])
def test_example_matches_reference(case: Case):
    from kir.interp import run

    program = parse_file(EXAMPLES / f"{case.example}.kir")
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        inputs = case.make(rng)
        before = {k: v.copy() for k, v in inputs.items()}
        out = run(program, dict(inputs), case.params)
        for k, v in before.items():
            np.testing.assert_array_equal(np.asarray(inputs[k]), v, err_msg=f"input {k} changed")
        if case.check is not None:
            case.check(inputs, out)
            continue
        for name, want in case.reference(inputs).items():
            got = np.asarray(out[name])
            assert got.shape == want.shape
            if np.issubdtype(want.dtype, np.integer):
                np.testing.assert_array_equal(got, want)
            else:
                got64 = got.astype(np.float64)
                assert np.isfinite(got64).all(), f"{name} has NaN/Inf (unwritten elements?)"
                np.testing.assert_allclose(got64, want, rtol=case.rtol, atol=case.atol)
