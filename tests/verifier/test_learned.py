"""Learned rules: the file format and its located schema errors, the generic matcher (op,
properties, operands, role, loops, target, kernel), that data is never evaluated, the shipped
rules, and installing (`install`, the work of `kir rules add`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kir.parser import parse
from verifier import RULES, load_rules
from verifier.context import Context
from verifier.learned import (
    LEARNED_DIR,
    LOADED,
    fill,
    forget,
    install,
    load_learned_rules,
    parse_rule,
    read_rule_file,
    vet,
)

load_rules()
ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(LEARNED_DIR.glob("*.toml"))

GEMM_WS = (ROOT / "examples" / "gemm_hopper_ws.kir").read_text()


def rule_text(
    match: str, bad: str, good: str, *, rid: str = "learned.test-rule", extra: str = "", failures=None
) -> str:
    failures = failures or ["run 17"]
    listed = ", ".join(f'"{f}"' for f in failures)
    return (
        textwrap.dedent(
            f'''\
            id = "{rid}"
            severity = "warning"
            summary = "a test rule"
            explanation = "why it exists"
            message = "found {{op}}"
            {extra}
            [match]
            {{match}}

            [examples]
            bad = """
            {{bad}}"""
            good = """
            {{good}}"""

            [provenance]
            reason = "a test"
            failures = [{listed}]
            support = 1
            false_positives = 0
            '''
        )
        .replace("{match}", match)
        .replace("{bad}", bad)
        .replace("{good}", good)
    )


def matches(lr, text: str, target: str | None = None) -> list[int]:
    program = parse(text, file="t.kir")
    ctx = Context(program, target)
    ctx.rule = lr.rule
    return [d.span.line for d in lr.check(ctx)]


def parsed(text: str):
    lr, problems = parse_rule(text, "r.toml")
    assert lr is not None, [p.message for p in problems]
    return lr


VADD = textwrap.dedent(
    """\
    kernel vadd<BLOCK = 1024>(x: global f32[N], z: out global f32[N])
      target sm_90 grid(cdiv(N, BLOCK)) warps(4)
    {
      offs = program_id(0) * BLOCK + arange(0, BLOCK)
      v = load(x[offs], mask = offs < N)
      store(z[offs], v * 2.0, mask = offs < N)  # <-
    }
    """
)
VADD_GOOD = VADD.replace("v * 2.0", "v").replace("  # <-", "")


# ---- the shipped rules ----------------------------------------------------------------------------------


def test_two_rules_are_shipped_and_registered():
    assert len(SHIPPED) >= 2
    for path in SHIPPED:
        lr, problems = read_rule_file(path)
        assert lr is not None, [p.message for p in problems]
        assert lr.rule.id in RULES and lr.rule.family == "learned"
        assert lr.provenance.reason and lr.provenance.failures and lr.provenance.support >= 1


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_rule_passes_its_own_vetting(path):
    """What `kir rules add` demands: its failures flagged, no known-good program flagged."""
    lr, _ = read_rule_file(path)
    assert vet(lr, None, path) == []
    for failure in lr.provenance.failures:
        if failure.endswith(".kir"):
            assert matches(lr, (ROOT / failure).read_text()), failure


def test_shipped_rules_fire_through_verify():
    from verifier import verify

    program = parse((ROOT / "tests/verifier/corpus/learned/gemm_f16_acc_gfx90a.bad.kir").read_text(), file="x.kir")
    assert any(d.rule == "learned.cdna-f16-accumulate" for d in verify(program))
    assert not any(d.rule == "learned.cdna-f16-accumulate" for d in verify(program, "sm_90"))  # NVIDIA: fine


# ---- matching -------------------------------------------------------------------------------------------


def test_op_props_and_target():
    lr = parsed(
        rule_text(
            'op = "dot"\ntarget = { in = ["gfx90a"] }\n[match.props]\nacc_dtype = { in = ["f16", "bf16"] }',
            "x  # <-",
            "y",
        )
    )
    bad = (ROOT / "tests/verifier/corpus/learned/gemm_f16_acc_gfx90a.bad.kir").read_text()
    good = (ROOT / "tests/verifier/corpus/learned/gemm_f16_acc_gfx90a.good.kir").read_text()
    assert matches(lr, bad) == [13]
    assert matches(lr, good) == []
    assert matches(lr, bad, "gfx942") == []  # the target checked for, not only the declared one


def test_role_registers_condition():
    """ "a kir.tma_load inside a role with regs(N) < 48"."""
    lr = parsed(rule_text('op = "kir.tma_load"\n[match.role]\nregs = { lt = 48 }', "x  # <-", "y"))
    assert matches(lr, GEMM_WS) == [29, 30]
    assert matches(lr, GEMM_WS.replace("regs(40)", "regs(56)")) == []


def test_not_inside_any_loop_and_in_role():
    """ "a kir.wait not inside any kir.for"."""
    lr = parsed(rule_text('op = "kir.wait"\nin_loop = false', "x  # <-", "y"))
    assert matches(lr, GEMM_WS) == []
    lr2 = parsed(rule_text('op = "kir.wait"\nin_loop = true\nin_role = true\nloop_depth = 1', "x  # <-", "y"))
    assert matches(lr2, GEMM_WS) == [27, 39]


def test_operand_result_kernel_and_target_features():
    lr = parsed(
        rule_text(
            'op = "kir.load"\ntarget_has = "tma"\n[match.operands.mem]\nkind = "global"\ndtype = "f32"\n'
            '[match.result]\nrank = 1\n[match.kernel]\nlacks_op = "wgmma"\nwarps = { ge = 4 }',
            "x  # <-",
            "y",
        )
    )
    assert matches(lr, VADD) == [5]
    assert matches(lr, VADD, "sm_80") == []  # no TMA on sm_80
    assert matches(lr, VADD.replace("warps(4)", "warps(2)")) == []
    optional = parsed(rule_text('op = "kir.load"\n[match.operands.mask]\npresent = false', "x  # <-", "y"))
    assert matches(optional, VADD) == [] and matches(optional, VADD.replace(", mask = offs < N)", ")", 1)) == [5]


FACTS = """\
kernel k<BLOCK = 128>(x: global f32[N], y: out global f32[N], z: out global bf16[N])
  where N <= BLOCK
  target sm_90 grid(1) warps(4)
{
  offs = arange(0, BLOCK)
  m = offs < N
  a = load(x[offs], mask = m)
  b = load(x[offs + 1], mask = m)
  s = sum(a + b, axis = 0)
  r = cast<f32>(cast<bf16>(s))
  store(y[offs], a * r, mask = m)
}
"""


def test_index_mask_offset_users_and_stored_precision():
    def lines(match: str, text: str = FACTS) -> list[int]:
        return matches(parsed(rule_text(match, "x  # <-", "y")), text)

    # the second load's index is the masked one plus 1; only the first is the index its mask compares
    assert lines('op = "kir.load"\n[match.operands.indices0]\nguarded = false') == [8]
    assert lines('op = "kir.load"\n[match.operands.indices0]\nguarded = true\noffset = 0') == [7]
    assert lines('op = "kir.load"\n[match.operands.indices0]\noffset = 1\nfn = "add"\ndef = "kir.binary"') == [8]
    assert lines('op = "kir.load"\n[match.operands.indices1]\noffset = 0') == []  # one index only
    # the bf16 cast of a sum, read by a cast back (the `narrow` round trip)
    narrow = 'op = "kir.cast"\n[match.operands.operand]\nfn = "sum"\n[match.result]\ndtype = "bf16"\nusers = ["cast"]'
    assert lines(narrow) == [10]
    assert lines(narrow.replace('users = ["cast"]', 'users = ["cast", "store"]')) == []
    # results of f32 only; a bf16 store makes the kernel's results low precision
    low = 'op = "kir.cast"\n[match.kernel]\nstores_low_precision = true'
    assert lines(low) == []
    assert lines(
        low, FACTS.replace("  store(y[offs]", "  store(z[offs], cast<bf16>(a), mask = m)\n  store(y[offs]")
    ) == [10, 10, 11]
    bad = parse_rule(rule_text('op = "kir.load"\n[match.operands.indices0]\nsideways = 1', "x  # <-", "y"), "r.toml")[1]
    assert bad and "unknown operand condition 'sideways'" in bad[0].message


def test_comparisons_on_missing_values_do_not_match():
    lr = parsed(rule_text('op = "kir.load"\n[match.role]\nregs = { lt = 1000 }', "x  # <-", "y"))
    assert matches(lr, VADD) == []  # no role at all
    exists = parsed(rule_text('op = "kir.load"\n[match.role]\nname = { exists = false }', "x  # <-", "y"))
    assert matches(exists, VADD) == [5]


def test_messages_are_filled_without_evaluating_anything():
    words = {"op": "kir.dot", "acc_dtype": "f16"}
    assert fill("{op} in {acc_dtype}", words) == "kir.dot in f16"
    for hostile in ("{0.__class__}", "{op.__class__.__mro__}", "{op!r}", "{__import__('os')}", "{{op}}", "%(op)s"):
        out = fill(hostile, words)
        assert "class" not in out.replace(hostile, "") and "os" not in out.replace(hostile, "")
    lr = parsed(
        rule_text('op = "kir.dot"', "x  # <-", "y").replace(
            'message = "found {op}"', 'message = "{op} accumulates in {acc_dtype}"'
        )
    )
    assert lr.message == "{op} accumulates in {acc_dtype}"


# ---- schema errors ---------------------------------------------------------------------------------------


def problems(text: str) -> list[tuple[int, str]]:
    lr, diags = parse_rule(text, "r.toml")
    assert lr is None
    assert all(d.rule == "learned.schema" and d.span.file == "r.toml" for d in diags)
    return [(d.span.line, d.message) for d in diags]


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_toml_syntax_error_has_its_line():
    text = rule_text('op = "kir.dot"', "x  # <-", "y").replace('summary = "a test rule"', "summary = ")
    [(line, message)] = problems(text)
    assert line == line_of(text, "summary =") and "TOML" in message


@pytest.mark.parametrize(
    "change, needle, words",
    [
        (('id = "learned.test-rule"', 'id = "Learned.Bad Id"'), "id =", "learned.<name>"),
        (('severity = "warning"', 'severity = "fatal"'), "severity", "severity"),
        (('op = "kir.dot"', 'op = "kir.dotproduct"'), "op =", "unknown op"),
        (('op = "kir.dot"', 'op = "kir.dot"\nopp = 1'), "opp =", "unknown condition"),
        (('op = "kir.dot"', 'op = "kir.dot"\n[match.props]\nfnn = "sum"'), "fnn =", "property 'fnn'"),
        (('op = "kir.dot"', 'op = "kir.dot"\n[match.role]\nregs = { below = 40 }'), "regs =", "unknown comparison"),
        (('op = "kir.dot"', 'op = "kir.dot"\n[match.role]\nregs = { lt = "forty" }'), "regs =", "takes a number"),
        (('message = "found {op}"', 'message = "found {nonsense}"'), "message =", "placeholder"),
        (("support = 1", "support = -1"), "support =", "count"),
        (('failures = ["run 17"]', "failures = []"), "failures =", "failures"),
        (("x  # <-", "x"), "bad =", "# <-"),
        (('message = "found {op}"', 'message = "found {op}"\ncolour = "red"'), "colour", "unknown key"),
        (('message = "found {op}"', 'message = "found {op}"\nhint = "fix it"'), "hint =", "has none"),
        (('message = "found {op}"', 'message = "found {op}"\nhint = "h"\n[fix]\nby = "x"'), "[fix]", "exactly one"),
        (('message = "found {op}"', 'message = "found {op}"\nhint = "h"\n[fix]\nreplace = "x"'), "[fix]", "goes with"),
        (('message = "found {op}"', 'message = "found {op}"\n[fix]\nbypass = "x"'), "[fix]", "needs a `hint`"),
    ],
)
def test_schema_errors_point_at_their_key(change, needle, words):
    text = rule_text('op = "kir.dot"', "x  # <-", "y").replace(*change)
    found = problems(text)
    assert any(words in message for _, message in found), found
    assert any(line == line_of(text, needle) for line, message in found if words in message), found


def test_missing_sections():
    found = problems('id = "learned.x"\nseverity = "error"\n')
    assert {m for _, m in found} >= {"missing 'match'", "missing 'examples'", "missing 'provenance'"}


# ---- installing --------------------------------------------------------------------------------------------


@pytest.fixture
def rules_dir(tmp_path, monkeypatch):
    target = tmp_path / "learned"
    monkeypatch.setenv("KIR_LEARNED_DIR", str(target))
    yield target
    for path in target.glob("*.toml") if target.exists() else []:
        lr, _ = read_rule_file(path)
        if lr is not None:
            forget(lr.rule.id)


def write(tmp_path: Path, text: str, name: str = "rule.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def narrow_rule(rid: str = "learned.unused-topk") -> str:
    """A rule that flags only its own bad example: a topk of more than 100 elements."""
    bad = textwrap.dedent(
        """\
        kernel top<B = 1024>(x: global f32[N], v: out global f32[N])
          where N == B
          target sm_90 grid(1) warps(4)
        {
          offs = arange(0, B)
          vals, idx = topk(load(x[offs]), k = 512)  # <-
          store(v[offs], where(offs < 512, 0.0, 0.0))
        }
        """
    )
    return rule_text(
        'op = "kir.topk"\n[match.props]\nk = { gt = 256 }', bad, bad.replace("k = 512)  # <-", "k = 16)"), rid=rid
    )


def test_install_copies_a_vetted_rule_and_loads_it(tmp_path, rules_dir):
    text = narrow_rule()
    dest, diags = install(write(tmp_path, text))
    assert diags == [] and dest == rules_dir / "unused-topk.toml" and dest.read_text() == text
    new = load_learned_rules()
    assert [lr.rule.id for lr in new] == ["learned.unused-topk"]
    assert "learned.unused-topk" in RULES and "learned.unused-topk" in LOADED
    assert load_learned_rules() == []  # loading again registers nothing twice


def test_install_refuses_a_rule_that_flags_known_good_programs(tmp_path, rules_dir):
    """Any masked load: VADD has one, and so do most examples."""
    bad = VADD.replace("  # <-", "").replace(
        "v = load(x[offs], mask = offs < N)", "v = load(x[offs], mask = offs < N)  # <-"
    )
    text = rule_text('op = "kir.load"\n[match.operands.mask]\npresent = true', bad, VADD_GOOD, rid="learned.any-load")
    dest, diags = install(write(tmp_path, text))
    assert dest is None and not rules_dir.exists()
    flagged = [d for d in diags if d.rule == "learned.false-positive"]
    assert any("examples/softmax.kir" in d.message for d in flagged)
    assert any("its own good example" in d.message for d in flagged)
    softmax = next(d for d in flagged if "examples/softmax.kir" in d.message)
    assert softmax.span.file.endswith("examples/softmax.kir") and softmax.span.line == 11


def test_install_refuses_a_rule_that_misses_a_failure_it_names(tmp_path, rules_dir):
    failure = "tests/verifier/corpus/learned/scale_tma_store.bad.kir"
    text = narrow_rule().replace('failures = ["run 17"]', f'failures = ["{failure}", "missing/file.kir"]')
    dest, diags = install(write(tmp_path, text))
    assert dest is None
    missed = [d.message for d in diags if d.rule == "learned.misses"]
    assert any(failure in m and "does not flag" in m for m in missed)
    assert any("missing/file.kir" in m and "does not exist" in m for m in missed)
    assert all(d.span.file.endswith("rule.toml") and d.span.line == line_of(text, "failures =") for d in diags)


def test_install_refuses_a_rule_that_misses_its_bad_example(tmp_path, rules_dir):
    text = narrow_rule().replace("k = { gt = 256 }", "k = { gt = 600 }")
    dest, diags = install(write(tmp_path, text))
    assert dest is None and [d.rule for d in diags] == ["learned.misses"]
    assert "marked line" in diags[0].message


def test_install_then_refuse_a_duplicate(tmp_path, rules_dir):
    path = write(tmp_path, narrow_rule())
    dest, diags = install(path)
    assert diags == [] and dest == rules_dir / "unused-topk.toml"
    again, diags = install(path)
    assert again is None and [d.rule for d in diags] == ["learned.duplicate"]
    shipped = write(tmp_path, SHIPPED[0].read_text(), "copy.toml")
    again, diags = install(shipped)
    assert again is None and [d.rule for d in diags] == ["learned.duplicate"]


def test_invalid_files_do_not_break_loading(tmp_path, rules_dir):
    from verifier.learned import LOAD_ERRORS

    rules_dir.mkdir()
    (rules_dir / "broken.toml").write_text("id = \n")
    assert load_learned_rules() == []
    assert any(d.span and d.span.file.endswith("broken.toml") for d in LOAD_ERRORS)
