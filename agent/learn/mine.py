"""Failures -> rules: the miner over the stores, the rule it proposes for a recurring failure, and
the gate a rule passes before it is kept.

1. **Failures.** Every node of every search in the stores whose candidate passed the verifier
   and then failed: it stopped at lower, compile or run with an error (a compile error, a wrong
   answer, a race or deadlock the interpreter found, a hang, an access out of bounds). The
   culprit ops of a failure are where its program went wrong: for a mutant (agent.propose.mutate)
   the mutated op at the line its move names; for another failure, the ops at the lines its
   diagnostics point at, else every op.
2. **Groups.** Failures with one signature: the stage, the failure's rule (`harness.mismatch`,
   `interp.race`, ...), the mutation kind where there is one, and the culprit's op. A group
   recurs when it holds at least `min_programs` distinct programs from `min_tasks` tasks.
3. **The rule.** Each op has facts, in the vocabulary of the learned-rule format (the op, its
   properties, the dtype, kind and rank of its operands and result, the loops and role around
   it, the target, the kernel's warps and which ops the kernel has and lacks). A group's rule
   is the facts one culprit op of every failing program shares (chosen to share the most),
   then made general over where the op sits: each fact of its surroundings (the kernel's other
   ops, the target, the loops) is dropped where the rule still flags every failing program and
   no known-correct one; the op's own facts stay, as the failure's pattern.
4. **The gate.** A rule is kept only if it flags every program of its group, flags no program
   known to be correct (every suite and example program, every verifier corpus `.good.kir`,
   every rule's good example, and every node of the stores that passed the harness), passes
   `verifier.learned.vet` (its bad example is a real failing program from the store, flagged at
   its marked line; its good example is the program the failure was made from), and takes at
   most `budget_s` of verifier time a program on the corpus.

The rule file carries its provenance: the stores and nodes it came from, its support, and the
failing programs, written next to it (`<dir>/failures/<name>/*.kir`) so that `kir rules add`'s
vetting checks them again.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xdsl.ir import Operation

from agent.search.loop import STATIC_STAGES
from agent.search.tree import Node
from agent.store import open_store
from kir.diagnostics import KirError
from kir.parser import parse
from kir.program import span_of
from verifier.context import Context
from verifier.engine import load_rules
from verifier.learned import (
    LOADED,
    OP_CLASSES,
    _Facts,
    _operand_names,
    positional_operands,
    read_rule_file,
    run_rule,
    vet,
)
from verifier.registry import RULES

ROOT = Path(__file__).resolve().parents[2]
MIN_PROGRAMS = 3
MIN_TASKS = 2
BUDGET_S = 0.05  # verifier seconds a program the rule may add, on average over the corpus

# the op each mutation edits: where a mutant's culprit is
MUTATED_OPS = {
    "shift-index": ("kir.load", "kir.store"),
    "mask-off-by-one": ("kir.cmp",),
    "loop-bound": ("kir.for",),
    "flip-parity": ("kir.wait",),
    "arrive-count": ("kir.mbarrier",),
    "narrow": ("kir.reduce", "kir.dot"),
}
# the op a mutation inserts after the mutated one, which is where the program goes wrong: `narrow`
# rounds a reduction's or product's f32 result through a cast to bf16 (and back)
MADE_BY_MUTATION = {"narrow": "kir.cast"}
REFINE_DEPTH = 2  # facts a refused group may be narrowed by (`refine`)
REFINE_WIDTH = 8  # the largest parts of a group narrowed again, at the second fact
# what undoes each kind of failure: the rule's [fix] (verifier/learned.py) and the hint that says
# what it does; `drop_offset` names the operand whose constant offset the pattern holds (None: the
# one it finds). A kind with no fix that can be written as an edit gives its advice in the message.
FIXES: dict[str, tuple[str, dict[str, str | None]]] = {
    "shift-index": (
        "take the constant offset off the index: an index one past the extent its mask checks reads or writes the neighbour",
        {"drop_offset": None},
    ),
    "loop-bound": (
        "end the loop one trip earlier: take the constant off its bound, one trip too many reads past the end",
        {"drop_offset": "upper"},
    ),
    "mask-off-by-one": (
        "compare with `<`: a bound check is `i < N`, and `<=` lets lane N through",
        {"replace": "<=", "by": "<"},
    ),
    "narrow": (
        "keep the value in f32: drop the round trip through bf16, which drops its low bits",
        {"bypass": "operand"},
    ),
}
ADVICE = {
    "drop-sync": "every asynchronous producer needs its wait (or barrier) before its consumer reads",
    "flip-parity": "a wait's parity is the phase it waits for: (trip / stages) % 2 for a ring of stages",
    "arrive-count": "an mbarrier's count is the arrivals one phase needs: as many as arrive each phase",
}
# What a rule is generalized over: the facts of what surrounds the failing op (which ops the
# kernel has, the target, the loops and role), dropped in this order where the known-correct
# programs allow it. The op's own facts (its properties, what its operands and result are and
# where they come from) are the failure's pattern and stay: a rule that kept only what the
# corpus happens to need would flag programs the corpus does not have.
CONTEXT_FACTS = ("kernel", "target", "in_role", "in_loop", "loop_depth", "in_if", "pipelined")
# facts that hold a set (a condition on them: the set holds every value the rule names)
SET_FACTS = (("kernel", "has_op"), ("kernel", "lacks_op"), ("result", "users"))


# ---- failures -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    db: str
    search: str
    task: str
    node: int
    key: str
    text: str
    parent_text: str | None
    stage: str
    rule: str
    message: str
    kind: str  # the mutation kind, or "" for a failure no mutation made
    lines: tuple[int, ...]  # where the culprit ops are (empty: anywhere)
    op: str = ""  # the mutated op's name, where a mutation says
    nth: int | None = None  # which op of that name (in the order of the text), where it says

    @property
    def ref(self) -> str:
        return f"{Path(self.db).name}#{self.search}/{self.node}"


def failures(dbs: Iterable[str]) -> Iterator[Failure]:
    """The candidates of the stores that passed the verifier and failed after it."""
    for db in dbs:
        with open_store(db) as store:
            for s in store.searches():
                nodes = {n.id: n for n in store.nodes(s["id"])}
                for n in nodes.values():
                    failure = _failure(db, s, n, nodes)
                    if failure is not None:
                        yield failure


def _failure(db: str, search: dict, n: Node, nodes: dict[int, Node]) -> Failure | None:
    r = n.record
    if r is None or r.ok or r.stage in STATIC_STAGES or n.parent is None:
        return None
    errors = r.errors
    rule = errors[0].rule if errors else f"{r.stage}.failed"
    message = errors[0].message if errors else ""
    kind = n.move.name if n.move.proposer == "mutate" else ""
    params = dict(n.move.params)
    if kind and "line" in params:
        lines: tuple[int, ...] = (int(params["line"]),)
    else:
        lines = tuple(sorted({d.span.line for d in errors if d.span is not None and d.span.file in (None, r.file)}))
    parent = nodes.get(n.parent)
    return Failure(
        db, search["name"], search["task"], n.id, n.key, n.text, parent.text if parent else None,
        r.stage, rule, message, kind, lines, str(params.get("op", "")),
        int(params["nth"]) if "nth" in params else None,
    )  # fmt: skip


def correct_programs(dbs: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(name, text) of every stored candidate that passed the harness."""
    for db in dbs:
        with open_store(db) as store:
            for s in store.searches():
                for n in store.nodes(s["id"]):
                    if n.record is not None and n.record.ok and n.record.stage == "run":
                        yield f"{Path(db).name}#{s['name']}/{n.id}", n.text


# ---- facts ----------------------------------------------------------------------------------------

Fact = tuple[tuple[str, ...], Any]  # (subject, value): the condition `subject = value`


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | bool) and not isinstance(value, list)


def op_facts(ctx, info, kernel_ops: frozenset[str]) -> frozenset[Fact]:
    """The facts of one op that a learned rule can test."""
    facts = _Facts(ctx, info, ctx.spec.features)
    facts.kernel_ops = set(kernel_ops)
    out: set[Fact] = set()
    for subject in (("op",), ("target",), ("in_role",), ("in_loop",), ("loop_depth",), ("pipelined",), ("in_if",)):
        out.add((subject, facts.get(subject)))
    op = info.op
    for name in op.properties:
        value = facts.get(("props", name))
        if _scalar(value):
            out.add((("props", name), value))
    # single operands by name (`present = false` where an optional one is absent), the values
    # of a many-valued one by position
    single = [n for n in _operand_names(type(op)) if not isinstance(getattr(op, n, None), tuple | list)]
    for name in dict.fromkeys([*single, *(n for n, _ in positional_operands(op))]):
        for key in ("dtype", "kind", "rank", "present", "def", "fn", "guarded", "offset"):
            value = facts.get(("operands", name, key))
            if value is not None and _scalar(value):
                out.add((("operands", name, key), value))
    if op.results:
        for key in ("dtype", "kind", "rank"):
            value = facts.get(("result", key))
            if value is not None:
                out.add((("result", key), value))
        for use in op.results[0].uses:
            out.add((("result", "users"), use.operation.name.removeprefix("kir.")))
    out.add((("kernel", "warps"), ctx.kernel.num_warps.data))
    out.add((("kernel", "stores_low_precision"), facts.get(("kernel", "stores_low_precision"))))
    names = {n.removeprefix("kir.") for n in kernel_ops}
    for name in sorted(names):
        out.add((("kernel", "has_op"), name))
    for name in sorted(_all_op_names() - names):
        out.add((("kernel", "lacks_op"), name))
    return frozenset(out)


def _all_op_names() -> set[str]:
    return {name.removeprefix("kir.") for name in OP_CLASSES}


@dataclass
class Facts:
    """Each op's facts of one program, with the op's line."""

    ops: list[tuple[int, frozenset[Fact]]] = field(default_factory=list)
    ir: list[Operation] = field(default_factory=list)  # the op of each entry of `ops`

    def matches(self, rule: frozenset[Fact]) -> list[int]:
        return [line for line, facts in self.ops if rule <= facts]


_FACTS: dict[str, Facts | None] = {}


def program_facts(text: str, file: str = "<program>") -> Facts | None:
    """The facts of every op of a program (None: it does not parse)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    if digest in _FACTS:
        return _FACTS[digest]
    try:
        program = parse(text, file=file)
    except KirError:
        _FACTS[digest] = None
        return None
    ctx = Context(program)
    kernel_ops = frozenset(i.op.name for i in ctx.infos)
    found = Facts()
    for info in ctx.infos:
        span = span_of(info.op)
        found.ops.append((span.line if span is not None else 0, op_facts(ctx, info, kernel_ops)))
        found.ir.append(info.op)
    _FACTS[digest] = found
    return found


def _made(failure: Failure, facts: Facts) -> list[int]:
    """The ops (their places in `facts`) that `failure`'s mutation inserted after the mutated op:
    `narrow`'s cast to bf16 of the reduction's or product's result. The mutated op is named by
    its place among its kind where the move says (older moves name only the kind)."""
    made = MADE_BY_MUTATION[failure.kind]
    mutated = (failure.op,) if failure.op else MUTATED_OPS.get(failure.kind, ())
    same = [i for i, (_, f) in enumerate(facts.ops) if dict(f).get(("op",)) in mutated]
    if failure.nth is not None and failure.nth < len(same):
        users = {id(u.operation) for r in facts.ir[same[failure.nth]].results for u in r.uses}
        found = [i for i, o in enumerate(facts.ir) if id(o) in users and o.name == made]
        if found:
            return found
    return [
        i
        for i, o in enumerate(facts.ir)
        if o.name == made
        and dict(facts.ops[i][1]).get(("result", "dtype")) == "bf16"
        and any(isinstance(v.owner, Operation) and v.owner.name in mutated for v in o.operands)
    ]


def culprits(failure: Failure) -> list[frozenset[Fact]]:
    """The facts of the ops where the failure's program went wrong."""
    facts = program_facts(failure.text)
    if facts is None:
        return []
    wanted = (failure.op,) if failure.op else MUTATED_OPS.get(failure.kind)
    if failure.kind in MADE_BY_MUTATION:  # the op the mutation inserted after the mutated one
        return [facts.ops[i][1] for i in _made(failure, facts)]
    if failure.op and failure.nth is not None:  # the mutated op itself
        same = [f for _, f in facts.ops if dict(f).get(("op",)) == failure.op]
        return [same[failure.nth]] if failure.nth < len(same) else []
    out = []
    for line, f in facts.ops:
        if failure.lines and line not in failure.lines:
            continue
        if wanted is not None and dict(f).get(("op",)) not in wanted:
            continue
        out.append(f)
    return out or ([] if wanted is not None else [f for _, f in facts.ops])


# ---- groups and rules --------------------------------------------------------------------------------


@dataclass
class Group:
    signature: tuple[str, str, str, str]  # stage, failure rule, mutation kind, culprit op
    members: list[Failure] = field(default_factory=list)
    # a fact of the culprit ops that narrows the group (`refine`): where the whole group's
    # shared facts also hold in a correct program, the failures that have it may still be told apart
    where: Fact | None = None
    caught: list[str] = field(default_factory=list)  # learned rules that flag some of its failures today
    caught_candidates: int = 0  # how many of its failures they flag (left out of `members`)
    parent: Group | None = None  # the group this one narrows (`where` is the fact it adds)

    @property
    def programs(self) -> int:
        return len({f.key for f in self.members})

    @property
    def tasks(self) -> int:
        return len({f.task for f in self.members})

    @property
    def refined(self) -> list[Fact]:
        """The facts that narrow this group from the one it was refined from, outermost first."""
        return [*(self.parent.refined if self.parent else []), *([self.where] if self.where else [])]

    def describe(self) -> str:
        stage, rule, kind, op = self.signature
        where = " and ".join(f"{'.'.join(s)} = {_toml_value(v)}" for s, v in self.refined)
        return f"{kind or 'failure'} at {op}{' where ' + where if where else ''}: {rule} at {stage}"


def group(found: Iterable[Failure]) -> list[Group]:
    groups: dict[tuple[str, str, str, str], Group] = {}
    for f in found:
        ops = {dict(c).get(("op",)) for c in culprits(f)}
        op = sorted(o for o in ops if o)[0] if len(ops) == 1 else "*"
        if f.kind in MADE_BY_MUTATION and f.op:
            op = f.op  # the op whose result the mutation's op rounds: one group for each
        sig = (f.stage, f.rule, f.kind, op)
        groups.setdefault(sig, Group(sig)).members.append(f)
    return sorted(groups.values(), key=lambda g: (-g.programs, g.signature))


@dataclass
class Proposed:
    group: Group
    facts: frozenset[Fact] | None
    reasons: list[str]  # why it was not kept (empty: kept)
    name: str = ""
    text: str = ""  # the rule file
    failure_files: dict[str, str] = field(default_factory=dict)  # relative name -> program text
    checked: int = 0  # known-correct programs it was checked against
    seconds: float = 0.0


def known_correct(dbs: Iterable[str]) -> list[tuple[str, str]]:
    """(name, text) of every program no rule may flag: the suite's and the examples' programs,
    the verifier corpus' `.good.kir` files, every rule's good example, the stores' correct nodes."""
    load_rules()
    out = []
    for pattern in ("benchmarks/tasks/*/*.kir", "examples/*.kir", "tests/verifier/corpus/**/*.good.kir"):
        for path in sorted(ROOT.glob(pattern)):
            out.append((str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    for rid, r in sorted(RULES.items()):
        out.append((f"<good example of {rid}>", r.good))
    out.extend(correct_programs(dbs))
    return out


def _common(members: list[Failure]) -> frozenset[Fact] | None:
    """The facts one culprit op of every failing program shares, the culprits chosen to share most."""
    per = [culprits(f) for f in members]
    if any(not c for c in per):
        return None
    best: frozenset[Fact] | None = None
    for start in per[0]:
        facts = start
        for options in per[1:]:
            facts = max((facts & o for o in options), key=len)
        if ("op",) in dict(facts) and (best is None or len(facts) > len(best)):
            best = facts
    return best


def _flags_all(rule: frozenset[Fact], members: list[Failure]) -> bool:
    return all(any(rule <= c for c in culprits(f)) for f in members)


def _false_positives(rule: frozenset[Fact], correct: list[Facts]) -> int:
    return sum(1 for facts in correct if facts.matches(rule))


def _caught_by(f: Failure) -> list[str]:
    """The learned rules that flag the failing program now (with errors or warnings)."""
    return sorted({lr.rule.id for lr in LOADED.values() if run_rule(lr, f.text, "failure.kir", None)})


def refine(
    g: Group, correct: list[tuple[str, str]], min_programs: int, min_tasks: int, depth: int = REFINE_DEPTH
) -> Proposed | None:
    """The largest part of a refused group that more facts of its culprit ops (one, or up to
    `depth` of them) tell apart from every correct program, as a group of its own (at least
    `min_programs` programs from `min_tasks` tasks), with its kept rule; None when no such part
    exists."""
    per = [(f, frozenset().union(*culprits(f))) for f in g.members]
    counts: dict[Fact, int] = defaultdict(int)
    for _, facts in per:
        for fact in facts:
            if fact[0] not in SET_FACTS:
                counts[fact] += 1
    best: Proposed | None = None
    parts = []
    for fact, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        if n == len(per) or n < min_programs or (best is not None and n <= best.group.programs):
            continue
        sub = Group(g.signature, [f for f, facts in per if fact in facts], where=fact, parent=g)
        if sub.programs < min_programs or sub.tasks < min_tasks:
            continue
        p = propose(sub, correct)
        if not p.reasons and (best is None or sub.programs > best.group.programs):
            best = p
        parts.append(sub)
    if best is None and depth > 1:  # a second fact, within the largest parts
        for sub in parts[:REFINE_WIDTH]:
            found = refine(sub, correct, min_programs, min_tasks, depth - 1)
            if found is not None and (best is None or found.group.programs > best.group.programs):
                best = found
    return best


def propose(g: Group, correct: list[tuple[str, str]]) -> Proposed:
    """The group's rule, generalized as far as the known-correct programs allow."""
    facts = _common(g.members)
    if facts is None:
        return Proposed(g, None, ["the failing programs share no op the rule could point at"])
    corpus = [f for f in (program_facts(text, name) for name, text in correct) if f is not None]
    if _false_positives(facts, corpus):
        example = next(name for name, text in correct if (p := program_facts(text, name)) and p.matches(facts))
        return Proposed(g, facts, [f"every fact the failing ops share also holds in a correct program ({example})"])
    rule = set(facts)
    context = [f for f in rule if f[0][0] in CONTEXT_FACTS]
    for fact in sorted(context, key=lambda f: (CONTEXT_FACTS.index(f[0][0]), str(f))):
        trial = frozenset(rule - {fact})
        if _flags_all(trial, g.members) and not _false_positives(trial, corpus):
            rule = set(trial)
    return Proposed(g, frozenset(rule), [], checked=len(corpus))


# ---- the rule file ----------------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))


def _mark(text: str, line: int) -> str:
    lines = text.splitlines()
    lines[line - 1] = lines[line - 1].split("  # ")[0].rstrip() + "  # <-"
    return "\n".join(lines) + "\n"


def _message(g, stage: str, failure_rule: str, kind: str | None) -> str:
    said = f"{{op}} here matches {g.programs} programs that failed at {stage} ({failure_rule}) after the verifier passed them"
    advice = ADVICE.get(kind or "")
    return f"{said}: {advice}" if advice else said


def _fix_lines(kind: str | None, facts) -> list[str]:
    """The rule's hint and [fix] table for a kind of failure (none for a kind without a fix)."""
    if kind not in FIXES:
        return []
    hint, fix = FIXES[kind]
    if "drop_offset" in fix and fix["drop_offset"] is None:
        shifted = sorted(s[1] for s, v in facts if s[0] == "operands" and s[-1] == "offset" and v)
        if not shifted:
            return []
        fix = {"drop_offset": shifted[0]}
    return [f"hint = {json.dumps(hint)}", "", "[fix]", *(f"{k} = {json.dumps(v)}" for k, v in fix.items())]


def rule_file(p: Proposed, dbs: list[str], prefix: str = "") -> None:
    """Fill in `p.name`, `p.text` (the TOML) and `p.failure_files` for a kept rule; the
    provenance names the failure files with `prefix` (their folder's path from the repository
    root, where the rule is written inside it)."""
    assert p.facts is not None
    g = p.group
    stage, failure_rule, kind, op = g.signature
    facts = dict(sorted(p.facts, key=lambda f: str(f)))
    digest = hashlib.sha256(json.dumps(sorted(map(str, p.facts))).encode()).hexdigest()[:8]
    words = (kind or failure_rule.split(".")[-1]).replace("_", "-")
    p.name = f"mined-{words}-{digest}"
    members = sorted(g.members, key=lambda f: (len(f.text), f.ref))
    bad = members[0]
    bad_facts = program_facts(bad.text)
    assert bad_facts is not None
    line = next(ln for ln, f in bad_facts.ops if p.facts <= f and any(p.facts <= c for c in culprits(bad)))
    # a pattern of the op alone is an error; one that needed where the op sits to stay clean of
    # the correct programs (a correct op like it exists elsewhere) is only a warning
    contextual = any(subject[0] in CONTEXT_FACTS for subject, _ in p.facts)
    lines = [
        f'id = "learned.{p.name}"',
        f'severity = "{"warning" if contextual else "error"}"',
        f"summary = {json.dumps(f'mined: {g.describe()} ({g.programs} programs, {g.tasks} tasks)')}",
        "explanation = '''",
        f"Mined from {len(g.members)} candidates of {g.programs} programs in {g.tasks} tasks that passed the",
        f"verifier and then failed at {stage} ({failure_rule}); the first: {bad.message[:200]}",
        "The pattern is the facts one failing op of each program shares and no known-correct program has.",
        "'''",
        f"message = {json.dumps(_message(g, stage, failure_rule, kind))}",
        *_fix_lines(kind, p.facts),
        "",
        "[match]",
    ]
    conditions: dict[str, list[str]] = defaultdict(list)
    lists: dict[tuple[str, ...], list[Any]] = defaultdict(list)
    for subject, value in facts.items():
        if subject in SET_FACTS:
            continue
        if len(subject) == 1:
            lines.append(f"{subject[0]} = {_toml_value(value)}")
        else:
            conditions[".".join(subject[:-1])].append(f"{subject[-1]} = {_toml_value(value)}")
    for subject, value in sorted(p.facts, key=str):
        if subject in SET_FACTS:  # one condition: the set holds every value
            lists[subject].append(value)
    for subject, values in sorted(lists.items()):
        conditions[".".join(subject[:-1])].append(f"{subject[-1]} = {json.dumps(sorted(values))}")
    for table, entries in sorted(conditions.items()):
        lines.append(f"[match.{table}]")
        lines.extend(sorted(entries))
    failure_names = []
    for i, f in enumerate(members):
        name = f"failures/{p.name}/{i:02d}-{f.task}.kir"
        p.failure_files[name] = f"# {f.ref}: failed at {f.stage} ({f.rule}): {f.message[:160]}\n{f.text}"
        failure_names.append(prefix + name)
    good = bad.parent_text or ""
    stores = ", ".join(Path(d).name for d in dbs)
    lines += [
        "",
        "[examples]",
        "bad = '''",
        _mark(bad.text, line).rstrip("\n"),
        "'''",
        "good = '''",
        good.rstrip("\n"),
        "'''",
        "",
        "[provenance]",
        f"reason = {json.dumps(f'mined by kir learn from {stores}: {g.describe()}')}",
        f"failures = {json.dumps(failure_names)}",
        f"support = {len(g.members)}",
        "false_positives = 0",
        f'added = "{time.strftime("%Y-%m-%d")}"',
        'author = "kir learn"',
    ]
    p.text = "\n".join(lines) + "\n"


def gate(p: Proposed, out_dir: Path, correct: list[tuple[str, str]]) -> None:
    """vet the written rule (its examples, its failures, the known-good programs) and time it
    on the corpus; a reason is added to `p.reasons` for each thing that fails."""
    path = out_dir / f"{p.name}.toml"
    lr, problems = read_rule_file(path)
    if lr is None:
        p.reasons += [f"the rule file does not read: {d.message}" for d in problems]
        return
    p.reasons += [d.message for d in vet(lr, rule_file=path)]
    start = time.perf_counter()
    flagged = []
    for name, text in correct:
        try:
            if run_rule(lr, text, name, None):
                flagged.append(name)
        except KirError:
            continue
    p.seconds = time.perf_counter() - start
    if flagged:
        p.reasons.append(f"flags {len(flagged)} known-correct programs, the first {flagged[0]}")
    if correct and p.seconds / len(correct) > BUDGET_S:
        p.reasons.append(f"takes {p.seconds / len(correct) * 1e3:.1f} ms a program, over {BUDGET_S * 1e3:.0f} ms")


def mine(
    dbs: list[str],
    out_dir: Path,
    *,
    min_programs: int = MIN_PROGRAMS,
    min_tasks: int = MIN_TASKS,
    dry_run: bool = False,
    skip_caught: bool = True,
) -> tuple[list[Group], list[Proposed]]:
    """Group the stores' failures; for each recurring group propose, write and gate a rule.
    Kept rules stay in `out_dir` (with their failure files); refused ones are removed. With
    `dry_run` the rules are written and gated in a scratch folder, and nothing is left. A failure
    a learned rule flags already is left out (`skip_caught`): it is caught."""
    groups = group(failures(dbs))
    correct = known_correct(dbs)  # (loads the verifier's rules, the learned ones among them)
    for g in groups if skip_caught else ():  # a failure a learned rule flags today is caught already
        by = {f.key: _caught_by(f) for f in g.members}
        g.caught = sorted({rid for rids in by.values() for rid in rids})
        g.caught_candidates = sum(1 for rids in by.values() if rids)
        g.members = [f for f in g.members if not by[f.key]]
    proposed = []
    with tempfile.TemporaryDirectory(prefix="kir-learn-") as scratch:
        where = Path(scratch) if dry_run else out_dir
        for g in groups:
            if not g.members or g.programs < min_programs or g.tasks < min_tasks:
                continue
            p = propose(g, correct)
            if p.reasons and p.facts is not None:  # the shared facts hold in a correct program
                p = refine(g, correct, min_programs, min_tasks) or p
            proposed.append(p)
            if p.reasons:
                continue
            inside = where.resolve().is_relative_to(ROOT)
            rule_file(p, dbs, f"{where.resolve().relative_to(ROOT).as_posix()}/" if inside else "")
            written = [where / f"{p.name}.toml", *(where / n for n in p.failure_files)]
            for name, text in p.failure_files.items():
                (where / name).parent.mkdir(parents=True, exist_ok=True)
                (where / name).write_text(text, encoding="utf-8")
            (where / f"{p.name}.toml").write_text(p.text, encoding="utf-8")
            gate(p, where, correct)
            if p.reasons and not dry_run:
                for path in written:
                    path.unlink(missing_ok=True)
                for folder in (where / "failures" / p.name, where / "failures"):
                    if folder.is_dir() and not any(folder.iterdir()):
                        folder.rmdir()
    return groups, proposed
