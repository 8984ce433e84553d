"""Structural ops: the kernel, loops, conditionals and warp roles."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsTerminator, NoMemoryEffect, NoTerminator, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from kir import symexpr as sx
from kir.dialect.errors import RuleViolation
from kir.dialect.opdef import KirOperation, op_definition
from kir.dialect.traits import Explicit, Pure
from kir.dialect.types import GlobalType, ScalarType, SymAttr, scalar, sym, syms

TARGETS = ("interp", "sm_80", "sm_90", "gfx90a", "gfx942", "mtia-sim")


@op_definition
class KernelOp(KirOperation):
    """A kernel: a grid of programs over global tensors.

        kernel vadd<BLOCK = 1024>(x: global f32[N], y: global f32[N], z: out global f32[N])
          target sm_90 grid(cdiv(N, BLOCK)) warps(4)
        { ... }

    Compile-time parameters (`BLOCK`) have defaults and can be overridden by name; shape
    symbols (`N`) are bound from the arguments at launch; `where` constraints on them are
    assumptions the verifier may use and the interpreter checks.
    """

    name = "kir.kernel"
    sym_name = prop_def(StringAttr)
    param_names = prop_def(ArrayAttr[StringAttr])
    param_defaults = prop_def(ArrayAttr[IntAttr])
    arg_names = prop_def(ArrayAttr[StringAttr])
    where = prop_def(ArrayAttr[SymAttr])
    target = prop_def(StringAttr)
    grid = prop_def(ArrayAttr[SymAttr])
    num_warps = prop_def(IntAttr)
    warp_unit = prop_def(StringAttr)  # "warps" or "warpgroups"
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), RecursiveMemoryEffect())

    def __init__(
        self,
        name: str,
        params: Sequence[tuple[str, int]],
        args: Sequence[tuple[str, GlobalType]],
        where: Sequence[sx.SymExpr],
        target: str,
        grid: Sequence[sx.SymExpr],
        num_warps: int,
        warp_unit: str = "warps",
        body: Region | None = None,
    ):
        if body is None:
            body = Region(Block(arg_types=[t for _, t in args]))
        for (arg_name, _), block_arg in zip(args, body.block.args, strict=False):
            block_arg.name_hint = arg_name
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "param_names": ArrayAttr([StringAttr(n) for n, _ in params]),
                "param_defaults": ArrayAttr([IntAttr(v) for _, v in params]),
                "arg_names": ArrayAttr([StringAttr(n) for n, _ in args]),
                "where": syms(where),
                "target": StringAttr(target),
                "grid": syms(grid),
                "num_warps": IntAttr(num_warps),
                "warp_unit": StringAttr(warp_unit),
            },
            regions=[body],
        )

    @property
    def kernel_name(self) -> str:
        return self.sym_name.data

    @property
    def params(self) -> dict[str, int]:
        return {n.data: d.data for n, d in zip(self.param_names.data, self.param_defaults.data, strict=True)}

    @property
    def args(self) -> list[tuple[str, SSAValue]]:
        return [(n.data, a) for n, a in zip(self.arg_names.data, self.body.block.args, strict=True)]

    @property
    def shape_symbols(self) -> list[str]:
        """Symbols named by argument shapes and strides, in order of first appearance."""
        seen: list[str] = []
        for _, arg in self.args:
            assert isinstance(arg.type, GlobalType)
            for d in [*arg.type.shape.data, *arg.type.strides.data]:
                for s in sorted(d.data.symbols()):
                    if s not in seen and s not in self.params:
                        seen.append(s)
        return seen

    @property
    def threads(self) -> int:
        return self.num_warps.data * (128 if self.warp_unit.data == "warpgroups" else 32)

    def verify_(self) -> None:
        if len(self.param_names.data) != len(self.param_defaults.data):
            raise VerifyException("every parameter needs a default")
        if len(self.arg_names.data) != len(self.body.block.args):
            raise VerifyException("argument names and block arguments disagree")
        if not 1 <= len(self.grid.data) <= 3:
            raise VerifyException("the grid has one to three dimensions")
        if self.warp_unit.data not in ("warps", "warpgroups"):
            raise VerifyException("launch unit must be warps or warpgroups")
        if self.target.data not in TARGETS:
            raise VerifyException(f"unknown target '{self.target.data}'; known: {', '.join(TARGETS)}")
        for arg in self.body.block.args:
            if not isinstance(arg.type, GlobalType):
                raise VerifyException("kernel arguments are global tensors")


@op_definition
class YieldOp(KirOperation):
    """Ends a loop body or a branch, giving the values carried out of it. It is implicit in
    KIR text: the carried variables' last assignments are yielded, as `acc` here:

        for k in 0 .. K / BK { acc = dot<f32>(a_tile, b_tile, acc) }
    """

    name = "kir.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), NoMemoryEffect())

    def __init__(self, values: Sequence[SSAValue] = ()):
        super().__init__(operands=[list(values)])


@op_definition
class ForOp(KirOperation):
    """A counted loop with carried values and optional scheduling hints.

        acc = zeros(f32[BM, BN])
        for k in 0 .. K / BK pipeline(stages = 3) {
          acc = dot<f32>(a_tile, b_tile, acc)
        }

    A variable defined before the loop and assigned in its body is carried: the body block's
    arguments are the loop variable then the carried values; the loop's results are their
    values after the last iteration. `pipeline(stages = S)` asks the lowering to overlap the
    loads of S iterations; `warp_specialize` asks it to split producers from consumers.
    """

    name = "kir.for"
    lower = operand_def(ScalarType)
    upper = operand_def(ScalarType)
    step = operand_def(ScalarType)
    inits = var_operand_def()
    res = var_result_def()
    stages = opt_prop_def(SymAttr)
    warp_specialize = opt_prop_def(UnitAttr)
    body = region_def("single_block")
    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        lower: SSAValue,
        upper: SSAValue,
        step: SSAValue,
        inits: Sequence[SSAValue],
        body: Region,
        stages: sx.SymExpr | int | None = None,
        warp_specialize: bool = False,
    ):
        props: dict[str, Attribute] = {}
        if stages is not None:
            props["stages"] = sym(stages)
        if warp_specialize:
            props["warp_specialize"] = UnitAttr()
        super().__init__(
            operands=[lower, upper, step, list(inits)],
            result_types=[[v.type for v in inits]],
            properties=props,
            regions=[body],
        )

    def verify_(self) -> None:
        for bound in (self.lower, self.upper, self.step):
            if not isinstance(bound.type, ScalarType) or bound.type.dtype.data not in ("i32", "i64"):
                raise RuleViolation(
                    "loop bounds and step are i32 or i64 scalars",
                    rule="types.loop-bound",
                    hint="cast<i32>(...) the bound, or reduce a tile to a scalar first",
                )
        block = self.body.block
        if len(block.args) != 1 + len(self.inits):
            raise VerifyException("the body takes the loop variable and one argument per carried value")
        for init, arg, res in zip(self.inits, block.args[1:], self.res, strict=True):
            if not (init.type == arg.type == res.type):
                raise RuleViolation(
                    f"carried value '{arg.name_hint}' changes type in the loop: {init.type} before, "
                    f"{arg.type} in the body",
                    rule="types.carried",
                    hint=f"keep '{arg.name_hint}' {init.type} in the loop (cast it) or use a new name",
                )
        last = block.last_op
        if not isinstance(last, YieldOp) or len(last.values) != len(self.inits):
            raise VerifyException("the body must end with a yield of every carried value")
        for arg, y in zip(block.args[1:], last.values, strict=True):
            if y.type != arg.type:
                raise RuleViolation(
                    f"carried value '{arg.name_hint}' is {arg.type} before the loop but {y.type} at its end",
                    rule="types.carried",
                    hint=f"keep '{arg.name_hint}' {arg.type} in the loop (cast it) or use a new name",
                )


@op_definition
class IfOp(KirOperation):
    """A conditional on a scalar i1; variables assigned in a branch are its results.

    In KIR:

        if row < M { y = y * 2.0 }
    """

    name = "kir.if"
    cond = operand_def(ScalarType)
    res = var_result_def()
    then_body = region_def("single_block")
    else_body = region_def("single_block")
    traits = traits_def(RecursiveMemoryEffect())

    def __init__(self, cond: SSAValue, result_types: Sequence[Attribute], then_body: Region, else_body: Region):
        super().__init__(operands=[cond], result_types=[list(result_types)], regions=[then_body, else_body])

    def verify_(self) -> None:
        if not isinstance(self.cond.type, ScalarType) or self.cond.type.dtype.data != "i1":
            raise RuleViolation(
                "the condition of `if` is an i1 scalar",
                rule="types.condition",
                hint="compare to get an i1, and reduce a tile mask with max(...) first",
            )
        for region in (self.then_body, self.else_body):
            last = region.block.last_op
            if not isinstance(last, YieldOp) or [v.type for v in last.values] != [r.type for r in self.res]:
                raise RuleViolation(
                    "both branches must yield the if's result types",
                    rule="types.branches",
                    hint="give a variable the same type on both paths (cast it)",
                )


@op_definition
class RoleOp(KirOperation):
    """A warp role: a body run only by the given warps (or warpgroups), with a register budget.

        role load warpgroups(0) regs(40) { ... }
        role mma warpgroups(1, 2) regs(232) { ... }

    Roles run concurrently; they communicate through shared buffers and order their accesses
    only with mbarriers and CTA barriers. Within a role, statements run in program order.
    """

    name = "kir.role"
    role_name = prop_def(StringAttr)
    unit = prop_def(StringAttr)  # "warps" or "warpgroups"
    ids = prop_def(ArrayAttr[IntAttr])
    regs = prop_def(IntAttr)  # 0: no budget given
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), RecursiveMemoryEffect(), Explicit())

    def __init__(self, name: str, unit: str, ids: Sequence[int], regs: int, body: Region | None = None):
        super().__init__(
            properties={
                "role_name": StringAttr(name),
                "unit": StringAttr(unit),
                "ids": ArrayAttr([IntAttr(i) for i in ids]),
                "regs": IntAttr(regs),
            },
            regions=[body if body is not None else Region(Block())],
        )

    @property
    def name_text(self) -> str:
        return self.role_name.data

    @property
    def id_list(self) -> list[int]:
        return [i.data for i in self.ids.data]

    @property
    def warps_per_unit(self) -> int:
        """Warps in one unit of the role: a warpgroup is 4 warps (128 threads) on sm_90."""
        return 4 if self.unit.data == "warpgroups" else 1

    @staticmethod
    def enclosing(op: Operation) -> RoleOp | None:
        """The role an op runs in (None outside roles)."""
        parent = op.parent_op()
        while parent is not None and not isinstance(parent, KernelOp):
            if isinstance(parent, RoleOp):
                return parent
            parent = parent.parent_op()
        return None

    def verify_(self) -> None:
        if self.unit.data not in ("warps", "warpgroups"):
            raise VerifyException("a role is given warps(...) or warpgroups(...)")
        if not self.ids.data:
            raise VerifyException("a role needs at least one warp or warpgroup")
        if len(set(self.id_list)) != len(self.id_list):
            raise VerifyException("a role lists a warp or warpgroup twice")
        if any(i < 0 for i in self.id_list):
            raise VerifyException("warp and warpgroup ids are non-negative")
        if self.regs.data < 0:
            raise VerifyException("a register budget is positive")


@op_definition
class RoleRankOp(KirOperation):
    """The position of the executing unit in its role's list, as an i32: in
    `role mma warpgroups(1, 2)`, warpgroup 1 has rank 0 and warpgroup 2 rank 1.

        r0 = role_rank() * (BM / 2)
    """

    name = "kir.role_rank"
    res = result_def(ScalarType)
    traits = traits_def(Pure(), Explicit())

    def __init__(self):
        super().__init__(result_types=[scalar("i32")])
