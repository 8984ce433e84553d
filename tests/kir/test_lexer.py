"""The parser's lexer (kir.parser._RootFirstLexer) reads every text as lark's contextual lexer
does: the same tokens for every program the project has, and the same error, at the same place
with the same expected terminals, for broken copies of them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from lark import Lark
from lark.exceptions import UnexpectedInput

from kir import parser

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(p for p in ROOT.rglob("*.kir") if ".venv" not in p.parts)

# What a broken copy may hold: the characters KIR is written in, and some it is not.
NOISE = list("()[]{}<>=!+-*/%&|^~.,:;#\n \t") + [
    "..",
    "<<",
    ">>",
    "target",
    "sm_90",
    "out",
    "f32",
    "for",
    "0x1f",
    "1e3",
    "$",
]


@pytest.fixture(scope="module")
def stock() -> Lark:
    return Lark(
        parser.GRAMMAR_PATH.read_text(),
        parser="lalr",
        lexer="contextual",
        postlex=parser._NewlineFilter(),
        propagate_positions=True,
        maybe_placeholders=False,
        start=["start", "expr_only"],
    )


def outcome(lark: Lark, text: str):
    """The tokens of the parse (type, text, line, column), or the error's kind, place and
    expected terminals."""
    try:
        tree = lark.parse(text, start="start")
    except UnexpectedInput as err:
        expected = getattr(err, "expected", None) or getattr(err, "allowed", None) or set()
        return (type(err).__name__, err.line, err.column, sorted(expected))
    return [(t.type, str(t), t.line, t.column) for t in tree.scan_values(lambda v: True)]


def test_the_project_has_programs_to_compare():
    assert len(PROGRAMS) > 100


def test_every_program_lexes_alike(stock):
    ours = parser._lark()
    for path in PROGRAMS:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert outcome(ours, text) == outcome(stock, text), path


def test_broken_programs_fail_alike(stock):
    ours = parser._lark()
    rng = random.Random(20261202)
    checked = 0
    for path in PROGRAMS[::3]:
        text = path.read_text(encoding="utf-8", errors="replace")
        for _ in range(6):
            at = rng.randrange(len(text) + 1)
            cut = rng.randrange(4)
            broken = text[:at] + rng.choice(NOISE) + text[at + cut :]
            mine, theirs = outcome(ours, broken), outcome(stock, broken)
            assert mine == theirs, (path, at, broken[max(0, at - 40) : at + 40])
            checked += isinstance(mine, tuple)
    assert checked > 50  # most copies are broken: the error path is what is compared
