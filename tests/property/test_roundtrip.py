"""Round trip of random programs through the canonical printer.

For a random well-typed program text (`kirgen.ProgramGen`): it parses; its canonical text
parses back to the same IR; printing that again gives the same text (formatting is a fixed
point); the content hashes agree; and every comment survives. For a random program made with
the builder API (`kirgen.BuilderGen`), which can hold IR no parse makes (unnamed values, odd
op orders, names that are no KIR identifiers), the printed text parses back to the same IR.

The runs are deterministic (`derandomize=True`): CI sees the same cases every time.
"""

from __future__ import annotations

import difflib
import random

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kir.diagnostics import KirError
from kir.parser import parse
from kir.program import Program, same_ir
from tests.budget import examples
from tests.property.buildgen import BuilderGen
from tests.property.kirgen import ByteChoices, ProgramGen

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@st.composite
def choice_bytes(draw) -> bytes:
    """The choices for one program. A program reads two bytes a choice and takes zeros (the
    simplest option) once they run out. Hypothesis draws a seed and a length rather than the
    bytes themselves: a few draws instead of thousands (much faster), and shrinking the length
    cuts the program short while keeping its first choices."""
    seed = draw(st.integers(0, 2**32 - 1))
    size = draw(st.integers(0, 3000))
    return random.Random(seed).randbytes(size)


@st.composite
def kir_texts(draw) -> str:
    return ProgramGen(ByteChoices(draw(choice_bytes())), max_stmts=12).program()


def comment_texts(text: str) -> list[str]:
    """The comments of a text: KIR has no strings, so a line's first '#' starts one."""
    out = []
    for line in text.split("\n"):
        i = line.find("#")
        if i >= 0:
            out.append(line[i:].rstrip())
    return sorted(out)


def ir_dump(program: Program) -> list[str]:
    """One line per op (name, properties, result types): enough to show where IR differs."""
    lines = []
    for op in program.kernel.walk():
        props = {k: str(v) for k, v in op.properties.items()}
        lines.append(f"{op.name} {props} -> {[str(r.type) for r in op.results]} ({len(op.operands)} operands)")
    return lines


def check_round_trip(p1: Program, original: str | None = None) -> None:
    t2 = p1.text()
    try:
        p2 = parse(t2, "<canonical>")
    except KirError as err:
        raise AssertionError(f"the canonical text does not parse: {err}\n{t2}") from None
    if not same_ir(p1, p2):
        diff = "\n".join(difflib.unified_diff(ir_dump(p1), ir_dump(p2), "first", "re-parsed", lineterm=""))
        raise AssertionError(f"the canonical text does not parse back to the same IR:\n{diff}\n{t2}")
    t3 = p2.text()
    if t3 != t2:
        diff = "\n".join(difflib.unified_diff(t2.split("\n"), t3.split("\n"), "printed", "printed again", lineterm=""))
        raise AssertionError(f"printing is not a fixed point:\n{diff}")
    assert p1.content_hash() == p2.content_hash()
    if original is not None:
        assert comment_texts(t2) == comment_texts(original), "comments were lost or changed"


@settings(max_examples=examples(1100), **SETTINGS)
@given(kir_texts())
def test_random_program_text_round_trips(text: str) -> None:
    note(f"generated text:\n{text}")
    check_round_trip(parse(text), original=text)


@settings(max_examples=examples(500), **SETTINGS)
@given(choice_bytes())
def test_builder_program_round_trips(choices: bytes) -> None:
    program = BuilderGen(ByteChoices(choices), max_ops=30).program()
    check_round_trip(program)


def test_generators_cover_the_language() -> None:
    """The text generator reaches every construct the round trip is meant to cover."""
    wanted = [
        "<<",
        ">>",
        " & ",
        " | ",
        " ^ ",
        " % ",
        "~",
        "where(",
        "cast<",
        "exp",
        "arange(",
        "zeros(",
        "full(",
        "[:, None]",
        "sum(",
        "argm",
        "cum",
        "topk(",
        "dot<",
        "load(",
        "store(",
        "mask = ",
        "other = ",
        "atomic_",
        "for ",
        " step ",
        "pipeline(",
        "if ",
        "} else {",
        "else if",
        "role ",
        "role_rank()",
        "smem(",
        "mbarrier(",
        "wait(",
        "arrive(",
        "expect(",
        "tma.load(",
        "tma.store(",
        "wgmma(",
        "wgmma.wait(",
        "cp.async(",
        "cp.async.commit()",
        "barrier()",
        "fence.async()",
        "bf16(",
        "i64",
        "i1[",
        "#",
        ";",
        "where ",
        "grid(",
        "convert_layout(",
        "broadcast(",
        "trans(",
        "reshape(",
        " : ",
        "\n\n",
    ]
    rng = random.Random(0)
    seen = "".join(ProgramGen(ByteChoices(rng.randbytes(3000)), max_stmts=14).program() for _ in range(300))
    missing = [w for w in wanted if w not in seen]
    assert not missing, f"never generated: {missing}"
