"""kir.fastsyntax gives lark's very tree or gives up: on every program the project has, on long
generated ones, and on broken and reshaped copies of them, the fast tree equals lark's field by
field (every tree's data and meta, every token's type, text and positions), and where lark
rejects a text the fast parser gives up on it (so the syntax error stays lark's)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark import Token, Tree
from lark.exceptions import UnexpectedInput

from kir import fastsyntax
from kir.diagnostics import KirError
from kir.syntax import _syntax_diagnostic, lark_parser, parse_static_text, parse_tree

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(p for p in ROOT.rglob("*.kir") if ".venv" not in p.parts)
sys.path.insert(0, str(ROOT / "benchmarks"))
from parse_check_scale import generate  # noqa: E402

TEXTS = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8", errors="replace") for p in PROGRAMS}
SMALL = sorted(name for name, text in TEXTS.items() if len(text) < 4000)

# What a mutation may insert: tokens of every kind, words that are keywords only in some places,
# and characters KIR is not written in.
NOISE = list("()[]{}<>=!+-*/%&|^~.,:;#\n \t\f\r") + [
    "..",
    "<<",
    ">>",
    "<=",
    "==",
    "\r\n",
    "\n\n  ",
    "# note\n",
    "target",
    "sm_90",
    "mtia-sim",
    "out",
    "f32",
    "bf16",
    "warps",
    "None",
    "for",
    "if",
    "else",
    "role",
    "cast",
    "dot",
    "inf",
    "true",
    "step",
    "kernel",
    "0x1f",
    "1e3",
    "2.5",
    "007",
    "x",
    "_y",
    "$",
    "é",
]


def differences(fast: Tree | Token, slow: Tree | Token, path: str = "start") -> str | None:
    """The first place where two trees differ, or None: the class of every node, a tree's data,
    every field of its meta and its children in order, a token's type, value and positions."""
    if type(fast) is not type(slow):
        return f"{path}: {type(fast).__name__} against {type(slow).__name__}"
    if isinstance(fast, Token):
        assert isinstance(slow, Token)
        fields = ("type", "value", "start_pos", "line", "column", "end_line", "end_column", "end_pos")
        mine = [str(fast)] + [getattr(fast, f) for f in fields]
        theirs = [str(slow)] + [getattr(slow, f) for f in fields]
        return None if mine == theirs else f"{path}: token {mine} against {theirs}"
    assert isinstance(slow, Tree)
    if fast.data != slow.data:
        return f"{path}: {fast.data!r} against {slow.data!r}"
    if list(vars(fast.meta).items()) != list(vars(slow.meta).items()):
        return f"{path} ({fast.data}): meta {vars(fast.meta)} against {vars(slow.meta)}"
    if len(fast.children) != len(slow.children):
        return f"{path} ({fast.data}): {len(fast.children)} children against {len(slow.children)}"
    for k, (a, b) in enumerate(zip(fast.children, slow.children, strict=True)):
        found = differences(a, b, f"{path}/{fast.data}[{k}]")
        if found:
            return found
    return None


def compare(text: str, start: str = "start") -> str:
    """'same' when both parse to one tree, 'both reject' when lark rejects and the fast parser
    gives up, 'fast gave up' when only lark accepts; anything else fails the test."""
    read = fastsyntax.parse_start if start == "start" else fastsyntax.parse_expr_only
    try:
        slow = lark_parser().parse(text, start=start)
    except (UnexpectedInput, RecursionError):
        slow = None
    try:
        fast = read(text)
    except (fastsyntax.GiveUp, RecursionError):
        fast = None
    if fast is None:
        return "fast gave up" if slow is not None else "both reject"
    assert slow is not None, f"the fast parser accepts a text lark rejects: {text!r}"
    found = differences(fast, slow)
    assert found is None, found
    return "same"


def test_the_project_has_programs_to_compare():
    assert len(PROGRAMS) > 100 and len(SMALL) > 50


def test_every_program_reads_alike_on_the_fast_path():
    outcomes = {name: compare(text) for name, text in TEXTS.items()}
    # every program the project has is valid, and none needs lark
    assert {o for o in outcomes.values()} == {"same"}, [n for n, o in outcomes.items() if o != "same"]


def test_generated_programs_read_alike():
    for size in (1, 5_000, 60_000):
        assert compare(generate(size)) == "same"


def test_parse_tree_takes_the_fast_tree_and_lark_gives_the_errors():
    text = TEXTS["examples/vector_add.kir"]
    tree, comments = parse_tree(text, "v.kir")
    assert differences(tree, lark_parser().parse(text, start="start")) is None
    broken = text.replace("{", "{ ;", 1)
    with pytest.raises(KirError) as err:
        parse_tree(broken, "v.kir")
    try:
        lark_parser().parse(broken, start="start")
    except UnexpectedInput as lark_err:
        expected = _syntax_diagnostic(lark_err, broken, "v.kir")
    assert err.value.diagnostics == [expected]


def test_a_valid_program_never_builds_the_lark_parser():
    """The lark parser is built (grammar read, tables loaded) only when the fast one gives up."""
    probe = (
        "import sys; from kir import syntax; from kir.parser import parse; "
        f"parse(open({str(ROOT / 'examples' / 'vector_add.kir')!r}).read()); "
        "syntax.parse_static_text('cdiv(N, BLOCK) * 2'); "
        "print(syntax._LARK is None)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def mutate(text: str, rng: random.Random) -> str:
    """One of the edits a person (or a model) makes by mistake, or a harmless reshaping."""
    how = rng.randrange(8)
    at = rng.randrange(len(text) + 1)
    if how == 0:  # delete a few characters
        return text[:at] + text[at + rng.randrange(1, 6) :]
    if how == 1:  # insert noise
        return text[:at] + rng.choice(NOISE) + text[at:]
    if how == 2:  # duplicate a stretch
        end = min(len(text), at + rng.randrange(1, 20))
        return text[:end] + text[at:end] + text[end:]
    if how == 3:  # swap two lines
        lines = text.split("\n")
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    if how == 4:  # a newline or a comment somewhere (inside brackets it changes nothing)
        return text[:at] + rng.choice(["\n", "\n   ", " # c\n", "\n\n", ";", "; ", ";\n"]) + text[at:]
    if how == 5:  # Windows line ends
        return text.replace("\n", "\r\n")
    if how == 6:  # odd blanks
        return text.replace(" ", rng.choice(["\t", "\f", "  ", " \t"]), rng.randrange(1, 30))
    # replace a word by another
    return text[:at] + rng.choice(NOISE) + text[at + rng.randrange(1, 8) :]


def test_broken_copies_of_every_program_read_alike():
    rng = random.Random(20261203)
    seen: dict[str, int] = {}
    for name in SMALL:
        text = TEXTS[name]
        for _ in range(4):
            broken = text
            for _ in range(rng.randrange(1, 4)):
                broken = mutate(broken, rng)
            outcome = compare(broken)
            seen[outcome] = seen.get(outcome, 0) + 1
    # both kinds were seen: copies that stay valid and copies that lark rejects
    assert seen.get("same", 0) > 50 and seen.get("both reject", 0) > 50, seen


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SMALL), st.lists(st.integers(0, 2**32), min_size=1, max_size=4))
def test_mutated_programs_read_alike(name, seeds):
    text = TEXTS[name]
    for seed in seeds:
        text = mutate(text, random.Random(seed))
    compare(text)


EXPR_PIECES = [
    "a",
    "N",
    "BM",
    "1",
    "0x10",
    "2.5",
    "1e3",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "|",
    "^",
    "~",
    "<<",
    ">>",
    "<",
    ">=",
    "==",
    "(",
    ")",
    "[",
    "]",
    ",",
    ":",
    "=",
    ".",
    "cdiv",
    "min",
    "tma",
    "None",
    "f32",
    "cast",
    "<f32>",
    "dot",
    "inf",
    "true",
    "for",
    "\n",
    " ",
]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(EXPR_PIECES), min_size=1, max_size=14), st.sampled_from(["", " "]))
def test_expressions_read_alike(pieces, sep):
    text = sep.join(pieces)
    compare(text, start="expr_only")
    # and as the right-hand side of a statement in a kernel
    kernel = TEXTS["examples/vector_add.kir"]
    at = kernel.index("{") + 1
    compare(kernel[:at] + "\n  q = " + text + "\n" + kernel[at:])


def test_too_deep_for_the_fast_parser_is_lark_s_answer():
    """Nesting past Python's recursion limit is read by lark (a tree, or its too-deep error)."""
    kernel = TEXTS["examples/vector_add.kir"]
    at = kernel.index("{") + 1
    for depth in (50, 5000):
        text = kernel[:at] + "\n  q = " + "(" * depth + "1" + ")" * depth + "\n" + kernel[at:]
        try:
            slow = lark_parser().parse(text, start="start")
        except RecursionError:
            with pytest.raises(KirError, match="syntax.too-deep"):
                parse_tree(text)
        else:
            assert differences(parse_tree(text)[0], slow) is None


def test_static_text_reads_alike():
    for text in ["M / BM", "cdiv(N, BLOCK) * 2", "(K + 1) % 4", "-M", "max(M, 16)"]:
        assert compare(text, start="expr_only") == "same"
        assert parse_static_text(text) is not None
