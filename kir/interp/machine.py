"""One CTA (one program of the grid): its values, its shared state, and the scheduler of its
roles.

Every block runs as a Python generator, so an op that must block (an mbarrier `wait`, a CTA
`barrier()`) simply yields what it waits for and the scheduler resumes it when that holds.

Order of execution within a CTA:
1. the kernel's top-level code that is not a role, up to the last role, runs first as the whole
   CTA (allocations of shared buffers and mbarriers, index math);
2. the roles then run as cooperating coroutines. A role listing several units (`role mma
   warpgroups(1, 2)`) runs once per unit, each instance with its own `role_rank()` (0, 1, ...)
   and its own arrivals;
3. the top-level code after the last role runs once every role instance has ended.

The schedule of the roles. The values a correct program computes never depend on it, and races
are found from happens-before whatever it is (see `sync`); but which of several wrong outcomes a
broken program shows (a race, a deadlock) does, so it is chosen to look like hardware: every
instance has a virtual cycle counter, each op costs one cycle and an async wait
(`wgmma.wait`, `cp.async.wait`, `tma.store_wait`) moves the counter to the completion of what it
retires (issue + a fixed latency). The scheduler always runs one op of the instance with the
smallest counter (ties in program order). A blocked `wait` observes every phase completion: it
is released at the op that completes the phase it waits for, as a spinning thread would, even
if a later arrival flips the parity back before it runs again. So a producer runs ahead while
consumers wait for their wgmma, as on the GPU.

When no unfinished instance can go on, that is an `interp.deadlock`. `barrier()` releases when
every instance of the CTA waits at one; one that has ended can never reach it, so the others
deadlock. Loop hints (`pipeline(stages = S)`, `warp_specialize`) do not change the meaning.

A read of shared memory that nothing wrote is reported at the end of the CTA, or when another
error stops it first, unless that error is a race (which explains the read better).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.ir import Block, Operation, SSAValue

from kir.diagnostics import Diagnostic
from kir.dialect.structure import RoleOp, YieldOp
from kir.interp import sync as S
from kir.interp import trace as T
from kir.interp.errors import InterpError, OutOfBounds, Unsupported, fail, related

if TYPE_CHECKING:
    from kir.interp.launch import Launch

Handler = Callable[..., Any]
HANDLERS: dict[type, Handler] = {}
BLOCKING: set[type] = set()


def handles(*classes: type, blocking: bool = False) -> Callable[[Handler], Handler]:
    """Register the handler of an op class. A blocking handler is a generator (it may yield a
    blocker, or run nested blocks)."""

    def register(fn: Handler) -> Handler:
        for cls in classes:
            HANDLERS[cls] = fn
            if blocking:
                BLOCKING.add(cls)
        return fn

    return register


@dataclass
class MBarrierWait:
    op: Operation
    bars: S.MBarriers
    index: int
    parity: int
    clock: np.ndarray | None = None  # the barrier's clock when the wait was released

    def ready(self) -> bool:
        return self.bars.ready(self.index, self.parity)


@dataclass
class CtaBarrierWait:
    op: Operation


@dataclass(eq=False)
class Strand:
    """A sequential thread of control: the CTA outside roles, or one unit (instance) of a role,
    with its own values, virtual time, and outstanding async ops."""

    name: str  # role name, or "" for the CTA
    agent: S.Agent
    rank: int = 0
    units: int = 1
    t: int = 0  # virtual cycles
    gen: Generator[Any, None, list] | None = None
    blocker: MBarrierWait | CtaBarrierWait | None = None
    op: Operation | None = None
    done: bool = False
    loops: list[list] = field(default_factory=list)  # [loop variable name, value]
    wgmma: list[S.Agent] = field(default_factory=list)
    cp_open: list[S.Agent] = field(default_factory=list)
    cp_groups: list[list[S.Agent]] = field(default_factory=list)
    tma_stores: list[S.Agent] = field(default_factory=list)
    env: dict[SSAValue, Any] = field(default_factory=dict)  # values, private to the instance

    def who(self) -> str:
        if not self.name:
            return "the CTA (code outside roles)"
        return f"role `{self.name}`" + (f" (rank {self.rank})" if self.units > 1 else "")

    def key(self) -> str:
        return (self.name or "cta") + (f"#{self.rank}" if self.units > 1 else "")


class Cta:
    """One program of the grid: values, shared buffers, agents and clocks, fresh per program."""

    def __init__(self, launch: Launch, pid: tuple[int, int, int]):
        self.launch = launch
        self.pid = pid
        self.env: dict[SSAValue, Any] = dict(launch.arguments)  # the strand running now swaps its own in
        self.clocks = S.Clocks()
        self.buffers: list[S.SmemBuffer] = []
        self.interleave = False  # yield after every op (several instances run)
        self.uninitialized: Diagnostic | None = None
        self.trace = T.new_trace() if launch.trace else None  # the last synchronization events

    # ---- values ------------------------------------------------------------------------------

    def get(self, v: SSAValue) -> Any:
        return self.env[v]

    def set(self, v: SSAValue, value: Any) -> None:
        self.env[v] = value

    def context(self, strand: Strand) -> dict[str, Any]:
        """Where the program is, for counterexamples: program ids, role, loop variables."""
        out: dict[str, Any] = {"program_id": list(self.pid[: len(self.launch.grid)])}
        if strand.name:
            out["role"] = strand.name
            if strand.units > 1:
                out["rank"] = strand.rank
        for name, value in strand.loops:
            out[name] = int(value)
        return out

    def out_of_bounds(self, op: Operation, strand: Strand, what: str, name: str, err: OutOfBounds):
        fail(
            "interp.out-of-bounds",
            op,
            f"{what} `{name}` at index {list(err.index)}, outside its shape {list(err.shape)}",
            "mask the lanes that leave the memory (e.g. mask = offs < N), or check the grid and the where constraints",
            (),
            {**self.context(strand), "index": list(err.index), "shape": list(err.shape), "lane": list(err.lane)},
        )

    # ---- running blocks ----------------------------------------------------------------------

    def exec_ops(self, ops: Iterable[Operation], strand: Strand) -> Generator[Any, None, list]:
        launch = self.launch
        for op in ops:
            if type(op) is YieldOp:
                return [self.env[v] for v in op.values]
            strand.op = launch.op = op
            launch.steps += 1
            if launch.steps & 255 == 0:
                launch.check_time(op)
            fn = HANDLERS.get(type(op))
            if fn is None:
                if isinstance(op, RoleOp):
                    fail(
                        "interp.unsupported",
                        op,
                        "roles are allowed only at the top level of a kernel",
                        "move the role out of the loop or branch",
                    )
                fail("interp.unsupported", op, f"the interpreter has no meaning for `{op.name}`")
            try:
                if type(op) in BLOCKING:
                    yield from fn(self, op, strand)
                else:
                    fn(self, op, strand)
            except Unsupported as err:
                fail("interp.unsupported", op, str(err))
            except InterpError:
                if self.trace is not None and isinstance(op, T.TRACED):
                    T.record(self, op, strand, self.trace, "fails here")
                raise
            if self.trace is not None and isinstance(op, T.TRACED):
                T.record(self, op, strand, self.trace)
            strand.t += 1
            if self.interleave:
                yield None
        return []

    def report_uninitialized(self, diagnostic: Diagnostic) -> None:
        if self.uninitialized is None:
            self.uninitialized = diagnostic

    def block_ops(self, block: Block) -> list[Operation]:
        return self.launch.ops_of(block)

    def run(self) -> None:
        try:
            try:
                self._run()
            except InterpError as err:
                if err.diagnostic.rule != "interp.race" and self.uninitialized is not None:
                    raise InterpError(self.uninitialized) from None
                raise
            if self.uninitialized is not None:
                raise InterpError(self.uninitialized)
        except InterpError as err:
            cex = err.diagnostic.counterexample
            if self.trace is None or cex is None:
                raise
            raise InterpError(replace(err.diagnostic, counterexample={**cex, "trace": list(self.trace)})) from None

    def _run(self) -> None:
        ops = self.block_ops(self.launch.kernel.body.block)
        role_at = [i for i, op in enumerate(ops) if isinstance(op, RoleOp)]
        main = Strand("", self.clocks.new_agent("cta", "the CTA (code outside roles)"), env=self.env)
        if not role_at:
            self.schedule([(main, ops)])
            return
        last = role_at[-1]
        self.schedule([(main, [op for op in ops[:last] if not isinstance(op, RoleOp)])])
        work = []
        for role in (op for op in ops if isinstance(op, RoleOp)):
            units = len(role.id_list)
            for rank in range(units):
                s = Strand(role.name_text, main.agent, rank, units, main.t, env=dict(main.env))
                s.agent = self.clocks.new_agent("role", s.who(), parent=main.agent)
                work.append((s, self.block_ops(role.body.block)))
        self.schedule(work)
        for s, _ in work:
            self.clocks.acquire(main.agent, s.agent.vc)
            main.t = max(main.t, s.t)
        self.clocks.tick(main.agent)
        self.env = main.env
        self.schedule([(main, ops[last + 1 :])])

    # ---- the scheduler -----------------------------------------------------------------------

    def schedule(self, work: list[tuple[Strand, list[Operation]]]) -> None:
        strands = [s for s, _ in work]
        for s, ops in work:
            s.gen = self.exec_ops(ops, s)
            s.blocker = None
            s.done = False
        self.interleave = len(strands) > 1
        live = list(strands)
        while live:
            runnable = [s for s in live if s.blocker is None]
            if not runnable:
                if len(live) == len(strands) and all(isinstance(s.blocker, CtaBarrierWait) for s in live):
                    self.release_barrier(live)
                    continue
                self.deadlock(live, strands)
            s = min(runnable, key=lambda x: x.t) if len(runnable) > 1 else runnable[0]
            self.env = s.env
            assert s.gen is not None  # every strand scheduled here was given its ops above
            try:
                s.blocker = s.gen.send(None)
            except StopIteration:
                s.done = True
                s.blocker = None
                live.remove(s)
            self.release_waits(live, s.t)

    def release_waits(self, live: list[Strand], now: int) -> None:
        """Every blocked wait whose phase has completed is released now, with the barrier's
        clock as it is now (what a spinning waiter would see)."""
        for o in live:
            b = o.blocker
            if isinstance(b, MBarrierWait) and b.ready():
                b.clock = b.bars.clock[b.index].copy()
                o.blocker = None
                o.t = max(o.t, now)

    def release_barrier(self, strands: list[Strand]) -> None:
        clock = strands[0].agent.vc
        for s in strands[1:]:
            clock = S.join(clock, s.agent.vc)
        now = max(s.t for s in strands)
        for s in strands:
            s.agent.vc = clock.copy()
            self.clocks.tick(s.agent)
            s.blocker = None
            s.t = now

    def deadlock(self, live: list[Strand], strands: list[Strand]) -> None:
        parts: list[str] = []
        hints: list[str] = []
        blocked: dict[str, Any] = {}
        finished = [s.who() for s in strands if s.done]
        for s in live:
            b = s.blocker
            if self.trace is not None and b is not None:
                self.env = s.env
                T.record(self, b.op, s, self.trace, "blocks")
            if isinstance(b, MBarrierWait):
                parts.append(
                    f"{s.who()} waits on `{b.bars.name}[{b.index}]` for parity {b.parity} ({b.bars.state(b.index)})"
                )
                hints.append(b.bars.stuck_hint(b.index, b.parity))
                blocked[s.key()] = {
                    "barrier": f"{b.bars.name}[{b.index}]",
                    "parity": b.parity,
                    "phase": b.bars.phase[b.index],
                    "pending": b.bars.pending[b.index],
                    "tx": b.bars.tx[b.index],
                    **{name: int(v) for name, v in s.loops},
                }
            else:
                parts.append(f"{s.who()} waits at barrier()")
                blocked[s.key()] = {"barrier": "barrier()", **{name: int(v) for name, v in s.loops}}
        if finished and any(isinstance(s.blocker, CtaBarrierWait) for s in live):
            hints.append(f"{', '.join(finished)} ended without reaching barrier(): a CTA barrier needs every role")
        rel: tuple = ()
        for s in live[1:]:
            rel += related(s.blocker.op if s.blocker else None, f"{s.who()} is blocked here")
        unique_hints = [h for i, h in enumerate(hints) if h and h not in hints[:i]]
        fail(
            "interp.deadlock",
            live[0].blocker.op if live[0].blocker else None,
            "deadlock: every unfinished role is blocked; " + "; ".join(parts),
            "; ".join(unique_hints),
            rel,
            {"program_id": list(self.pid[: len(self.launch.grid)]), "blocked": blocked},
        )


def as_int(v: Any) -> int:
    return int(np.asarray(v))
