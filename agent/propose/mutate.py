"""The mutation proposer: the edits that break kernels in practice, as a source of real failures.

A learned verifier rule must come from failures the verifier does not catch yet; without an LLM
writing buggy kernels, this proposer makes them. Each mutation is one typed edit of the IR at
one site, the kind of slip people make:

| kind | the edit |
| --- | --- |
| `shift-index` | one index of a global or shared access plus one |
| `mask-off-by-one` | a bound check `i < N` (N a shape symbol) made `i <= N` |
| `loop-bound` | a loop's upper bound plus one |
| `drop-sync` | an `mbarrier` wait or arrive, a CTA barrier, a fence, a wait for cp.async, TMA stores or wgmma removed |
| `flip-parity` | a `wait`'s parity negated |
| `arrive-count` | an mbarrier's arrival count plus one |
| `narrow` | an f32 reduction or product rounded through bf16, as if accumulated there |

The children are checked statically like the tactics' (`evaluate(until="cost")`): a mutant
the verifier stops is kept as stopped (the verifier caught it), the rest are all proposed for
measurement, where they fail at compile or run time, or pass (a harmless edit). The move names
the kind, the site (counted in the order of the text), and the mutated op: its name, which op of
that name it is (`nth`, in the order of the text) and its line in the child, which is where the
miner (agent.learn.mine) looks for what the failing programs have in common.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from agent.pipeline import Candidate, evaluate
from agent.propose.base import Context, Proposal, Proposer
from agent.search.tree import Move
from kir import symexpr as sx
from kir.diagnostics import KirError
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.errors import RuleViolation
from kir.dialect.types import GlobalType, SmemType, SymAttr, dtype_of
from kir.parser import parse
from kir.program import Program, set_span, span_of

NAME = "mutate"


@dataclass(frozen=True)
class Mutation:
    kind: str
    sites: Callable[[Program], list[tuple[Operation, int]]]  # (op, which of its parts), text order
    apply: Callable[[Operation, int], None]  # edits the op (of a clone) in place


def _ops(program: Program) -> list[Operation]:
    return list(program.kernel.walk())


def _insert_before(op: Operation, new: Operation) -> SSAValue:
    block = op.parent_block()
    assert block is not None
    set_span(new, span_of(op))
    block.insert_op_before(new, op)
    return new.results[0]


def _replace_operand(op: Operation, position: int, value: SSAValue) -> None:
    operands = list(op.operands)
    operands[position] = value
    op.operands = operands


def _one(value: SSAValue, at: Operation) -> SSAValue:
    return _insert_before(at, tl.ConstOp(1, dtype_of(value.type)))


# ---- the kinds ----------------------------------------------------------------------------------


def _access_sites(program: Program) -> list[tuple[Operation, int]]:
    out: list[tuple[Operation, int]] = []
    for op in _ops(program):
        if isinstance(op, tl.LoadOp | tl.StoreOp) and isinstance(op.mem.type, GlobalType | SmemType):
            out.extend((op, d) for d in range(len(op.indices)))
    return out


def _shift_index(op: Operation, d: int) -> None:
    assert isinstance(op, tl.LoadOp | tl.StoreOp)
    index = op.indices[d]
    position = next(k for k, v in enumerate(op.operands) if k >= 1 and v is index)
    shifted = _insert_before(op, tl.BinaryOp("add", index, _one(index, op)))
    _replace_operand(op, position, shifted)


def _bound_sites(program: Program) -> list[tuple[Operation, int]]:
    return [
        (op, 0)
        for op in _ops(program)
        if isinstance(op, tl.CompareOp)
        and op.predicate.data == "lt"
        and isinstance(op.rhs.owner, tl.SymValueOp)
        and op.rhs.owner.symbol.data in program.kernel.shape_symbols
    ]


def _mask_off_by_one(op: Operation, _: int) -> None:
    assert isinstance(op, tl.CompareOp)
    op.properties["predicate"] = StringAttr("le")


def _loop_sites(program: Program) -> list[tuple[Operation, int]]:
    return [(op, 0) for op in _ops(program) if isinstance(op, st.ForOp)]


def _loop_bound(op: Operation, _: int) -> None:
    assert isinstance(op, st.ForOp)
    upper = op.upper
    wider = _insert_before(op, tl.BinaryOp("add", upper, _one(upper, op)))
    _replace_operand(op, 1, wider)


SYNC = (
    ex.WaitOp,
    ex.ArriveOp,
    ex.CtaBarrierOp,
    ex.FenceAsyncOp,
    ex.CpAsyncWaitOp,
    ex.TmaStoreWaitOp,
    ex.WgmmaWaitOp,
)


def _sync_sites(program: Program) -> list[tuple[Operation, int]]:
    return [(op, 0) for op in _ops(program) if isinstance(op, SYNC) and not op.results]


def _drop_sync(op: Operation, _: int) -> None:
    block = op.parent_block()
    assert block is not None
    block.erase_op(op)


def _wait_sites(program: Program) -> list[tuple[Operation, int]]:
    return [(op, 0) for op in _ops(program) if isinstance(op, ex.WaitOp)]


def _flip_parity(op: Operation, _: int) -> None:
    assert isinstance(op, ex.WaitOp)
    parity = op.parity
    flipped = _insert_before(op, tl.BinaryOp("xor", parity, _one(parity, op)))
    _replace_operand(op, 2, flipped)


def _barrier_sites(program: Program) -> list[tuple[Operation, int]]:
    return [(op, 0) for op in _ops(program) if isinstance(op, ex.MBarrierAllocOp)]


def _arrive_count(op: Operation, _: int) -> None:
    assert isinstance(op, ex.MBarrierAllocOp)
    op.properties["count"] = SymAttr(sx.fold(sx.Bin("+", op.count.data, sx.Int(1))))


def _narrow_sites(program: Program) -> list[tuple[Operation, int]]:
    return [
        (op, 0)
        for op in _ops(program)
        if isinstance(op, tl.ReduceOp | tl.DotOp) and dtype_of(op.results[0].type) == "f32"
    ]


def _narrow(op: Operation, _: int) -> None:
    block = op.parent_block()
    assert block is not None
    result = op.results[0]
    low = tl.CastOp(result, "bf16")
    back = tl.CastOp(low.res, "f32")
    for new in (back, low):
        set_span(new, span_of(op))
        block.insert_op_after(new, op)
    result.replace_uses_with_if(back.res, lambda use: use.operation is not low)


MUTATIONS = (
    Mutation("shift-index", _access_sites, _shift_index),
    Mutation("mask-off-by-one", _bound_sites, _mask_off_by_one),
    Mutation("loop-bound", _loop_sites, _loop_bound),
    Mutation("drop-sync", _sync_sites, _drop_sync),
    Mutation("flip-parity", _wait_sites, _flip_parity),
    Mutation("arrive-count", _barrier_sites, _arrive_count),
    Mutation("narrow", _narrow_sites, _narrow),
)
KINDS = tuple(m.kind for m in MUTATIONS)


def mutants(program: Program, kinds: tuple[str, ...] = KINDS) -> Iterator[tuple[Move, Program]]:
    """Every mutation of `program` of the given kinds, one site each, in a fixed order. A
    mutant the IR's own checks refuse (a type that no longer fits) is skipped."""
    walk = _ops(program)
    for mutation in MUTATIONS:
        if mutation.kind not in kinds:
            continue
        for site, (op, part) in enumerate(mutation.sites(program)):
            clone = program.clone()
            target = list(clone.kernel.walk())[walk.index(op)]
            span = span_of(op)  # where the op was: the move's line for an op the edit removes
            try:
                mutation.apply(target, part)
                clone.kernel.verify()
                text = clone.text()
                child = parse(text, file=program.file)
            except (KirError, RuleViolation, VerifyException):  # an edit the IR refuses is no mutant
                continue
            # the mutated op in the child: the same one of its kind (the edits insert ops of other
            # kinds only); its line there, as the text may have moved it
            nth = [o for o in walk if o.name == op.name].index(op)
            same = [o for o in child.kernel.walk() if o.name == op.name]
            where = span_of(same[nth]) if nth < len(same) else span
            line = where.line if where is not None else 0
            params = (("line", line), ("nth", nth), ("op", op.name), ("site", site))
            yield Move(NAME, mutation.kind, params), child


class MutationProposer(Proposer):
    """Every mutation of the node's program: those the verifier stops as stopped children, the
    rest all proposed for measurement (the search's evaluation budget bounds them)."""

    name = NAME

    def __init__(self, kinds: tuple[str, ...] = KINDS):
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"no mutation {sorted(unknown)[0]!r}: one of {', '.join(KINDS)}")
        self.kinds = kinds

    def propose(self, context: Context) -> list[Proposal]:
        program = parse(context.node.text, file=f"<node {context.node.key[:12]}>")
        measured: list[Proposal] = []
        stopped: list[Proposal] = []
        seen = set(context.seen)
        for move, child in mutants(program, self.kinds):
            candidate = Candidate.from_program(child)
            key = candidate.key()
            if key in seen:
                continue
            seen.add(key)
            record = evaluate(candidate, until="cost", target=context.target, task=context.task, preset=context.preset)
            text = child.text()
            if not record.ok:
                stopped.append(Proposal(text, move, key, static=record))
            else:
                predicted = (record.estimate or {}).get("time_s")
                measured.append(Proposal(text, move, key, predicted=predicted))
        return measured + stopped
