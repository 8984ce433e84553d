"""The generic checks `kir.dialect.opdef` runs directly agree with xdsl's on every op: on every
op of every program in the repository (all hold), and on ops broken in each way the direct checks
look at (none holds, and xdsl's own verification, which then runs, raises)."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects.builtin import DenseArrayBase, IntAttr, StringAttr, i32
from xdsl.utils.exceptions import VerifyException

import kir.dialect as d
from kir.dialect.opdef import _simple
from kir.parser import parse

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(p for p in [*ROOT.glob("benchmarks/tasks/*/*.kir"), *ROOT.glob("examples/**/*.kir")])


def _ops():
    for path in PROGRAMS:
        try:
            program = parse(path.read_text(), file=str(path))
        except Exception:  # noqa: BLE001 - a program that does not parse has no ops to compare
            continue
        yield from program.kernel.walk()


def test_most_ops_take_the_direct_checks():
    simple = [op for op in d.OPS if op.simple_definition]
    assert len(simple) >= 40, [op.__name__ for op in d.OPS if not op.simple_definition]


def test_direct_checks_agree_with_xdsl_on_every_program():
    seen = 0
    for op in _ops():
        plan = _simple(op.get_irdl_definition())
        if plan is None:
            continue
        seen += 1
        assert plan.holds(op), f"{op.name} at {op} fails the direct checks"
        op.get_irdl_definition().verify(op)  # xdsl agrees: raises nothing
        op.verify_()
    assert seen > 500


def _first(kind):
    for op in _ops():
        if isinstance(op, kind):
            return op
    raise AssertionError(kind)


def _broken(op, how: str):
    """Break one thing the direct checks look at, in place (on a throwaway program)."""
    if how == "missing-property":
        name = next(iter(op.get_irdl_definition().properties))
        del op.properties[name]
    elif how == "unknown-property":
        op.properties["nonsense"] = IntAttr(1)
    elif how == "wrong-property-type":
        name, pdef = next(iter(op.get_irdl_definition().properties.items()))
        op.properties[name] = IntAttr(3) if isinstance(op.properties[name], StringAttr) else StringAttr("x")
    elif how == "segments-sum":  # one more operand than the segment sizes account for
        sizes = list(op.properties["operandSegmentSizes"].get_values())
        sizes[0] += 1
        op.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, sizes)
    elif how == "segments-missing":
        del op.properties["operandSegmentSizes"]
    elif how == "segments-optional-twice":  # an optional slot given two operands
        kinds = _simple(op.get_irdl_definition()).kinds
        sizes = list(op.properties["operandSegmentSizes"].get_values())
        opt = kinds.index("opt")
        var = kinds.index("var")
        sizes[opt] += 1
        sizes[var] -= 1
        op.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, sizes)
    elif how == "wrong-result-type":
        op.results[0]._type = StringAttr("not a type")  # noqa: SLF001 - the point is to break it
    return op


@pytest.mark.parametrize("how", ["missing-property", "unknown-property", "wrong-property-type"])
@pytest.mark.parametrize("kind", [d.BinaryOp, d.CompareOp, d.ProgramIdOp, d.ReduceOp])
def test_direct_checks_refuse_what_xdsl_refuses(kind, how):
    op = _broken(_first(kind), how)
    plan = _simple(op.get_irdl_definition())
    assert plan is not None
    assert not plan.holds(op)
    with pytest.raises(VerifyException):
        op.get_irdl_definition().verify(op)
    with pytest.raises(VerifyException):
        op.verify_()


def test_wrong_result_type_is_refused():
    op = _broken(_first(d.ProgramIdOp), "wrong-result-type")  # its result must be a scalar
    assert not _simple(op.get_irdl_definition()).holds(op)
    with pytest.raises(VerifyException):
        op.verify_()


def test_the_builder_runs_the_own_checks_and_the_checker_all_of_them():
    """A typing error is still found as the text is read (the op's own checks run at emit)."""
    from kir.diagnostics import KirError

    text = (ROOT / "benchmarks/tasks/softmax/seed.kir").read_text()
    bad = text.replace("e / sum(e, axis = 0)", "e & sum(e, axis = 0)")
    assert bad != text
    with pytest.raises(KirError) as err:
        parse(bad)
    assert err.value.diagnostics[0].rule == "types.float-only"


@pytest.mark.parametrize("how", ["segments-sum", "segments-missing", "segments-optional-twice"])
def test_segment_sizes_are_checked(how):
    op = _first(d.LoadOp)  # mem, indices (variadic), mask and other (optional)
    assert len(op.indices) >= 1
    _broken(op, how)
    assert not _simple(op.get_irdl_definition()).holds(op)
    with pytest.raises(VerifyException):
        op.verify_()


def test_fast_construction_builds_what_xdsl_builds():
    """Ops built directly (fixed and segmented definitions) equal the ones xdsl's builder makes."""
    from xdsl.irdl import IRDLOperation

    from kir.dialect.opdef import KirOperation

    checked = set()
    for op in _ops():
        cls = type(op)
        if cls in checked or not op.simple_definition or op.regions:
            continue
        checked.add(cls)
        kinds = _simple(op.get_irdl_definition()).kinds
        if kinds is None:
            args = list(op.operands)
        else:
            if "operandSegmentSizes" in op.properties:
                sizes = op.properties["operandSegmentSizes"].get_values()
            else:  # one variadic slot holds what the fixed ones leave
                rest = len(op.operands) - (len(kinds) - 1)
                sizes = [1 if k == "one" else rest for k in kinds]
            args, at = [], 0
            for size in sizes:
                args.append(list(op.operands[at : at + size]))
                at += size
        props = {k: v for k, v in op.properties.items() if k != "operandSegmentSizes"}
        results = [r.type for r in op.results]
        fast = cls.__new__(cls)
        KirOperation.__init__(fast, operands=args, result_types=results, properties=props)
        slow = cls.__new__(cls)
        IRDLOperation.__init__(slow, operands=args, result_types=results, properties=props)
        assert list(fast.operands) == list(slow.operands)
        assert fast.properties == slow.properties, cls
        assert [r.type for r in fast.results] == [r.type for r in slow.results]
    assert {d.LoadOp, d.StoreOp, d.BinaryOp} <= checked
