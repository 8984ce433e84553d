"""Happens-before for one CTA: agents with vector clocks, mbarriers, and the shadow state of
every shared buffer that turns an unordered pair of accesses into an `interp.race`.

Why vector clocks: a race must be found whatever order the scheduler happened to run the roles
in. An access is ordered after an earlier one exactly when the later agent's clock has caught
up with the earlier agent's clock value at that access, and clocks only travel along real
synchronization (mbarrier phases, `barrier()`, async waits), so a missing wait is seen even in
a run where the data happened to arrive in time.

Agents: the CTA outside roles, each role instance (one per unit), and one agent per async op
instance (tma.load, tma.store, cp.async, wgmma). An async agent starts from its issuer's clock; its
accesses happen at issue (copies complete immediately in this interpreter) but count as its
own, so they are ordered after another agent's accesses only through the edge that retires it:
the mbarrier phase a tma.load completes, `wgmma.wait`, `cp.async.wait`, `tma.store_wait`.

Shadow state per shared buffer element (numpy arrays, updated once per access): the last
writer's agent id and clock, each reader agent's last read clock (FastTrack-style: a write that
passes the checks clears the reads it is ordered after, and a reader's array is dropped once
empty), and which role still owes a `fence.async()` for a generic-proxy write.

A race is reported at the second access of the pair, with the first as the related span; when
the first is a read that found no data at all (it ran before the write it should have waited
for), it is reported at that read instead, since the reader is the one missing a wait.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.ir import Operation

from kir.diagnostics import Diagnostic
from kir.dtypes import DType
from kir.interp.errors import fail, related, span_of


def join(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if len(a) < len(b):
        a, b = b, a
    out = a.copy()
    out[: len(b)] = np.maximum(out[: len(b)], b)
    return out


def known(vc: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """`vc[ids]`, with 0 for agents the clock has never heard of."""
    if len(vc) == 0:
        return np.zeros(np.shape(ids), dtype=np.int64)
    return np.where(ids < len(vc), vc[np.clip(ids, 0, len(vc) - 1)], 0)


@dataclass(eq=False)
class Agent:
    id: int
    kind: str  # "cta", "role", "tma.load", "tma.store", "cp.async", "wgmma"
    owner: str  # who runs or issued it: "role `mma` (rank 1)", "the CTA (code outside roles)"
    op: Operation | None  # the issuing op of an async agent
    vc: np.ndarray
    retired: bool = False
    done_at: int = 0  # virtual time at which an async op completes

    @property
    def is_async(self) -> bool:
        return self.kind not in ("cta", "role")

    def describe(self) -> str:
        return f"the {self.kind} issued by {self.owner}" if self.is_async else self.owner

    def clock_at(self, other: int) -> int:
        return int(self.vc[other]) if other < len(self.vc) else 0


class Clocks:
    """The agents of one CTA and which op made each (agent, clock) access."""

    def __init__(self) -> None:
        self.agents: list[Agent] = []
        self.op_at: dict[tuple[int, int], Operation] = {}

    def new_agent(self, kind: str, owner: str, op: Operation | None = None, parent: Agent | None = None) -> Agent:
        aid = len(self.agents)
        vc = np.zeros(aid + 1, dtype=np.int64)
        if parent is not None:
            vc[: len(parent.vc)] = parent.vc
        vc[aid] = 1
        agent = Agent(aid, kind, owner, op, vc)
        self.agents.append(agent)
        return agent

    def tick(self, agent: Agent) -> int:
        agent.vc[agent.id] += 1
        return int(agent.vc[agent.id])

    def note(self, agent: Agent, op: Operation) -> int:
        """A fresh clock value for an access by `agent` through `op`."""
        c = self.tick(agent)
        self.op_at[(agent.id, c)] = op
        return c

    def acquire(self, agent: Agent, clock: np.ndarray) -> None:
        agent.vc = join(agent.vc, clock)

    def retire(self, issuer: Agent, done: list[Agent]) -> None:
        """An async wait: the retired agents' accesses now happen before the issuer's next."""
        for a in done:
            issuer.vc = join(issuer.vc, a.vc)
            a.retired = True
        self.tick(issuer)


# ---- mbarriers -----------------------------------------------------------------------------


class MBarriers:
    """An `mbarrier(S, count = c)` array with PTX phase semantics (see kir.dialect.explicit):
    phase number n, pending arrivals, transaction bytes. A phase completes when pending
    arrivals and tx bytes are both zero; `wait(parity = p)` passes iff n % 2 != p. Arrivals
    beyond the count carry into the next phase. Each barrier's clock is the join of every
    completed phase's arrivals; the current phase's arrivals are kept apart until it completes.
    """

    def __init__(self, name: str, size: int, count: int):
        self.name = name
        self.size = size
        self.count = count
        self.phase = [0] * size
        self.pending = [count] * size
        self.tx = [0] * size
        self.clock = [np.zeros(0, dtype=np.int64) for _ in range(size)]
        self.pending_clock = [np.zeros(0, dtype=np.int64) for _ in range(size)]

    def ready(self, i: int, parity: int) -> bool:
        return self.phase[i] % 2 != parity

    def arrive(self, i: int, k: int, vc: np.ndarray) -> None:
        self.pending[i] -= k
        self.pending_clock[i] = join(self.pending_clock[i], vc)
        self._settle(i)

    def expect(self, i: int, nbytes: int, vc: np.ndarray) -> None:
        # mbarrier.arrive.expect_tx: the expected bytes are added before the arrival.
        self.tx[i] += nbytes
        self.arrive(i, 1, vc)

    def complete_tx(self, i: int, nbytes: int, vc: np.ndarray) -> None:
        self.tx[i] -= nbytes
        self.pending_clock[i] = join(self.pending_clock[i], vc)
        self._settle(i)

    def _settle(self, i: int) -> None:
        while self.pending[i] <= 0 and self.tx[i] == 0:
            self.phase[i] += 1
            self.clock[i] = join(self.clock[i], self.pending_clock[i])
            if self.pending[i] == 0:
                self.pending_clock[i] = np.zeros(0, dtype=np.int64)
            self.pending[i] += self.count

    def state(self, i: int) -> str:
        n = self.phase[i]
        last = f"phase {n - 1} (parity {(n - 1) % 2})" if n else "none yet (a wait for parity 1 passes)"
        return (
            f"`{self.name}[{i}]` is in phase {n}: {self.pending[i]} of {self.count} arrivals pending, "
            f"{self.tx[i]} transaction bytes outstanding; last completed: {last}"
        )

    def stuck_hint(self, i: int, parity: int) -> str:
        hints = [f"`{self.name}[{i}]`:"]
        if self.tx[i] > 0:
            hints.append(
                f"{self.tx[i]} expected bytes never arrived: compare expect(bytes = ...) with the bytes "
                "of the copies that signal this barrier"
            )
        if self.tx[i] < 0:
            hints.append(f"the copies delivered {-self.tx[i]} bytes more than expect(...) announced")
        if 0 < self.pending[i] < self.count:
            hints.append(
                f"only {self.count - self.pending[i]} of {self.count} arrivals came in this phase: "
                f"check the arrive/expect counts against the init count {self.count}"
            )
        if self.pending[i] == self.count and self.tx[i] == 0:
            hints.append(
                "nothing arrived in this phase: is an arrive or expect missing, or is the parity off by one? "
                f"waiting for parity {parity} needs phase {self.phase[i]} to complete; at the start, a wait for "
                "parity 1 passes and a wait for parity 0 needs one completed phase"
            )
        return " ".join(hints) if len(hints) > 1 else ""


# ---- shared buffers ------------------------------------------------------------------------


@dataclass
class Reads:
    clocks: np.ndarray
    live: int = 0


@dataclass(eq=False)
class SmemBuffer:
    """A shared buffer of one CTA: its data (poison until written) and its shadow state."""

    name: str
    dtype: DType
    data: np.ndarray
    w_agent: np.ndarray = field(init=False)
    w_clock: np.ndarray = field(init=False)
    fence_owner: np.ndarray = field(init=False)
    readers: dict[int, Reads] = field(default_factory=dict)
    blind_reads: set[tuple[int, int]] = field(default_factory=set)  # (agent, clock) of reads that found no data

    def __post_init__(self) -> None:
        n = self.data.size
        self.w_agent = np.full(n, -1, dtype=np.int64)
        self.w_clock = np.zeros(n, dtype=np.int64)
        self.fence_owner = np.full(n, -1, dtype=np.int64)

    def where(self, flat: int) -> str:
        elem = [int(v) for v in np.unravel_index(flat, self.data.shape)]
        stage = f"stage {elem[0]}, " if self.data.ndim >= 3 else ""
        return f"`{self.name}` ({stage}element {elem})"


Context = Callable[[], dict[str, Any]]
Report = Callable[[Diagnostic], None]


def _race_hint(first: Agent, first_read: bool, second: Agent, second_read: bool) -> str:
    if first.kind == "tma.load":
        if second_read:
            return (
                "wait on the mbarrier that the tma.load signals before reading the buffer (wait(bar[s], parity = ...)), "
                "and make expect(bytes = ...) cover every copy that signals it"
            )
        if second.kind == "tma.load":
            return (
                "the stage is refilled before its consumer released it: wait on the mbarrier the consumer "
                "arrives on (e.g. wait(empty[s], ...)) before the next tma.load into it"
            )
        return "wait on the mbarrier that the tma.load signals before overwriting the buffer"
    if first.kind == "wgmma":
        if not first.retired:
            return (
                "wgmma.wait before arrive: retire the wgmma with wgmma.wait(...) before arriving on the mbarrier that "
                "frees the buffer, or the next copy overwrites operands the wgmma still reads"
            )
        return "wait on the mbarrier the consumer arrives on after its wgmma.wait before overwriting the buffer"
    if first.kind == "tma.store":
        return "tma.store_wait(0) before overwriting a buffer that a tma.store reads"
    if first.kind == "cp.async":
        return "cp.async.commit() then cp.async.wait(n) before using the copied data (and barrier() if another role uses it)"
    return (
        f"order the two accesses: after its access {first.owner} should arrive on an mbarrier that {second.owner} "
        "waits on before its own (or both reach a barrier())"
    )


def _race(
    buf: SmemBuffer,
    flat: int,
    op: Operation,
    first: Agent,
    first_read: bool,
    first_op: Operation | None,
    second: Agent,
    second_read: bool,
    ctx: Context,
):
    verb2 = "reads" if second_read else "writes"
    verb1 = "read" if first_read else "wrote"
    fail(
        "interp.race",
        op,
        f"race on shared buffer {buf.where(flat)}: {second.describe()} {verb2} it while {first.describe()} {verb1} it, "
        "and no mbarrier wait, barrier() or async wait orders the two",
        _race_hint(first, first_read, second, second_read),
        related(first_op, "the other access"),
        {
            **ctx(),
            "buffer": buf.name,
            "element": [int(v) for v in np.unravel_index(flat, buf.data.shape)],
            "first": first.describe(),
            "second": second.describe(),
        },
    )


def _read_before_write(
    buf: SmemBuffer,
    flat: int,
    read_op: Operation | None,
    reader: Agent,
    write_op: Operation,
    writer: Agent,
    ctx: Context,
):
    """A read that found no data, then an unordered write of the same element: the reader is
    missing its wait, so the race is reported at the read."""
    if writer.kind == "tma.load":
        hint = "wait on the mbarrier that the tma.load signals before reading the buffer: wait(bar[s], parity = ...)"
    else:
        hint = f"wait on an mbarrier that {writer.owner} arrives on after writing, before reading"
    fail(
        "interp.race",
        read_op,
        f"race on shared buffer {buf.where(flat)}: {reader.describe()} reads it before {writer.describe()} writes it, "
        "and nothing orders the two (the read found no data)",
        hint,
        related(write_op, "the write it should have waited for"),
        {
            **ctx(),
            "buffer": buf.name,
            "element": [int(v) for v in np.unravel_index(flat, buf.data.shape)],
            "reader": reader.describe(),
            "writer": writer.describe(),
        },
    )


def read_check(
    clocks: Clocks,
    buf: SmemBuffer,
    flat: np.ndarray,
    agent: Agent,
    op: Operation,
    ctx: Context,
    uninitialized: Report,
    async_proxy: bool = False,
) -> None:
    """Check and record a read of the elements `flat` (linear, in lane order). A read of
    never-written elements goes to `uninitialized` (the machine decides when to report it:
    a race found later on the same elements explains it better)."""
    if flat.size == 0:
        return
    c = clocks.note(agent, op)
    w = buf.w_agent[flat]
    unwritten = w < 0
    if unwritten.any():
        j = int(np.argmax(unwritten))
        buf.blind_reads.add((agent.id, c))
        uninitialized(
            Diagnostic(
                "interp.uninitialized-read",
                "error",
                span_of(op),
                f"{agent.describe()} reads shared buffer {buf.where(int(flat[j]))} before anything wrote it",
                "wait on the mbarrier that the copy filling the buffer signals, or write the buffer first",
                (),
                {
                    **ctx(),
                    "buffer": buf.name,
                    "element": [int(v) for v in np.unravel_index(int(flat[j]), buf.data.shape)],
                },
            )
        )
    wc = buf.w_clock[flat]
    bad = (w >= 0) & (w != agent.id) & (known(agent.vc, w) < wc)
    if bad.any():
        j = int(np.argmax(bad))
        first = clocks.agents[int(w[j])]
        _race(buf, int(flat[j]), op, first, False, clocks.op_at.get((first.id, int(wc[j]))), agent, True, ctx)
    if async_proxy:
        owner = buf.fence_owner[flat]
        unfenced = owner >= 0
        if unfenced.any():
            j = int(np.argmax(unfenced))
            writer = clocks.agents[int(owner[j])]
            fail(
                "interp.missing-fence",
                op,
                f"{agent.describe()} reads shared buffer {buf.where(int(flat[j]))} through the async proxy, but "
                f"{writer.describe()} wrote it through the generic proxy and has not run fence.async() since",
                f"add fence.async() in {writer.describe()} after its stores and before the {agent.kind} "
                "(and before any arrive that hands the buffer to another role)",
                related(clocks.op_at.get((int(w[j]), int(wc[j]))), "the write"),
                {
                    **ctx(),
                    "buffer": buf.name,
                    "element": [int(v) for v in np.unravel_index(int(flat[j]), buf.data.shape)],
                },
            )
    reads = buf.readers.get(agent.id)
    if reads is None:
        reads = buf.readers[agent.id] = Reads(np.zeros(buf.data.size, dtype=np.int64))
    reads.live += int(np.count_nonzero(reads.clocks[flat] == 0))
    reads.clocks[flat] = c


def write_check(
    clocks: Clocks, buf: SmemBuffer, flat: np.ndarray, agent: Agent, op: Operation, ctx: Context, fence_owner: int
) -> None:
    """Check and record a write of the elements `flat`. `fence_owner` is the role agent that
    must run fence.async() before an async-proxy read of them (-1 for async-proxy writes)."""
    if flat.size == 0:
        return
    c = clocks.note(agent, op)
    w = buf.w_agent[flat]
    wc = buf.w_clock[flat]
    bad = (w >= 0) & (w != agent.id) & (known(agent.vc, w) < wc)
    if bad.any():
        j = int(np.argmax(bad))
        first = clocks.agents[int(w[j])]
        _race(buf, int(flat[j]), op, first, False, clocks.op_at.get((first.id, int(wc[j]))), agent, False, ctx)
    for rid, reads in buf.readers.items():
        if rid == agent.id:
            continue
        rc = reads.clocks[flat]
        bad = rc > agent.clock_at(rid)
        if bad.any():
            j = int(np.argmax(bad))
            first = clocks.agents[rid]
            read_op = clocks.op_at.get((rid, int(rc[j])))
            if (rid, int(rc[j])) in buf.blind_reads:
                _read_before_write(buf, int(flat[j]), read_op, first, op, agent, ctx)
            _race(buf, int(flat[j]), op, first, True, read_op, agent, False, ctx)
    buf.w_agent[flat] = agent.id
    buf.w_clock[flat] = c
    buf.fence_owner[flat] = fence_owner
    # Every read of these elements happens before this write (checked above), so later
    # accesses need only be checked against the write.
    for rid in list(buf.readers):
        reads = buf.readers[rid]
        cleared = int(np.count_nonzero(reads.clocks[flat]))
        if cleared:
            reads.clocks[flat] = 0
            reads.live -= cleared
            if reads.live <= 0:
                del buf.readers[rid]


def fence_async(buffers: list[SmemBuffer], agent: Agent) -> None:
    """fence.async(): the agent's generic-proxy writes become visible to the async proxy."""
    for buf in buffers:
        mine = buf.fence_owner == agent.id
        if mine.any():
            buf.fence_owner[mine] = -1
