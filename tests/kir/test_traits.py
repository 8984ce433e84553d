"""Every op of the dialect declares its facts as traits (none forgotten), and the facts hold."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.traits import MemoryEffect, RecursiveMemoryEffect, get_effects

from kir.dialect import OPS
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.traits import (
    BARRIER,
    GLOBAL,
    SHARED,
    Async,
    Elementwise,
    Explicit,
    Pure,
    Reads,
    Synchronizes,
    Writes,
    allocates,
    completed_by,
    has_effect,
    is_async,
    is_elementwise,
    is_explicit,
    is_pure,
    reads,
    synchronizes,
    writes,
)
from kir.dialect.types import SmemType
from kir.parser import parse, parse_file
from verifier.rules import dataflow_facts

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted([*ROOT.glob("benchmarks/tasks/*/*.kir"), *ROOT.glob("examples/*.kir")])
NAMES = {op.name for op in OPS}


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_every_op_declares_its_memory_behaviour(op):
    assert op.get_traits_of_type(MemoryEffect), f"{op.name} declares no memory effect (Pure, Reads, ...)"


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_pure_ops_declare_no_other_effect(op):
    if op.has_trait(Pure):
        assert [type(t) for t in op.get_traits_of_type(MemoryEffect)] == [Pure], op.name


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_the_explicit_level_is_the_explicit_module_and_warp_roles(op):
    expected = op.__module__ == ex.__name__ or op in (st.RoleOp, st.RoleRankOp)
    assert op.has_trait(Explicit) == expected, op.name


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_ops_with_regions_have_the_effects_of_their_bodies(op):
    assert op.has_trait(RecursiveMemoryEffect) == (op in (st.KernelOp, st.ForOp, st.IfOp, st.RoleOp)), op.name


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_memory_traits_name_an_operand_of_the_op(op):
    operands = {name for name, _ in op.get_irdl_definition().operands}
    for trait in [*op.get_traits_of_type(Reads), *op.get_traits_of_type(Writes)]:
        assert trait.via in operands, f"{op.name}: no operand '{trait.via}'"


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_an_async_op_is_completed_by_a_synchronizing_op_of_the_dialect(op):
    name = op.get_trait(Async).completed_by if op.has_trait(Async) else None
    if name is not None:
        assert name in NAMES
        assert next(o for o in OPS if o.name == name).has_trait(Synchronizes)


def test_the_facts_of_a_few_op_classes():
    assert all(c.has_trait(Pure) for c in (tl.ProgramIdOp, tl.ReduceOp, tl.DotOp, tl.ConstOp, ex.SizeofOp))
    assert not any(c.has_trait(Pure) for c in (tl.LoadOp, st.YieldOp, st.ForOp, ex.SmemAllocOp, ex.WgmmaOp))
    assert {o for o in OPS if o.has_trait(Async)} == {ex.TmaLoadOp, ex.TmaStoreOp, ex.CpAsyncOp, ex.WgmmaOp}
    elementwise = {o for o in OPS if o.has_trait(Elementwise)}
    assert elementwise == {tl.BinaryOp, tl.CompareOp, tl.UnaryOp, tl.WhereOp, tl.CastOp, tl.RandOp}


SCALE = """
kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  v = load(x[offs], mask = offs < N)
  for i in 0 .. 2 {
    store(y[offs], v * 2.0, mask = offs < N)
  }
}
"""


def _ops(program, cls):
    return [op for op in program.kernel.walk() if isinstance(op, cls)]


def test_the_facts_of_ops_in_a_tile_program():
    program = parse(SCALE)
    (load,) = _ops(program, tl.LoadOp)
    (store,) = _ops(program, tl.StoreOp)
    (loop,) = _ops(program, st.ForOp)
    (pid,) = _ops(program, tl.ProgramIdOp)
    assert reads(load) == {GLOBAL} and not writes(load) and not is_pure(load) and not has_effect(load)
    assert writes(store) == {GLOBAL} and has_effect(store)
    assert is_pure(pid) and not has_effect(pid) and not reads(pid)
    assert writes(loop) == {GLOBAL} and has_effect(loop) and not is_pure(loop)
    assert writes(program.kernel) == {GLOBAL} and reads(program.kernel) == {GLOBAL}
    assert not any(is_explicit(op) for op in program.kernel.walk())
    assert {op.name for op in program.kernel.walk() if is_elementwise(op)} == {"kir.binary", "kir.cmp"}


def test_the_facts_of_ops_in_a_warp_specialized_program():
    program = parse_file(ROOT / "examples" / "gemm_hopper_ws.kir")
    (tma,) = _ops(program, ex.TmaLoadOp)[:1]
    assert reads(tma) == {GLOBAL} and writes(tma) == {SHARED, BARRIER}
    assert is_async(tma) and completed_by(tma) == "kir.wait" and has_effect(tma)
    (wait,) = _ops(program, ex.WaitOp)[:1]
    assert synchronizes(wait) and reads(wait) == {BARRIER} and not writes(wait) and has_effect(wait)
    assert get_effects(wait) is None  # to xdsl, a synchronizing op has unknown effects
    (alloc,) = _ops(program, ex.SmemAllocOp)[:1]
    assert allocates(alloc) == SHARED and not is_pure(alloc) and not has_effect(alloc)
    (wgmma,) = _ops(program, ex.WgmmaOp)[:1]
    assert reads(wgmma) == {SHARED} and is_async(wgmma) and has_effect(wgmma)
    assert all(is_explicit(op) for op in program.kernel.walk() if isinstance(op, st.RoleOp))


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_spaces_an_op_touches_are_among_those_it_declares(path):
    program = parse_file(path)
    for op in program.kernel.walk():
        if op.has_trait(RecursiveMemoryEffect):
            continue
        for trait_type, spaces in ((Reads, reads(op)), (Writes, writes(op))):
            declared = set().union(*(t.spaces for t in op.get_traits_of_type(trait_type)))
            assert spaces <= declared, op.name
        if isinstance(op, tl.LoadOp | tl.StoreOp):
            assert (reads(op) | writes(op)) == ({SHARED} if isinstance(op.mem.type, SmemType) else {GLOBAL})


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_verifiers_memory_operands_are_those_the_traits_name(path):
    """The dataflow rules read accesses with their own verbs; the memory they name is the traits'."""
    program = parse_file(path)
    for op in program.kernel.walk():
        for trait_type, refs in ((Reads, dataflow_facts.reads(op)), (Writes, dataflow_facts.writes(op))):
            named = [t.operand(op) for t in op.get_traits_of_type(trait_type) if t.touched(op) in (GLOBAL, SHARED)]
            assert sorted(map(id, named)) == sorted(id(r.mem) for r in refs), op.name
