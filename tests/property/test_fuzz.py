"""The parser on damaged programs: every example in examples/ under random mutations.

A mutation deletes, duplicates or swaps tokens, inserts junk (non-ASCII, NUL, control
characters, unbalanced brackets), truncates the text, puts a huge number or an undefined name
in place of a token, or nests thousands of brackets. Whatever the text, `parse` either returns
a program, which must then print and parse back to the same IR, or raises `KirError` whose
diagnostics each have a rule id, a severity, a message and a span inside the text. Any other
exception is a bug.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kir.diagnostics import SEVERITIES, KirError
from kir.parser import parse
from tests.budget import examples
from tests.property.test_roundtrip import check_round_trip

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.kir"))
TEXTS = [p.read_text() for p in EXAMPLES]

# Tokens for mutating: names, numbers, two-character operators, any other character, and runs
# of white space (kept, so that a mutation changes one thing at a time).
TOKEN = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*|0x[0-9a-fA-F]+|[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+"
    r"|==|!=|<=|>=|<<|>>|\.\.|\s+|."
)
JUNK = [
    "\x00",
    "é",
    "∑",
    "中",
    "\u2028",
    "\x85",
    "\x0c",
    "\r",
    "\r\n",
    "\t",
    "\x1b",
    "\ufeff",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "#",
    ";",
    ",",
    ".",
    "..",
    "\\",
    "'",
    '"',
    "@",
    "$",
    "`",
    "?",
    "!",
    "=",
    ":",
    "->",
    "<",
    ">",
    "\n",
    "\n\n",
    "}}}",
    "((",
]
HUGE = [
    "9" * 40,
    "9" * 5000,
    "0x" + "f" * 40,
    "1" + "0" * 400 + ".5",
    "1e999",
    "2.5e-99999",
    "007",
    "0x",
    "00",
    "4294967296",
]
NAMES = [
    "undefined_zz",
    "__x",
    "for",
    "None",
    "kernel",
    "where",
    "in",
    "é",
    "M",
    "BM",
    "load",
    "tma",
    "x1",
    "_",
    "true",
]
NESTING = [
    "(" * 5000,
    "[" * 3000,
    "{" * 3000,
    "-" * 5000 + "1",
    "~" * 5000 + "x",
    "(" * 3000 + "1" + ")" * 3000,
    "[" * 2000 + "1" + "]" * 2000,
    "x" + "[:, None]" * 2000,
    "cast<f32>(" * 1500 + "1" + ")" * 1500,
    "if true {" * 400 + "}" * 400,
]
DTYPES = ["f32", "bf16", "f16", "f64", "i1", "i8", "i32", "i64", "u8", "u32", "f8e4m3"]
OPERATORS = ["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "<", "<=", "==", "!=", ">", ">=", "~", ".."]
# Besides damage, near misses: a token replaced by another token of the same text, another
# dtype or another operator mostly keeps the syntax and tests the typing rules instead.
MUTATIONS = (
    "delete",
    "duplicate",
    "swap",
    "junk",
    "truncate",
    "number",
    "name",
    "nest",
    "transplant",
    "retype",
    "operator",
)

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


@st.composite
def mutated_examples(draw) -> str:
    text = TEXTS[draw(st.integers(0, len(TEXTS) - 1))]
    for _ in range(draw(st.integers(1, 3))):
        text = mutate(draw, text)
    return text


def mutate(draw, text: str) -> str:
    toks = tokens(text)
    kind = draw(st.sampled_from(MUTATIONS))
    if not toks:
        return text + draw(st.sampled_from(JUNK))
    i = draw(st.integers(0, len(toks) - 1))
    if kind == "delete":
        del toks[i]
    elif kind == "duplicate":
        toks.insert(i, toks[i])
    elif kind == "swap" and i + 1 < len(toks):
        toks[i], toks[i + 1] = toks[i + 1], toks[i]
    elif kind == "junk":
        toks.insert(i, draw(st.sampled_from(JUNK)))
    elif kind == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    elif kind == "number":
        numbers = [j for j, t in enumerate(toks) if t[0].isdigit()]
        if numbers:
            toks[draw(st.sampled_from(numbers))] = draw(st.sampled_from(HUGE))
    elif kind == "name":
        names = [j for j, t in enumerate(toks) if t[0].isalpha() or t[0] == "_"]
        if names:
            toks[draw(st.sampled_from(names))] = draw(st.sampled_from(NAMES))
    elif kind == "nest":
        toks.insert(i, draw(st.sampled_from(NESTING)))
    elif kind == "transplant":
        toks[i] = toks[draw(st.integers(0, len(toks) - 1))]
    elif kind == "retype":
        dtypes = [j for j, t in enumerate(toks) if t in DTYPES]
        if dtypes:
            toks[draw(st.sampled_from(dtypes))] = draw(st.sampled_from(DTYPES))
    elif kind == "operator":
        operators = [j for j, t in enumerate(toks) if t in OPERATORS]
        if operators:
            toks[draw(st.sampled_from(operators))] = draw(st.sampled_from(OPERATORS))
    return "".join(toks)


def check_parse_outcome(text: str) -> None:
    """`parse` returns a program that round-trips, or raises KirError with located
    diagnostics; nothing else."""
    try:
        program = parse(text, "<fuzz>")
    except KirError as err:
        assert err.diagnostics, "KirError without diagnostics"
        n_lines = text.count("\n") + 1
        for d in err.diagnostics:
            assert isinstance(d.rule, str) and d.rule, d
            # parse turns an unexpected exception into `internal.error`: still a bug
            assert d.rule != "internal.error", f"{d.message}\ninput:\n{text!r}"
            assert d.severity in SEVERITIES, d
            assert isinstance(d.message, str) and d.message, d
            assert d.span is not None, f"diagnostic without a span: {d}"
            assert 1 <= d.span.line <= n_lines + 1 and d.span.col >= 1, f"span outside the text ({n_lines} lines): {d}"
        return
    except Exception as exc:  # noqa: BLE001 - any other exception is the bug being looked for
        raise AssertionError(f"parse raised {type(exc).__name__}: {exc}\ninput:\n{text!r}") from exc
    check_round_trip(program)


@settings(max_examples=examples(2000), **SETTINGS)
@given(mutated_examples())
def test_mutated_examples_parse_or_fail_cleanly(text: str) -> None:
    note(f"input: {text!r}")
    check_parse_outcome(text)


def test_every_example_parses() -> None:
    """The fuzz starts from valid texts (a broken example would make every mutation fail)."""
    assert len(TEXTS) >= 2
    for text in TEXTS:
        check_round_trip(parse(text))
