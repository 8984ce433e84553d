"""Learned rules: declarative data under `verifier/rules/learned/`, never code.

A recurring failure becomes a rule by writing down *what it looks like*: a pattern over one op
and its surroundings, with a message, a hint, a bad/good example pair and the provenance of
the rule (why it was added, which failures it came from). Nothing in a rule file is ever
executed or evaluated: a generic matcher interprets the pattern, and messages are filled by
plain `{name}` substitution.

A rule file (TOML):

    id = "learned.cdna-f16-accumulate"      # learned.<name>: lowercase, digits, '-'
    severity = "warning"                    # error | warning | hint
    summary = "one line for `kir rules list`"
    explanation = "the why, for `kir rules explain`"
    message = "dot accumulates in {acc_dtype} on {target}"   # {placeholders}, see below
    hint = "accumulate in f32"              # what [fix] does; only with a [fix]

    [fix]                                   # the hint as an edit of the source (one kind)
    replace = "dot<f16>"                    # this text in the op's source becomes `by`
    by = "dot<f32>"

    [match]                                 # every condition must hold
    op = "kir.dot"                          # op name(s), "dot" is "kir.dot"
    target = { in = ["gfx90a", "gfx942"] }  # the target checked for
    in_loop = true                          # inside some kir.for (false: inside none)
    [match.props]                           # the op's properties
    acc_dtype = { in = ["f16", "bf16"] }
    [match.operands.lhs]                    # an operand, by its name in the op definition
    dtype = "f16"
    [match.role]                            # the enclosing warp role
    regs = { lt = 40 }

    [examples]
    bad = '''... a program, the offending line ending with `# <-` ...'''
    good = '''... its fixed twin ...'''
    target = "gfx90a"                       # optional: check the examples for this target

    [provenance]
    reason = "why the rule was added"
    failures = ["tests/verifier/corpus/learned/x.bad.kir", "run 4711"]  # .kir: files it must flag
    support = 2                             # failures seen
    false_positives = 0                     # flags later judged wrong

A condition is a value (equality) or a table of comparisons that must all hold:
`eq ne lt le gt ge` (a value), `in not_in` (a list), `exists` (true/false: the subject is
present at all). Subjects under `[match]`: `op`, `target`, `vendor`, `target_has` /
`target_lacks` (target features), `in_role`, `in_loop`, `loop_depth`, `pipelined` (an
enclosing loop has `pipeline(stages = ...)`), `in_if`, `props.<name>`, `operands.<name>.{dtype,
kind, rank, present, def, guarded}` (kind: scalar, tile, global, smem, mbarrier; def: the name of
the op that makes the value, `kir.sym` for a shape symbol or parameter, `argument` for a loop's
variable or a kernel argument; guarded, for an index of a load or store: the access's mask
compares this very index; offset: the integer constant added to (or taken from) what makes the
value, 0 for none; fn: the function (`fn`) of the op that makes the value, a reduction's `sum`
or `max`; an operand of many values is named by position, `indices0`,
`indices1`), `result.{dtype, kind, rank, users}` (users: the ops that read the result, tested
like `has_op`), `role.{name, regs, units, unit}`, `kernel.{warps, warp_unit, has_op, lacks_op,
stores_low_precision}` (the kernel stores floats narrower than f32 to global memory: its results
are rounded to 16 bits or fewer anyway).
A fix is one of: `replace` and `by` (text within the op's source), `insert_after` or
`insert_before` (a statement of its own after or before the op's), `drop_offset = "<operand>"`
(the operand is made as `x + c` or `x - c` with a constant c: it becomes `x`), `bypass =
"<operand>"` (the op's one user, which reads its result, becomes the operand: a round trip through
the op undone). A fix is checked where the rule fires (`verifier.engine.first_fix`): the hint and
its edits are given only where the edited program no longer has the diagnostic and no new error;
elsewhere the diagnostic comes without a hint. A rule without `[fix]` has no `hint`.
Placeholders in `message` and `hint`: `op`, `target`, `role`, `regs`, `loop_depth`, `kernel`,
each property by name, `<operand>.dtype`, `<operand>.kind`, `result.dtype`.

`load_learned_rules()` registers every rule file of the package directory and of
`$KIR_LEARNED_DIR` (where `kir rules add` installs when it is set); `load_rules()` has it done
by the family module `verifier/rules/learned_files.py`, so the engine needs nothing from here.
`install()` is `kir rules add`: it validates a file, checks that it flags no known-good program
and every failure it names, then copies it in.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr, UnitAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, VarOperandDef

from kir.arrays import LOW_PRECISION
from kir.diagnostics import SEVERITIES, Diagnostic, Edit, KirError, Span
from kir.dialect import OPS
from kir.dialect.types import GlobalType, MBarrierType, ScalarType, SmemType, SymAttr, TileType
from kir.parser import parse
from verifier.context import Context
from verifier.engine import first_fix, load_rules
from verifier.registry import BAD_MARKER, CHECKS, RULES, Rule, register_data_rule

ROOT = Path(__file__).resolve().parents[1]
LEARNED_DIR = Path(__file__).parent / "rules" / "learned"
ENV_DIR = "KIR_LEARNED_DIR"

OP_CLASSES: dict[str, type[IRDLOperation]] = {cls.name: cls for cls in cast(list[type[IRDLOperation]], OPS)}
COMPARATORS = ("eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "exists")
KINDS = ("scalar", "tile", "global", "smem", "mbarrier")
_ID = re.compile(r"^learned\.[a-z0-9]+(-[a-z0-9]+)*$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")

# The schema: which keys each table may hold (None: a condition).
_TOP = {"id", "severity", "summary", "explanation", "message", "hint", "fix", "match", "examples", "provenance"}
_FIX = {"replace": "by", "insert_after": None, "insert_before": None, "drop_offset": None, "bypass": None}
_REQUIRED = ("id", "severity", "summary", "explanation", "message", "match", "examples", "provenance")
_MATCH = {
    "op", "target", "vendor", "target_has", "target_lacks", "in_role", "in_loop", "loop_depth",
    "pipelined", "in_if", "props", "operands", "result", "role", "kernel",
}  # fmt: skip
_VALUE_KEYS = {"dtype", "kind", "rank", "present", "def", "fn", "guarded", "offset"}
_RESULT_KEYS = {"dtype", "kind", "rank", "def", "users"}
_ROLE_KEYS = {"name", "regs", "units", "unit"}
_KERNEL_KEYS = {"warps", "warp_unit", "has_op", "lacks_op", "stores_low_precision"}
_EXAMPLES = {"bad", "good", "target"}
_PROVENANCE = {"reason", "failures", "support", "false_positives", "added", "author"}


# ---- the rule as data ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    subject: tuple[str, ...]  # e.g. ("props", "acc_dtype")
    tests: tuple[tuple[str, Any], ...]  # (comparator, value)

    def holds(self, value: Any) -> bool:
        return all(_compare(cmp, value, want) for cmp, want in self.tests)


def _compare(cmp: str, value: Any, want: Any) -> bool:
    if cmp == "exists":
        return (value is not None) == bool(want)
    if value is None:
        return False
    try:
        if cmp == "eq":
            return value == want
        if cmp == "ne":
            return value != want
        if cmp == "lt":
            return value < want
        if cmp == "le":
            return value <= want
        if cmp == "gt":
            return value > want
        if cmp == "ge":
            return value >= want
        if cmp == "in":
            return value in want
        if cmp == "not_in":
            return value not in want
    except TypeError:  # an int compared with a string: no match
        return False
    raise ValueError(f"unknown comparison {cmp}")


@dataclass(frozen=True)
class Provenance:
    reason: str
    failures: tuple[str, ...]
    support: int
    false_positives: int
    added: str = ""
    author: str = ""

    def to_json(self) -> dict:
        return {
            "reason": self.reason,
            "failures": list(self.failures),
            "support": self.support,
            "false_positives": self.false_positives,
            "added": self.added,
            "author": self.author,
        }


@dataclass(frozen=True)
class LearnedRule:
    rule: Rule
    message: str
    hint: str
    ops: tuple[str, ...]  # empty: any op
    conditions: tuple[Condition, ...]
    provenance: Provenance
    path: Path | None = None
    text: str = field(default="", repr=False, compare=False)
    fix: tuple[tuple[str, str], ...] = ()  # (kind, value) and for `replace` also ("by", text)

    @property
    def name(self) -> str:
        return self.rule.id.removeprefix("learned.")

    def to_json(self) -> dict:
        return {**self.rule.to_json(), "provenance": self.provenance.to_json(), "file": str(self.path or "")}

    # ---- matching ------------------------------------------------------------------------------

    def check(self, ctx) -> Iterator[Diagnostic]:
        """The generic matcher: one diagnostic per op that meets every condition."""
        features = ctx.spec.features
        kernel_ops = None
        for info in ctx.infos:
            op = info.op
            if self.ops and op.name not in self.ops:
                continue
            facts = _Facts(ctx, info, features)
            if any(c.subject[0] == "kernel" and c.subject[1] in ("has_op", "lacks_op") for c in self.conditions):
                if kernel_ops is None:
                    kernel_ops = {i.op.name for i in ctx.infos}
                facts.kernel_ops = kernel_ops
            if all(c.holds(facts.get(c.subject)) for c in self.conditions):
                words = facts.words()
                edits = self._edits(ctx, op)
                hint = fill(self.hint, words) if edits else ""
                yield ctx.report(op, fill(self.message, words), hint, edits=edits)

    def _edits(self, ctx, op: Operation) -> tuple[Edit, ...]:
        """The fix as edits, where it can be written for this op and holds (`first_fix`)."""
        span = ctx.span(op)
        if not self.fix or span is None:
            return ()
        return first_fix(ctx, self.rule.id, span.line, [fix_edit(ctx, op, dict(self.fix))])


def fix_edit(ctx, op: Operation, fix: dict[str, str]) -> Edit | None:
    """One `[fix]` table as an edit of the program's text at `op` (None where it does not apply)."""
    if "replace" in fix:
        return ctx.replace_in(op, fix["replace"], fix["by"])
    span = ctx.span(op)
    source = (ctx.program.source or "").splitlines()
    if span is None or not 1 <= span.line <= len(source):
        return None
    if "insert_before" in fix or "insert_after" in fix:
        line = span.line if "insert_before" in fix else span.end_line + 1
        first = source[span.line - 1]
        indent = first[: len(first) - len(first.lstrip())]
        statement = fix.get("insert_before") or fix["insert_after"]
        if line > len(source):
            end = len(source[-1]) + 1
            return Edit(Span(len(source), end, len(source), end, span.file), f"\n{indent}{statement}")
        return Edit(Span(line, 1, line, 1, span.file), f"{indent}{statement}\n")
    if "drop_offset" in fix:
        made = _operand(op, fix["drop_offset"])
        if made is None or _offset(made) == 0 or not isinstance(binary := made.owner, Operation):
            return None
        lhs, rhs = binary.operands
        kept = lhs if getattr(rhs.owner, "name", "") == "kir.const" else rhs  # `x + c`, else `c + x`
        text = _written(ctx, kept, binary)
        return None if text is None else _replace_whole(ctx, binary, text)
    if "bypass" in fix:
        value = _operand(op, fix["bypass"])
        users = {use.operation for use in op.results[0].uses} if op.results else set()
        if value is None or len(users) != 1:
            return None
        text = _written(ctx, value, op)
        return None if text is None else _replace_whole(ctx, users.pop(), text)
    return None


def _written(ctx, value: SSAValue | None, within: Operation) -> str | None:
    """How `value` is written inside `within`'s text: its own expression where that lies inside
    (`cast<i32>(x)` in `cast<i32>(x) + 1`), else its name."""
    if value is None:
        return None
    owner, outer = value.owner, ctx.span(within)
    inner = ctx.span(owner) if isinstance(owner, Operation) else None
    if (
        inner is not None
        and outer is not None
        and outer.line == inner.line
        and outer.col <= inner.col
        and inner.end_col <= outer.end_col
    ):
        return ctx.text_of(owner)
    return value.name_hint


def _replace_whole(ctx, op: Operation, text: str) -> Edit | None:
    span = ctx.span(op)
    if span is None or span.line != span.end_line:
        return None
    return Edit(span, text)


class _Facts:
    """What a condition can ask about one op, looked up lazily."""

    def __init__(self, ctx, info, features) -> None:
        self.ctx, self.info, self.op, self.features = ctx, info, info.op, features
        self.kernel_ops: set[str] | None = None

    def get(self, subject: tuple[str, ...]) -> Any:
        ctx, info, op = self.ctx, self.info, self.op
        head = subject[0]
        if head == "op":
            return op.name
        if head == "target":
            return ctx.target
        if head == "vendor":
            return ctx.spec.vendor
        if head == "target_has":
            return _Has(self.features)
        if head == "target_lacks":
            return _Lacks(self.features)
        if head == "in_role":
            return info.role is not None
        if head == "in_loop":
            return bool(info.loops)
        if head == "loop_depth":
            return len(info.loops)
        if head == "pipelined":
            return any(loop.stages is not None for loop in info.loops)
        if head == "in_if":
            return info.in_if
        if head == "props":
            return _prop(ctx, op, subject[1])
        if head == "operands":
            value = _operand(op, subject[1])
            if subject[2] == "guarded":  # of an index only
                return _guarded(op, value) if value is not None and subject[1].startswith("indices") else None
            return _value_fact(ctx, value, subject[2])
        if head == "result":
            result = op.results[0] if op.results else None
            if subject[1] == "users":
                return _Has(use.operation.name.removeprefix("kir.") for use in result.uses) if result else None
            return _value_fact(ctx, result, subject[1])
        if head == "role":
            role = info.role
            if role is None:
                return None
            return {
                "name": role.name_text,
                "regs": role.regs.data or None,
                "units": len(role.id_list),
                "unit": role.unit.data,
            }[subject[1]]
        if head == "kernel":
            k = ctx.kernel
            key = subject[1]
            if key == "warps":
                return k.num_warps.data
            if key == "warp_unit":
                return k.warp_unit.data
            if key == "stores_low_precision":
                return bool(stored_dtypes(ctx) & set(LOW_PRECISION))
            names = {n.removeprefix("kir.") for n in self.kernel_ops or ()}
            return _Has(names) if key == "has_op" else _Lacks(names)
        raise KeyError(subject)

    def words(self) -> dict[str, str]:
        ctx, info, op = self.ctx, self.info, self.op
        out = {
            "op": op.name,
            "target": ctx.target,
            "role": info.role.name_text if info.role is not None else "",
            "regs": str(info.role.regs.data) if info.role is not None else "",
            "loop_depth": str(len(info.loops)),
            "kernel": ctx.kernel.kernel_name,
        }
        for name in op.properties:
            value = _prop(ctx, op, name)
            if value is not None:
                out[name] = str(value)
        for name in _operand_names(type(op)):
            v = _operand(op, name)
            if isinstance(v, SSAValue):
                out[f"{name}.dtype"] = str(_value_fact(ctx, v, "dtype") or "")
                out[f"{name}.kind"] = str(_value_fact(ctx, v, "kind") or "")
        if op.results:
            out["result.dtype"] = str(_value_fact(ctx, op.results[0], "dtype") or "")
        return out


class _Has:
    """A set that `in`/`eq` conditions test for membership (`target_has = "tma"`)."""

    def __init__(self, items: Iterable[str]) -> None:
        self.items = set(items)

    def wanted(self, other) -> list:
        items = other if isinstance(other, list | tuple) else [other]
        return [w.removeprefix("kir.") if isinstance(w, str) else w for w in items]

    def __eq__(self, other) -> bool:
        return all(w in self.items for w in self.wanted(other))

    __hash__ = None  # type: ignore[assignment]  # equality is "contains": no hash agrees with it


class _Lacks(_Has):
    def __eq__(self, other) -> bool:
        return not any(w in self.items for w in self.wanted(other))


def stored_dtypes(ctx) -> frozenset[str]:
    """The dtypes of the values the kernel stores to global memory (what its results are made of)."""
    found = getattr(ctx, "_learned_stores", None)
    if found is None:
        found = frozenset(
            str(_value_fact(ctx, op.value, "dtype"))
            for op in ctx.kernel.walk()
            if op.name == "kir.store" and isinstance(op.mem.type, GlobalType)
        )
        ctx._learned_stores = found
    return found


def fill(template: str, words: dict[str, str]) -> str:
    """`{name}` replaced by its word; nothing else is interpreted (no format specs, no
    attribute access)."""
    return _PLACEHOLDER.sub(lambda m: words.get(m.group(1), m.group(0)), template)


def _operand_names(cls: type[Operation]) -> list[str]:
    try:
        return [name for name, _ in cast(type[IRDLOperation], cls).get_irdl_definition().operands]
    except AttributeError:
        return []


def _operand(op: Operation, name: str) -> SSAValue | None:
    """The operand of that name; `indices0`, `indices1`: an operand of many values, by position."""
    if name not in _operand_names(type(op)):
        found = _positional(type(op), name)
        if found is None:
            return None
        values = getattr(op, found[0], ())
        return values[found[1]] if found[1] < len(values) else None
    v = getattr(op, name, None)
    return v if isinstance(v, SSAValue) else None


_POSITION = re.compile(r"^([a-z_]+?)(\d+)$")


def _positional(cls: type[Operation], name: str) -> tuple[str, int] | None:
    """(`indices`, 1) for `indices1` where the op's `indices` operand holds many values."""
    m = _POSITION.match(name)
    if m is None or m.group(1) not in _operand_names(cls):
        return None
    try:
        kinds = dict(cast(type[IRDLOperation], cls).get_irdl_definition().operands)
    except AttributeError:
        return None
    return (m.group(1), int(m.group(2))) if isinstance(kinds[m.group(1)], VarOperandDef) else None


def positional_operands(op: Operation) -> list[tuple[str, SSAValue]]:
    """Every operand of `op` by the name a rule gives it: single ones by name, the values of a
    many-valued one by position (`indices0`, ...)."""
    out: list[tuple[str, SSAValue]] = []
    for name in _operand_names(type(op)):
        v = getattr(op, name, None)
        if isinstance(v, SSAValue):
            out.append((name, v))
        elif isinstance(v, tuple | list):
            out += [(f"{name}{i}", x) for i, x in enumerate(v) if isinstance(x, SSAValue)]
    return out


def _offset(v: SSAValue) -> int:
    owner = v.owner
    if not isinstance(owner, Operation) or owner.name != "kir.binary" or len(owner.operands) != 2:
        return 0
    fn = owner.properties.get("fn")
    sign = {"add": 1, "sub": -1}.get(fn.data if isinstance(fn, StringAttr) else "", 0)
    for i, o in enumerate(owner.operands):
        c = o.owner
        if sign and isinstance(c, Operation) and c.name == "kir.const" and (i == 1 or sign == 1):
            text = c.properties.get("value")
            try:
                return sign * int(text.data) if isinstance(text, StringAttr) else 0
            except ValueError:
                return 0
    return 0


_THROUGH = ("kir.binary", "kir.broadcast", "kir.expand_dims", "kir.reshape", "kir.unary")


def _guarded(op: Operation, index: SSAValue) -> bool | None:
    """For an index of a load or store: whether its mask compares this very index (a `kir.cmp`
    the mask is made from, through and/or/not and reshapes, with the index as an operand). None
    for an op that is not an access."""
    mask = getattr(op, "mask", None) if op.name in ("kir.load", "kir.store") else None
    if op.name not in ("kir.load", "kir.store"):
        return None
    if not isinstance(mask, SSAValue):
        return False
    seen: set[int] = set()
    todo = [mask]
    while todo and len(seen) < 64:
        v = todo.pop()
        if id(v) in seen or not isinstance(v.owner, Operation):
            continue
        seen.add(id(v))
        owner = v.owner
        if owner.name == "kir.cmp":
            if any(o is index for o in owner.operands):
                return True
            continue
        if owner.name in _THROUGH:
            todo.extend(owner.operands)
    return False


def _prop(ctx, op: Operation, name: str) -> Any:
    attr = op.properties.get(name)
    return None if attr is None else _attr_value(ctx, attr)


def _attr_value(ctx, attr: Attribute) -> Any:
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, IntAttr):
        return attr.data
    if isinstance(attr, UnitAttr):
        return True
    if isinstance(attr, SymAttr):
        value = ctx.static(attr.data)
        return value if value is not None else str(attr.data)
    if isinstance(attr, ArrayAttr):
        return [_attr_value(ctx, a) for a in attr.data]
    data = getattr(attr, "data", None)
    return str(data) if data is not None else str(attr)


def _value_fact(ctx, v: SSAValue | None, key: str) -> Any:
    if key == "present":
        return v is not None
    if v is None:
        return None
    if key == "def":  # the op that makes the value ("kir.sym": a shape symbol or parameter)
        return v.owner.name if isinstance(v.owner, Operation) else "argument"
    if key == "offset":  # the integer constant added to (or taken from) what makes the value; 0 for none
        return _offset(v)
    if key == "fn":  # the function of the op that makes the value (a reduction's sum, max, ...)
        fn = v.owner.properties.get("fn") if isinstance(v.owner, Operation) else None
        return fn.data if isinstance(fn, StringAttr) else None
    t = v.type
    if key == "kind":
        for kind, cls in zip(KINDS, (ScalarType, TileType, GlobalType, SmemType, MBarrierType), strict=True):
            if isinstance(t, cls):
                return kind
        return None
    if key == "dtype":
        dtype = getattr(t, "dtype", None)
        return dtype.data if dtype is not None else None
    if key == "rank":
        if isinstance(t, ScalarType):
            return 0
        shape = getattr(t, "shape", None)
        return len(shape.data) if shape is not None else None
    return None


# ---- reading and validating a rule file -----------------------------------------------------------


class _Problems:
    """Schema errors, each located at the line of the key it is about."""

    def __init__(self, text: str, file: str) -> None:
        self.text, self.file = text, file
        self.items: list[Diagnostic] = []

    def add(self, path: tuple[str, ...], message: str, hint: str = "") -> None:
        line = _line_of(self.text, path)
        span = Span(line, 1, line, max(2, len(self.text.splitlines()[line - 1]) + 1 if self.text else 2), self.file)
        self.items.append(Diagnostic("learned.schema", "error", span, message, hint))


def _line_of(text: str, path: tuple[str, ...]) -> int:
    """The line that defines `path`: its key, else the nearest enclosing table or inline
    table, else line 1. Lines inside multi-line strings (the examples) are skipped."""
    table: tuple[str, ...] = ()
    best, best_len = 1, 0
    quote: str | None = None
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if quote is not None:
            if line.count(quote) % 2 == 1:
                quote = None
            continue
        if m := re.match(r"^\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line):
            table = _dotted(m.group(1))
            key = table
        elif m := re.match(r'^([A-Za-z0-9_\-"\s.]+?)\s*=', line):
            key = table + _dotted(m.group(1))
            for q in ('"""', "'''"):
                if line.count(q) % 2 == 1:
                    quote = q
        else:
            continue
        if key == path:
            return i
        if path[: len(key)] == key and len(key) > best_len:
            best, best_len = i, len(key)
    return best


def _dotted(text: str) -> tuple[str, ...]:
    return tuple(p.strip().strip('"').strip("'") for p in text.split("."))


def parse_rule(text: str, file: str = "<rule>") -> tuple[LearnedRule | None, list[Diagnostic]]:
    """A learned rule from the text of its file, or the schema errors (located)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(err))
        line, col = (int(m.group(1)), int(m.group(2))) if m else (1, 1)
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(err))
        return None, [
            Diagnostic("learned.schema", "error", Span(line, col, line, col + 1, file), f"not valid TOML: {message}")
        ]
    problems = _Problems(text, file)
    for key in data:
        if key not in _TOP:
            problems.add((key,), f"unknown key '{key}'", f"a rule has: {', '.join(sorted(_TOP))}")
    for key in _REQUIRED:
        if key not in data:
            problems.add((), f"missing '{key}'")
    rid = data.get("id")
    if "id" in data and (not isinstance(rid, str) or not _ID.match(rid)):
        problems.add(("id",), f"the id {rid!r} is not of the form learned.<name> (lowercase letters, digits and '-')")
    severity = data.get("severity")
    if "severity" in data and severity not in SEVERITIES:
        problems.add(("severity",), f"severity must be one of {', '.join(SEVERITIES)}, not {severity!r}")
    for key in ("summary", "explanation", "message", "hint"):
        if key in data and (not isinstance(data[key], str) or (key != "hint" and not data[key].strip())):
            problems.add((key,), f"'{key}' must be a non-empty string")
    fix = _read_fix(data, problems)
    ops, conditions = _read_match(data.get("match"), problems)
    examples = data.get("examples")
    bad = good = ""
    ex_target = None
    if isinstance(examples, dict):
        for key in examples:
            if key not in _EXAMPLES:
                problems.add(("examples", key), f"unknown key 'examples.{key}'", "examples has: bad, good, target")
        given_bad, given_good, ex_target = examples.get("bad"), examples.get("good"), examples.get("target")
        if isinstance(given_bad, str) and BAD_MARKER in given_bad:
            bad = given_bad
        else:
            problems.add(
                ("examples", "bad"), f"examples.bad must be a program whose offending line ends with '{BAD_MARKER}'"
            )
        if isinstance(given_good, str) and given_good.strip():
            good = given_good
        else:
            problems.add(("examples", "good"), "examples.good must be a program (the fixed twin of the bad one)")
        if ex_target is not None and not isinstance(ex_target, str):
            problems.add(("examples", "target"), "examples.target must be a target name")
            ex_target = None
    elif "examples" in data:
        problems.add(("examples",), "examples must be a table with bad and good")
    provenance = _read_provenance(data.get("provenance"), problems)
    for key in ("message", "hint"):
        template = data.get(key)
        if isinstance(template, str):
            for name in _PLACEHOLDER.findall(template):
                if not _known_placeholder(name, ops):
                    problems.add(
                        (key,),
                        f"unknown placeholder '{{{name}}}' in {key}",
                        "see the placeholders in verifier/learned.py",
                    )
    if problems.items:
        return None, problems.items
    # no problems: the required id and severity are there, and strings
    rule = Rule(
        cast(str, rid),
        "learned",
        cast(str, severity),
        data["summary"].strip(),
        data["explanation"].strip(),
        _dedent(bad),
        _dedent(good),
        ex_target,
    )
    try:
        rule.bad_line  # noqa: B018 - validates the marker
    except ValueError as err:
        return None, [
            Diagnostic(
                "learned.schema",
                "error",
                Span(_line_of(text, ("examples", "bad")), 1, _line_of(text, ("examples", "bad")), 2, file),
                str(err),
            )
        ]
    return (
        LearnedRule(rule, data["message"], data.get("hint", ""), ops, conditions, provenance, None, text, fix),
        [],
    )


def _read_fix(data: dict, problems: _Problems) -> tuple[tuple[str, str], ...]:
    """The `[fix]` table: one kind of fix (and `by` with `replace`); a hint only with a fix."""
    fix = data.get("fix")
    if fix is None:
        if data.get("hint", "").strip():
            problems.add(
                ("hint",),
                "a hint is the description of the rule's [fix], and this rule has none",
                "add a [fix] table, or say the way out in `message` or `explanation`",
            )
        return ()
    if not isinstance(fix, dict):
        problems.add(("fix",), "fix must be a table")
        return ()
    kinds = [k for k in fix if k in _FIX]
    for key, value in fix.items():
        if key not in _FIX and key != "by":
            problems.add(("fix", key), f"unknown key 'fix.{key}'", f"a fix is one of: {', '.join(_FIX)}")
        elif not isinstance(value, str) or not value.strip():
            problems.add(("fix", key), f"fix.{key} must be a non-empty string")
    if len(kinds) != 1:
        problems.add(("fix",), f"a fix is exactly one of: {', '.join(_FIX)}")
    elif (_FIX[kinds[0]] is not None) != ("by" in fix):
        problems.add(("fix",), "`by` goes with `replace`, and only with it")
    if not data.get("hint", "").strip():
        problems.add(("fix",), "a fix needs a `hint` that says what it does")
    return tuple(sorted((k, v) for k, v in fix.items() if isinstance(v, str)))


def _dedent(text: str) -> str:
    return textwrap.dedent(text).strip("\n") + "\n"


def _known_placeholder(name: str, ops: tuple[str, ...]) -> bool:
    if name in ("op", "target", "role", "regs", "loop_depth", "kernel", "result.dtype"):
        return True
    classes = [OP_CLASSES[o] for o in ops] if ops else list(OP_CLASSES.values())
    for cls in classes:
        defn = cls.get_irdl_definition()
        if name in defn.properties:
            return True
        base, _, attr = name.partition(".")
        if attr in ("dtype", "kind") and base in _operand_names(cls):
            return True
    return False


def _read_match(match: Any, problems: _Problems) -> tuple[tuple[str, ...], tuple[Condition, ...]]:
    if not isinstance(match, dict):
        if match is not None:
            problems.add(("match",), "match must be a table of conditions")
        return (), ()
    conditions: list[Condition] = []
    ops: tuple[str, ...] = ()
    for key, value in match.items():
        path = ("match", key)
        if key not in _MATCH:
            problems.add(path, f"unknown condition 'match.{key}'", f"conditions: {', '.join(sorted(_MATCH))}")
            continue
        if key == "op":
            names = value if isinstance(value, list) else [value]
            resolved = []
            for n in names:
                full = n if isinstance(n, str) and n.startswith("kir.") else f"kir.{n}"
                if full not in OP_CLASSES:
                    problems.add(
                        path, f"unknown op {n!r}", "op names are those of kir/dialect (kir.dot, kir.tma_load, ...)"
                    )
                resolved.append(full)
            ops = tuple(resolved)
            continue
        if key in ("props", "operands", "role", "kernel", "result"):
            if not isinstance(value, dict):
                problems.add(path, f"match.{key} must be a table")
                continue
            for sub, cond in value.items():
                if key == "operands":
                    if not isinstance(cond, dict):
                        problems.add(
                            (*path, sub), f"match.operands.{sub} must be a table of {', '.join(sorted(_VALUE_KEYS))}"
                        )
                        continue
                    for attr, c in cond.items():
                        if attr not in _VALUE_KEYS:
                            problems.add(
                                (*path, sub, attr),
                                f"unknown operand condition '{attr}'",
                                ", ".join(sorted(_VALUE_KEYS)),
                            )
                            continue
                        conditions += _condition(("operands", sub, attr), c, (*path, sub, attr), problems)
                    continue
                allowed = {"role": _ROLE_KEYS, "kernel": _KERNEL_KEYS, "result": _RESULT_KEYS}.get(key)
                if allowed is not None and sub not in allowed:
                    problems.add((*path, sub), f"unknown condition 'match.{key}.{sub}'", ", ".join(sorted(allowed)))
                    continue
                conditions += _condition((key, sub), cond, (*path, sub), problems)
            continue
        conditions += _condition((key,), value, path, problems)
    # props and operands must exist on the ops named
    if ops:
        for c in conditions:
            if c.subject[0] == "props" and not any(
                c.subject[1] in OP_CLASSES[o].get_irdl_definition().properties for o in ops
            ):
                problems.add(
                    ("match", "props", c.subject[1]), f"none of {', '.join(ops)} has a property '{c.subject[1]}'"
                )
            if c.subject[0] == "operands" and not any(
                c.subject[1] in _operand_names(OP_CLASSES[o]) or _positional(OP_CLASSES[o], c.subject[1]) for o in ops
            ):
                problems.add(
                    ("match", "operands", c.subject[1]), f"none of {', '.join(ops)} has an operand '{c.subject[1]}'"
                )
    return ops, tuple(conditions)


def _condition(subject: tuple[str, ...], value: Any, path: tuple[str, ...], problems: _Problems) -> list[Condition]:
    if isinstance(value, dict):
        tests = []
        for cmp, want in value.items():
            if cmp not in COMPARATORS:
                problems.add((*path, cmp), f"unknown comparison '{cmp}'", f"comparisons: {', '.join(COMPARATORS)}")
                continue
            if cmp in ("in", "not_in") and not isinstance(want, list):
                problems.add((*path, cmp), f"'{cmp}' takes a list")
                continue
            if cmp in ("lt", "le", "gt", "ge") and not isinstance(want, int | float):
                problems.add((*path, cmp), f"'{cmp}' takes a number")
                continue
            tests.append((cmp, want))
        if not value:
            problems.add(path, "an empty condition")
        return [Condition(subject, tuple(tests))] if tests else []
    if (
        isinstance(value, dict | list)
        and subject[0] not in ("target_has", "target_lacks", "kernel")
        and subject
        != (
            "result",
            "users",
        )
    ):
        problems.add(path, "a condition is a value or a table of comparisons (use `in = [...]` for a list)")
        return []
    return [Condition(subject, (("eq", value),))]


def _read_provenance(value: Any, problems: _Problems) -> Provenance:
    empty = Provenance("", (), 0, 0)
    if not isinstance(value, dict):
        if value is not None:
            problems.add(("provenance",), "provenance must be a table")
        return empty
    for key in value:
        if key not in _PROVENANCE:
            problems.add(("provenance", key), f"unknown key 'provenance.{key}'", ", ".join(sorted(_PROVENANCE)))
    reason = value.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        problems.add(("provenance", "reason"), "provenance.reason must say why the rule was added")
        reason = ""
    failures = value.get("failures")
    if not isinstance(failures, list) or not failures or not all(isinstance(f, str) for f in failures):
        problems.add(
            ("provenance", "failures"), "provenance.failures must list the failures (files or ids) the rule came from"
        )
        failures = []
    counts = {}
    for key in ("support", "false_positives"):
        n = value.get(key)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            problems.add(("provenance", key), f"provenance.{key} must be a count (an integer >= 0)")
            n = 0
        counts[key] = n
    return Provenance(
        reason.strip(),
        tuple(failures),
        counts["support"],
        counts["false_positives"],
        str(value.get("added", "")),
        str(value.get("author", "")),
    )


# ---- loading ------------------------------------------------------------------------------------------

LOADED: dict[str, LearnedRule] = {}
LOAD_ERRORS: list[Diagnostic] = []


def rule_dirs() -> list[Path]:
    dirs = [LEARNED_DIR]
    extra = os.environ.get(ENV_DIR)
    if extra and Path(extra).resolve() != LEARNED_DIR.resolve():
        dirs.append(Path(extra))
    return dirs


def read_rule_file(path: Path) -> tuple[LearnedRule | None, list[Diagnostic]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        return None, [Diagnostic("io.read", "error", None, f"cannot read {path}: {err}")]
    lr, problems = parse_rule(text, str(path))
    if lr is not None:
        lr = LearnedRule(lr.rule, lr.message, lr.hint, lr.ops, lr.conditions, lr.provenance, path, text, lr.fix)
    return lr, problems


def load_learned_rules() -> list[LearnedRule]:
    """Register every rule file not registered yet (safe to call again after an install). A
    file that does not validate is skipped; its problems are in `LOAD_ERRORS` until the next
    call."""
    new = []
    LOAD_ERRORS.clear()  # the problems of the files there now
    for directory in rule_dirs():
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
            lr, problems = read_rule_file(path)
            if lr is None:
                LOAD_ERRORS.extend(problems)
                continue
            if lr.rule.id in RULES:
                continue
            register_data_rule(lr.rule, lr.check)
            LOADED[lr.rule.id] = lr
            new.append(lr)
    return new


def forget(rule_id: str) -> None:
    """Unregister a learned rule (tests install rules into temporary directories)."""
    if rule_id not in LOADED:
        return
    del LOADED[rule_id]
    RULES.pop(rule_id, None)
    CHECKS[:] = [c for c in CHECKS if c.rule.id != rule_id]


# ---- `kir rules add` --------------------------------------------------------------------------------


def default_corpus_dirs() -> list[Path]:
    return [ROOT / "tests" / "verifier" / "corpus"]


_PARSED: dict[tuple[str, str], Any] = {}  # (file, text) -> Program or KirError: matching never mutates


def _parsed(text: str, file: str):
    key = (file, text)
    if key not in _PARSED:
        try:
            _PARSED[key] = parse(text, file=file)
        except KirError as err:
            _PARSED[key] = err
    found = _PARSED[key]
    if isinstance(found, KirError):
        raise found
    return found


def run_rule(lr: LearnedRule, text: str, file: str, target: str | None) -> list[Diagnostic]:
    """The rule's own diagnostics on a program (parse errors raise `KirError`)."""
    ctx = Context(_parsed(text, file), target)
    ctx.rule = lr.rule
    return list(lr.check(ctx))


def vet(lr: LearnedRule, corpus_dirs: list[Path] | None = None, rule_file: Path | None = None) -> list[Diagnostic]:
    """Why the rule may not be installed (empty: it may): it must flag its bad example at the
    marked line and every failure file its provenance names, and flag none of the known-good
    programs (examples/*.kir, every *.good.kir of the corpus, every rule's good example)."""
    load_rules()
    out: list[Diagnostic] = []
    where = rule_file and str(rule_file)
    rule_span = Span(1, 1, 1, 2, where) if where else None

    def flagged(text: str, file: str, target: str | None, what: str) -> list[Diagnostic] | None:
        try:
            return run_rule(lr, text, file, target)
        except KirError as err:
            first = err.diagnostics[0]
            out.append(
                Diagnostic(
                    "learned.example",
                    "error",
                    _span_in(rule_file, lr, what) if what in ("bad", "good") else first.span,
                    f"the {what} does not parse: {first.message}",
                )
            )
            return None

    # its own examples
    hits = flagged(lr.rule.bad, "bad.kir", lr.rule.target, "bad")
    if hits is not None and not any(d.span and d.span.line == lr.rule.bad_line for d in hits):
        got = ", ".join(f"line {d.span.line}" for d in hits if d.span) or "nothing"
        out.append(
            Diagnostic(
                "learned.misses",
                "error",
                _span_in(rule_file, lr, "bad"),
                f"the rule does not flag its bad example at the marked line {lr.rule.bad_line} (it flags {got})",
                "make the pattern match the op on the marked line",
            )
        )
    hits = flagged(lr.rule.good, "good.kir", lr.rule.target, "good")
    if hits:
        out.append(
            Diagnostic(
                "learned.false-positive",
                "error",
                _span_in(rule_file, lr, "good"),
                f"the rule flags its own good example at line {hits[0].span.line if hits[0].span else '?'}: {hits[0].message}",
                "narrow the pattern so that the fixed twin passes",
            )
        )
    # the failures it names
    for failure in lr.provenance.failures:
        if not failure.endswith(".kir"):
            continue  # an id of a stored failure: recorded, not checkable here
        path = _resolve(failure, rule_file)
        if path is None:
            out.append(
                Diagnostic(
                    "learned.misses",
                    "error",
                    _span_in(rule_file, lr, "failures"),
                    f"provenance names {failure}, which does not exist",
                    "name failure files relative to the repository root",
                )
            )
            continue
        found = flagged(path.read_text(encoding="utf-8"), str(path), None, str(path))
        if found is not None and not found:
            out.append(
                Diagnostic(
                    "learned.misses",
                    "error",
                    _span_in(rule_file, lr, "failures"),
                    f"the rule does not flag {failure}, a failure its provenance names",
                    "a learned rule must catch every failure it was learned from",
                )
            )
    # the known-good programs
    for text, file, target in known_good(corpus_dirs):
        try:
            hits = run_rule(lr, text, file, target)
        except KirError:
            continue  # a known-good program that does not parse is not this rule's business
        for d in hits[:1]:
            out.append(
                Diagnostic(
                    "learned.false-positive",
                    "error",
                    d.span if d.span and not file.startswith("<") else rule_span,
                    f"the rule flags a known-good program ({file}{f':{d.span.line}' if d.span else ''}): {d.message}",
                    "narrow the pattern (an extra condition on props, operands, role or target)",
                )
            )
    return out


def known_good(corpus_dirs: list[Path] | None = None) -> Iterator[tuple[str, str, str | None]]:
    """(text, name, target) of every program that no rule may flag."""
    for path in sorted((ROOT / "examples").glob("*.kir")):
        yield path.read_text(encoding="utf-8"), str(path), None
    for directory in corpus_dirs if corpus_dirs is not None else default_corpus_dirs():
        for path in sorted(Path(directory).rglob("*.good.kir")):
            yield path.read_text(encoding="utf-8"), str(path), None
    for rid, r in sorted(RULES.items()):
        yield r.good, f"<good example of {rid}>", r.target


def _resolve(name: str, rule_file: Path | None) -> Path | None:
    candidates = [ROOT / name, Path.cwd() / name]
    if rule_file is not None:
        candidates.insert(0, rule_file.parent / name)
    return next((p for p in candidates if p.is_file()), None)


def _span_in(rule_file: Path | None, lr: LearnedRule, key: str) -> Span | None:
    if rule_file is None:
        return None
    path = {"bad": ("examples", "bad"), "good": ("examples", "good"), "failures": ("provenance", "failures")}.get(
        key, (key,)
    )
    line = _line_of(lr.text, path)
    return Span(line, 1, line, 2, str(rule_file))


def retire(rule_id: str) -> list[Path]:
    """`kir rules retire`: remove an installed learned rule's file (and the failure programs
    kept beside it, `failures/<name>/`) and unregister it. Returns what was removed; empty when
    no learned-rule file has that id."""
    load_learned_rules()
    lr = LOADED.get(rule_id)
    if lr is None or lr.path is None:
        return []
    removed = [lr.path]
    folder = lr.path.parent / "failures" / lr.name
    lr.path.unlink()
    if folder.is_dir():
        for f in sorted(folder.iterdir()):
            f.unlink()
            removed.append(f)
        folder.rmdir()
    forget(rule_id)
    return removed


def install_dir() -> Path:
    extra = os.environ.get(ENV_DIR)
    return Path(extra) if extra else LEARNED_DIR


def install(path: str | Path, corpus_dirs: list[Path] | None = None) -> tuple[Path | None, list[Diagnostic]]:
    """`kir rules add`: validate, vet, then copy the file into the learned-rule directory.
    Returns the installed path, or None and the reasons for refusing."""
    path = Path(path)
    lr, problems = read_rule_file(path)
    if lr is None:
        return None, problems
    load_rules()
    dest = install_dir() / f"{lr.name}.toml"
    if lr.rule.id in RULES or dest.exists():
        where = LOADED[lr.rule.id].path if lr.rule.id in LOADED else dest
        return None, [
            Diagnostic(
                "learned.duplicate",
                "error",
                Span(_line_of(lr.text, ("id",)), 1, _line_of(lr.text, ("id",)), 2, str(path)),
                f"a rule {lr.rule.id} is already installed ({where})",
                "choose another id, or remove the installed file first",
            )
        ]
    reasons = vet(lr, corpus_dirs, path)
    if reasons:
        return None, reasons
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, dest)
    return dest, []
