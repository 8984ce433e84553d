"""What an op does besides computing its results, declared once on the op class as xdsl traits.

Every op of the dialect declares its memory behaviour with exactly the traits that are true of
it, and the rest of the toolchain (verifier, cost model, passes, emitters) asks the questions
below instead of keeping its own lists of op classes:

- `is_pure(op)`: no effect at all. The op may be moved, recomputed, folded into its user, and
  dropped when nothing uses its results (xdsl's `Pure`).
- `reads(op)`, `writes(op)`: the memory spaces the op reads and writes, of `SPACES`: `global`
  (kernel arguments), `shared` (on-chip buffers) and `barrier` (mbarrier phases and counts).
  Declared with `Reads` and `Writes`, which name the operand that holds the memory, so that an
  access of a global tensor and one of a shared buffer by the same op class (`load`, `store`)
  answer with the space of the memory actually named.
- `allocates(op)`: the space an allocation makes (`smem`, `mbarrier`).
- `is_async(op)`: the op's effects complete later, at the op that `completed_by(op)` names
  (`cp.async`, `tma.load`, `tma.store`, `wgmma`).
- `synchronizes(op)`: the op orders other ops' effects (barriers, fences, waits, arrivals, group
  commits); nothing moves across it.
- `has_effect(op)`: the op must stay even when nothing uses its results (it writes memory, is
  asynchronous or synchronizes).
- `is_elementwise(op)`: each result lane is a function of the same lane of the operands
  (after broadcasting).
- `is_explicit(op)`: the op belongs to the hardware-explicit level of KIR (shared buffers,
  mbarriers, async copies, warp roles, wgmma, register layouts); a program using one is an
  explicit-level program.

Ops with regions (`kernel`, `for`, `if`, `role`) declare xdsl's `RecursiveMemoryEffect`: they
have the effects of the ops they hold, and `reads`, `writes` and `has_effect` look inside them.
They are never pure themselves. `yield` declares `NoMemoryEffect` but is not pure: it is a
terminator and is neither moved nor dropped.

The decisions that are not obvious are written on the traits below.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.traits import (
    EffectInstance,
    MemoryEffect,
    MemoryEffectKind,
    OpTrait,
    Pure,
    RecursiveMemoryEffect,
    Resource,
)

from kir.dialect.types import GlobalType, MBarrierType, SmemType

GLOBAL = "global"
SHARED = "shared"
BARRIER = "barrier"
SPACES = (GLOBAL, SHARED, BARRIER)

__all__ = [
    "BARRIER",
    "GLOBAL",
    "SHARED",
    "SPACES",
    "Allocates",
    "Async",
    "Elementwise",
    "Explicit",
    "Memory",
    "Pure",
    "Reads",
    "Synchronizes",
    "Writes",
    "allocates",
    "completed_by",
    "has_effect",
    "is_async",
    "is_elementwise",
    "is_explicit",
    "is_pure",
    "reads",
    "space_of",
    "synchronizes",
    "writes",
]


def space_of(t: Attribute) -> str | None:
    """The memory space a value of type `t` names (None: not memory, e.g. a register tile)."""
    if isinstance(t, GlobalType):
        return GLOBAL
    if isinstance(t, SmemType):
        return SHARED
    if isinstance(t, MBarrierType):
        return BARRIER
    return None


@dataclass(frozen=True)
class Memory(Resource):
    """One of KIR's memory spaces, as the resource of an xdsl effect."""

    space: str

    def name(self) -> str:
        return self.space


@dataclass(frozen=True, init=False)
class _Access(MemoryEffect):
    """An access of memory in `spaces`, through the operand named `via`: the op touches the
    space of the memory that operand names, which must be one of `spaces` (an operand that
    names no memory, such as wgmma's A operand held in registers, touches none)."""

    KIND = MemoryEffectKind.READ
    spaces: frozenset[str] = field(default=frozenset())
    via: str = ""

    def __init__(self, *spaces: str, via: str):
        unknown = set(spaces) - set(SPACES)
        if unknown or not spaces:
            raise ValueError(f"memory spaces are {', '.join(SPACES)}, not {sorted(unknown) or 'none'}")
        object.__setattr__(self, "spaces", frozenset(spaces))
        object.__setattr__(self, "via", via)

    def operand(self, op: Operation) -> SSAValue:
        return getattr(op, self.via)

    def touched(self, op: Operation) -> str | None:
        """The space this op touches through the operand (None when it names no memory)."""
        space = space_of(self.operand(op).type)
        return space if space in self.spaces else None

    def get_effects(self, op: Operation) -> frozenset[EffectInstance]:  # type: ignore[override]
        space = self.touched(op)
        if space is None:
            return frozenset()
        return frozenset({EffectInstance(self.KIND, self.operand(op), Memory(space))})


class Reads(_Access):
    """The op reads memory through an operand: `Reads(GLOBAL, SHARED, via="mem")` for a `load`,
    which reads a global tensor or a shared buffer. A read is not pure: the value depends on
    the writes before it, so a read is not moved across a write of its space (nor dropped by a
    rule that only looks for effects: a dead load is the verifier's to report)."""

    KIND = MemoryEffectKind.READ


class Writes(_Access):
    """The op writes memory through an operand: `Writes(GLOBAL, SHARED, via="mem")` for a
    `store`. An atomic reads and writes (`Reads` and `Writes` of global); an arrive reads and
    writes its barrier's counts; a `tma.load` writes the shared destination and completes
    transaction bytes on its barrier (two `Writes`)."""

    KIND = MemoryEffectKind.WRITE


@dataclass(frozen=True)
class Allocates(MemoryEffect):
    """The op allocates memory of one space for the whole CTA and gives it as its result:
    `smem` (shared) and `mbarrier` (barrier, initialized with its count as part of the
    allocation). Not pure: an allocation is a declaration, never moved, folded or duplicated."""

    space: str

    def get_effects(self, op: Operation) -> frozenset[EffectInstance]:  # type: ignore[override]
        return frozenset({EffectInstance(MemoryEffectKind.ALLOC, op.results[0], Memory(self.space))})


@dataclass(frozen=True)
class Async(OpTrait):
    """The op's effects complete after it returns, at the op named `completed_by`: `tma.load`
    at a `wait` on the mbarrier it signals, `tma.store` at `tma.store_wait`, `cp.async` at
    `cp.async.wait` (after `cp.async.commit`), `wgmma` at `wgmma.wait` (its shared operands stay
    in use and its result is not ready until then)."""

    completed_by: str


class Synchronizes(MemoryEffect):
    """The op orders other ops' effects: a CTA barrier, a fence, an mbarrier arrive, expect or
    wait, a commit of cp.async groups, a wait for cp.async, TMA stores or wgmma. Nothing moves
    across it and it is never dropped. As an xdsl memory effect it answers "unknown" (None),
    so that xdsl's generic queries treat it as conservatively as this module does."""

    def get_effects(self, op: Operation) -> None:  # type: ignore[override]
        return None


class Elementwise(OpTrait):
    """Each result lane is a function of the same lane of the operands after broadcasting:
    binary and unary math, comparisons, `where`, `cast` and `rand`. (Shape ops such as `broadcast` and
    `expand_dims` move lanes, so they are not elementwise.)"""


class Explicit(OpTrait):
    """The op belongs to the hardware-explicit level: shared buffers, mbarriers and their
    arrivals and waits, async copies, fences, CTA barriers, wgmma, `sizeof`, register layouts,
    warp roles and `role_rank`. A program with any such op is an explicit-level program, which
    only the backends of that level accept."""


# ---- queries ------------------------------------------------------------------------------------


def _recursive(op: Operation) -> bool:
    return op.has_trait(RecursiveMemoryEffect)


def _nested(op: Operation) -> Iterator[Operation]:
    for region in op.regions:
        for block in region.blocks:
            yield from block.ops


def _spaces(op: Operation, trait: type[_Access]) -> frozenset[str]:
    if _recursive(op):
        return frozenset().union(*(_spaces(o, trait) for o in _nested(op)))
    return frozenset(s for t in op.get_traits_of_type(trait) if (s := t.touched(op)) is not None)


def is_pure(op: Operation) -> bool:
    """The op has no effect: it may be moved, recomputed, folded into its user, and dropped
    when its results are unused."""
    return op.has_trait(Pure)


def reads(op: Operation) -> frozenset[str]:
    """The memory spaces the op reads (for an op with regions: the ops it holds read)."""
    return _spaces(op, Reads)


def writes(op: Operation) -> frozenset[str]:
    """The memory spaces the op writes (for an op with regions: the ops it holds write)."""
    return _spaces(op, Writes)


def allocates(op: Operation) -> str | None:
    """The memory space the op allocates, if it is an allocation."""
    trait = op.get_trait(Allocates)
    return trait.space if trait is not None else None


def is_async(op: Operation) -> bool:
    """The op's effects complete later, at the op `completed_by(op)` names."""
    return op.has_trait(Async)


def completed_by(op: Operation) -> str | None:
    """The name of the op that completes an asynchronous op (`kir.wait`, ...), else None."""
    trait = op.get_trait(Async)
    return trait.completed_by if trait is not None else None


def synchronizes(op: Operation) -> bool:
    """The op orders other ops' effects (a barrier, fence, arrive, wait or commit)."""
    return op.has_trait(Synchronizes)


def has_effect(op: Operation) -> bool:
    """The op must stay even when nothing uses its results: it writes memory, is asynchronous or
    synchronizes (for an op with regions: one of the ops it holds does). Reads and allocations
    alone are not effects of this kind."""
    if _recursive(op):
        return any(has_effect(o) for o in _nested(op))
    return bool(writes(op)) or is_async(op) or synchronizes(op)


def is_elementwise(op: Operation) -> bool:
    """Each result lane is a function of the same lane of the (broadcast) operands."""
    return op.has_trait(Elementwise)


def is_explicit(op: Operation) -> bool:
    """The op belongs to the hardware-explicit level of KIR."""
    return op.has_trait(Explicit)
