"""The Python builder API: construct and modify KIR programs without going through text.

The parser builds every program through this class too, so a program built here and the same
program parsed from text are the same IR. Names work as in KIR text: `assign` binds a name in
the current scope, a loop carries the names it is told to, and `value(name)` resolves a
variable, a kernel argument, a parameter or a shape symbol.

    b = Builder("scale", params={"BLOCK": 256}, target="sm_90", grid=["cdiv(N, BLOCK)"], warps=4)
    x = b.arg("x", "f32", ["N"])
    y = b.arg("y", "f32", ["N"], out=True)
    b.begin()
    offs = b.assign("offs", b.binary("add", b.binary("mul", b.program_id(0), b.value("BLOCK")),
                                      b.arange(0, "BLOCK")))
    mask = b.compare("lt", offs, b.value("N"))
    v = b.load(x, [offs], mask=mask)
    b.store(y, [offs], b.binary("mul", v, b.const(2.0, "f32")), mask=mask)
    program = b.finish()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn, TypeVar

from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, KirError, Related, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import (
    Access,
    GlobalType,
    Layout,
    MBarrierType,
    ScalarType,
    SmemType,
    TileType,
    global_tensor,
)
from kir.names import IDENTIFIER, RESERVED, suggest
from kir.program import Program, set_span, span_of
from kir.syntax import parse_static_text

OpT = TypeVar("OpT", bound=Operation)


def parse_sym(text: str | int | sx.SymExpr) -> sx.SymExpr:
    """A symbolic expression from Python: an int, a SymExpr, or KIR text such as "M / BM"."""
    if isinstance(text, sx.SymExpr):
        return text
    if isinstance(text, int):
        return sx.Int(text)
    return parse_static_text(text)


@dataclass
class _Scope:
    names: dict[str, SSAValue] = field(default_factory=dict)
    assigned: list[str] = field(default_factory=list)  # in order of first assignment
    # the same names, for membership tests: a list's made a long block quadratic
    assigned_set: set[str] = field(default_factory=set)

    def note_assigned(self, name: str) -> None:
        if name not in self.assigned_set:
            self.assigned_set.add(name)
            self.assigned.append(name)


@dataclass
class _LoopFrame:
    kind: str  # "for" or "if-then" / "if-else"
    carried: list[str]
    outer: list[SSAValue]
    args: dict


class Builder:
    def __init__(
        self,
        name: str,
        *,
        params: dict[str, int] | Sequence[tuple[str, int]] = (),
        target: str = "sm_90",
        grid: Sequence[str | int | sx.SymExpr] = (1,),
        warps: int = 4,
        warp_unit: str = "warps",
        where: Sequence[str | sx.SymExpr] = (),
        file: str = "<builder>",
    ):
        self.file = file
        self.name = name
        self.params = dict(params)
        self.target = target
        self.grid = [parse_sym(g) for g in grid]
        self.warps = warps
        self.warp_unit = warp_unit
        self.where = [parse_sym(w) for w in where]
        self._args: list[tuple[str, GlobalType]] = []
        self._symbols: list[str] = []  # shape_symbols() of the first `_symbols_of` arguments
        self._symbols_of = 0
        self._arg_spans: dict[str, Span] = {}
        self.kernel: st.KernelOp | None = None
        self._blocks: list[Block] = []
        self._scopes: list[_Scope] = []
        self._frames: list[_LoopFrame] = []
        self._kernel_span: Span | None = None

    # ---- the signature -----------------------------------------------------------------------

    def arg(
        self,
        name: str,
        dtype: str,
        shape: Sequence[str | int | sx.SymExpr],
        *,
        strides: Sequence[str | int | sx.SymExpr] = (),
        align: int = 0,
        out: bool = False,
        span: Span | None = None,
    ) -> str:
        self._check_new_name(name, span)
        if any(n == name for n, _ in self._args):
            self._fail("name.duplicate", f"argument '{name}' is declared twice", span)
        try:
            t = global_tensor(
                dtype, [parse_sym(d) for d in shape], strides=[parse_sym(s) for s in strides], align=align, out=out
            )
        except VerifyException as e:
            self._fail("types.argument", f"argument '{name}': {e}", span)
        self._args.append((name, t))
        if span:
            self._arg_spans[name] = span
        return name

    def begin(self, span: Span | None = None) -> None:
        """Ends the signature: creates the kernel op; statements follow."""
        self._kernel_span = span
        self._check_new_name(self.name, span)
        for p in self.params:
            self._check_new_name(p, span)
        try:
            self.kernel = st.KernelOp(
                self.name,
                list(self.params.items()),
                self._args,
                self.where,
                self.target,
                self.grid,
                self.warps,
                self.warp_unit,
            )
            self.kernel.verify_()
        except VerifyException as e:
            self._fail("kernel.signature", *_located(str(e), span))
        set_span(self.kernel, span)
        self._blocks = [self.kernel.body.block]
        self._scopes = [_Scope(dict(zip([n for n, _ in self._args], self.kernel.body.block.args, strict=True)))]
        for sym_name in self.shape_symbols():
            if sym_name in self.params:
                continue
            if sym_name in RESERVED:
                self._fail("name.reserved", f"'{sym_name}' is a keyword and cannot name a shape symbol", span)

    def finish(self, **program_fields) -> Program:
        assert self.kernel is not None and len(self._blocks) == 1, "unbalanced begin/end calls"
        return Program(self.kernel, file=self.file, arg_spans=self._arg_spans, **program_fields)

    def shape_symbols(self) -> list[str]:
        """The shape symbols of the arguments, in order of first appearance (worked out again
        only when an argument was added: sema asks at every name it binds)."""
        if self._symbols_of != len(self._args):
            seen: list[str] = []
            for _, t in self._args:
                for d in [*t.shape.data, *t.strides.data]:
                    for s in sorted(d.data.symbols()):
                        if s not in seen:
                            seen.append(s)
            self._symbols, self._symbols_of = seen, len(self._args)
        return list(self._symbols)

    # ---- names -------------------------------------------------------------------------------

    def lookup(self, name: str) -> SSAValue | None:
        for scope in reversed(self._scopes):
            if name in scope.names:
                return scope.names[name]
        return None

    def is_static_name(self, name: str) -> bool:
        return name in self.params or name in self.shape_symbols()

    def value(self, name: str, span: Span | None = None) -> SSAValue:
        """A variable, argument, shared buffer or barrier by name; a parameter or shape symbol
        as an i32 scalar."""
        found = self.lookup(name)
        if found is not None:
            return found
        if self.is_static_name(name):
            return self.emit(tl.SymValueOp(name), span).res
        visible = {n for s in self._scopes for n in s.names} | set(self.params) | set(self.shape_symbols())
        self._fail("name.undefined", f"'{name}' is not defined", span, suggest(name, visible))
        raise AssertionError  # unreachable

    def assign(self, name: str, value: SSAValue, span: Span | None = None) -> SSAValue:
        self._check_new_name(name, span)
        if self.is_static_name(name):
            kind = "parameter" if name in self.params else "shape symbol"
            self._fail("name.reserved", f"'{name}' is a {kind} and cannot be assigned", span, "choose another name")
        if any(n == name for n, _ in self._args):
            self._fail(
                "name.reserved", f"'{name}' is a kernel argument and cannot be assigned", span, "choose another name"
            )
        previous = self.lookup(name)
        if previous is not None and not _is_value(previous) and previous is not value:
            self._fail("name.rebind", f"'{name}' names a {_kind(previous)} and cannot be rebound", span)
        if previous is not None and _is_value(previous) and not _is_value(value):
            self._fail("name.rebind", f"'{name}' is a value and cannot be rebound to a {_kind(value)}", span)
        if value.name_hint is None and isinstance(value.owner, Operation):
            value.name_hint = name
        scope = self._scopes[-1]
        scope.names[name] = value
        scope.note_assigned(name)
        return value

    def _check_new_name(self, name: str, span: Span | None) -> None:
        if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
            self._fail(
                "name.invalid",
                f"{name!r} is not a KIR name",
                span,
                "use letters, digits and '_', not starting with a digit",
            )
        if name in RESERVED:
            self._fail("name.reserved", f"'{name}' is a keyword", span, "choose another name")
        if name.startswith("__"):
            self._fail("name.reserved", f"names starting with '__' are reserved ('{name}')", span)

    # ---- ops ---------------------------------------------------------------------------------

    def emit(self, op: OpT, span: Span | None = None) -> OpT:
        self._blocks[-1].add_op(op)
        set_span(op, span)
        try:
            # the op's own typing checks only: the generic ones hold by construction, and the
            # checker verifies every op in full once (kir.dialect.opdef)
            getattr(type(op), "own_verify", type(op).verify_)(op)
        except VerifyException as e:
            op.detach()
            blamed = getattr(e, "at", None)
            at = span_of(blamed) if isinstance(blamed, Operation) else None
            if at is not None and span is not None:  # the fix is elsewhere: there, the op related
                rule, message, _, hint = _violation(e, span)
                raise KirError(
                    Diagnostic(rule, "error", at, message, hint, (Related(span, "the op that fails"),))
                ) from None
            self._fail(*_violation(e, span))
        return op

    def make(self, factory: Callable[..., OpT], *args, span: Span | None = None, **kwargs) -> OpT:
        """Construct an op (its constructor infers the result type) and emit it."""
        try:
            op = factory(*args, **kwargs)
        except VerifyException as e:
            self._fail(*_violation(e, span))
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as e:
            self._fail("types.error", f"{_op_name(factory)}: {e}", span)
        return self.emit(op, span)

    def const(self, value: int | float | bool | str, dtype: str, span: Span | None = None) -> SSAValue:
        return self.make(tl.ConstOp, value, dtype, span=span).res

    def program_id(self, axis: int, span: Span | None = None) -> SSAValue:
        return self.make(tl.ProgramIdOp, axis, span=span).res

    def arange(self, start, end, span: Span | None = None) -> SSAValue:
        return self.make(tl.ArangeOp, parse_sym(start), parse_sym(end), span=span).res

    def binary(self, fn: str, lhs: SSAValue, rhs: SSAValue, span: Span | None = None) -> SSAValue:
        return self.make(tl.BinaryOp, fn, lhs, rhs, span=span).res

    def compare(self, pred: str, lhs: SSAValue, rhs: SSAValue, span: Span | None = None) -> SSAValue:
        return self.make(tl.CompareOp, pred, lhs, rhs, span=span).res

    def unary(self, fn: str, x: SSAValue, span: Span | None = None) -> SSAValue:
        return self.make(tl.UnaryOp, fn, x, span=span).res

    def load(
        self,
        mem: SSAValue,
        indices: Sequence[SSAValue],
        access: Access | None = None,
        *,
        mask=None,
        other=None,
        evict=None,
        span=None,
    ):
        access = access or Access(tuple(None for _ in indices))
        return self.make(tl.LoadOp, mem, access, list(indices), mask, other, evict, span=span).res

    def store(
        self,
        mem: SSAValue,
        indices: Sequence[SSAValue],
        value: SSAValue,
        access: Access | None = None,
        *,
        mask=None,
        span=None,
    ):
        access = access or Access(tuple(None for _ in indices))
        return self.make(tl.StoreOp, mem, access, list(indices), value, mask, span=span)

    # ---- regions -----------------------------------------------------------------------------

    def begin_for(
        self,
        iv_name: str,
        lower: SSAValue,
        upper: SSAValue,
        step: SSAValue,
        carried: Sequence[str],
        *,
        stages: sx.SymExpr | int | None = None,
        warp_specialize: bool = False,
        span: Span | None = None,
    ) -> SSAValue:
        """Open a loop body; `carried` names variables visible here that the body reassigns."""
        self._check_new_name(iv_name, span)
        if self.is_static_name(iv_name):
            self._fail("name.reserved", f"'{iv_name}' is a parameter or shape symbol", span)
        if any(n == iv_name for n, _ in self._args):
            self._fail("name.reserved", f"'{iv_name}' is a kernel argument", span, "choose another name")
        for v, what in ((lower, "lower bound"), (upper, "upper bound"), (step, "step")):
            if not isinstance(v.type, ScalarType) or v.type.dtype.data not in ("i32", "i64"):
                self._fail("types.loop-bound", f"the loop's {what} is an i32 or i64 scalar, not {v.type}", span)
        outer = [self.value(n, span) for n in carried]
        block = Block(arg_types=[lower.type, *[v.type for v in outer]])
        block.args[0].name_hint = iv_name
        for n, a in zip(carried, block.args[1:], strict=True):
            a.name_hint = n
        self._frames.append(
            _LoopFrame(
                "for",
                list(carried),
                outer,
                {"bounds": (lower, upper, step), "stages": stages, "ws": warp_specialize, "span": span, "block": block},
            )
        )
        self._blocks.append(block)
        scope = _Scope({iv_name: block.args[0], **dict(zip(carried, block.args[1:], strict=True))})
        self._scopes.append(scope)
        return block.args[0]

    def end_for(self, span: Span | None = None) -> list[SSAValue]:
        """Close a loop. On a `KirError` the loop stays open (the builder is unchanged)."""
        frame = self._frames[-1]
        assert frame.kind == "for"
        block = self._blocks[-1]
        yields = [self.value(n) for n in frame.carried]
        for n, arg, y in zip(frame.carried, block.args[1:], yields, strict=True):
            if y.type != arg.type:
                where = _def_span(y) or span
                self._fail(
                    "types.carried",
                    f"'{n}' is {arg.type} before the loop but {y.type} at the end of its body",
                    where,
                    f"keep '{n}' {arg.type} in the loop (cast it) or use a new name",
                )
        self._frames.pop()
        self.emit(st.YieldOp(yields), frame.args["span"])
        self._blocks.pop()
        self._scopes.pop()
        lower, upper, step = frame.args["bounds"]
        body = Region(frame.args["block"])
        op = self.make(
            st.ForOp,
            lower,
            upper,
            step,
            frame.outer,
            body,
            frame.args["stages"],
            frame.args["ws"],
            span=frame.args["span"],
        )
        for n, r in zip(frame.carried, op.results, strict=True):
            r.name_hint = n
            self._scopes[-1].names[n] = r
            self._scopes[-1].note_assigned(n)
        return list(op.results)

    def begin_if(self, cond: SSAValue, span: Span | None = None) -> None:
        if not isinstance(cond.type, ScalarType) or cond.type.dtype.data != "i1":
            self._fail("types.condition", f"the condition of `if` is an i1 scalar, not {cond.type}", span)
        self._frames.append(_LoopFrame("if", [], [], {"cond": cond, "span": span, "then": None}))
        block = Block()
        self._blocks.append(block)
        self._scopes.append(_Scope())
        self._frames[-1].args["then_block"] = block

    def begin_else(self) -> None:
        frame = self._frames[-1]
        frame.args["then_scope"] = self._scopes.pop()
        self._blocks.pop()
        block = Block()
        frame.args["else_block"] = block
        self._blocks.append(block)
        self._scopes.append(_Scope())

    def end_if(self, results: Sequence[str] | None = None) -> list[SSAValue]:
        """Close an `if`. Its results are the names assigned in a branch that were visible
        before it, or assigned in both branches (in order of first assignment, then branch
        first), unless `results` names them."""
        if "else_block" not in self._frames[-1].args:
            self.begin_else()  # an `if` without `else`: an empty else branch
        # Check everything before changing anything: on a KirError the `if` stays open (in its
        # else branch).
        frame = self._frames[-1]
        else_scope = self._scopes[-1]
        then_scope: _Scope = frame.args["then_scope"]

        def before(n: str) -> SSAValue | None:  # the value of `n` before the `if`
            return next((s.names[n] for s in reversed(self._scopes[:-1]) if n in s.names), None)

        if results is None:
            chosen: dict[str, None] = {}  # an ordered set
            for n in [*then_scope.assigned, *else_scope.assigned]:
                if n in chosen:
                    continue
                both = n in then_scope.assigned_set and n in else_scope.assigned_set
                if _is_value(before(n)) or both:
                    chosen[n] = None
            results = list(chosen)
        span = frame.args["span"]
        branch_values = []
        for scope in (then_scope, else_scope):
            vals = []
            for n in results:
                v = scope.names.get(n) or before(n)
                if v is None:
                    self._fail(
                        "name.undefined", f"'{n}' is assigned in one branch only and undefined before the if", span
                    )
                vals.append(v)
            branch_values.append(vals)
        for n, a, b in zip(results, *branch_values, strict=True):
            if a.type != b.type:
                self._fail("types.branches", f"'{n}' is {a.type} in one branch and {b.type} in the other", span)
        self._frames.pop()
        self._scopes.pop()
        self._blocks.pop()
        then_block, else_block = frame.args["then_block"], frame.args["else_block"]
        then_block.add_op(st.YieldOp(branch_values[0]))
        else_block.add_op(st.YieldOp(branch_values[1]))
        set_span(then_block.last_op, span)
        set_span(else_block.last_op, span)
        op = self.make(
            st.IfOp,
            frame.args["cond"],
            [v.type for v in branch_values[0]],
            Region(then_block),
            Region(else_block),
            span=span,
        )
        for n, r in zip(results, op.results, strict=True):
            r.name_hint = n
            self._scopes[-1].names[n] = r
            self._scopes[-1].note_assigned(n)
        return list(op.results)

    def begin_role(self, name: str, unit: str, ids: Sequence[int], regs: int, span: Span | None = None) -> None:
        if any(f.kind == "role" for f in self._frames):
            self._fail("role.nested", "roles do not nest", span, "close the enclosing role first")
        if len(self._blocks) != 1:
            self._fail("role.placement", "a role is declared at the top level of the kernel", span)
        self._check_new_name(name, span)
        try:
            st.RoleOp(name, unit, ids, regs).verify_()
        except VerifyException as e:
            self._fail("role.declaration", str(e), span)
        block = Block()
        self._frames.append(
            _LoopFrame(
                "role",
                [],
                [],
                {"name": name, "unit": unit, "ids": list(ids), "regs": regs, "span": span, "block": block},
            )
        )
        self._blocks.append(block)
        self._scopes.append(_Scope())

    def end_role(self) -> None:
        frame = self._frames.pop()
        self._blocks.pop()
        self._scopes.pop()
        a = frame.args
        self.make(st.RoleOp, a["name"], a["unit"], a["ids"], a["regs"], Region(a["block"]), span=a["span"])

    # ---- failure -----------------------------------------------------------------------------

    def _fail(self, rule: str, message: str, span: Span | None, hint: str = "") -> NoReturn:
        raise KirError(Diagnostic(rule, "error", span, message, hint))


def _violation(err: VerifyException, span: Span | None) -> tuple[str, str, Span | None, str]:
    """(rule, message, span, hint) of an op verifier's exception."""
    rule = getattr(err, "rule", "types.error")
    message, _, hint = _located(str(err), span)
    return rule, message, span, getattr(err, "hint", "") or hint


def _located(text: str, span: Span | None) -> tuple[str, Span | None, str]:
    message, hint = split_hint(text)
    return message, span, hint


def split_hint(text: str) -> tuple[str, str]:
    """Op verifiers end a message with '; <the fix>' when there is one; that part is the hint."""
    message, sep, fix = text.rpartition("; ")
    if sep and fix.startswith(("use ", "cast ", "cast<", "reduce ", "index ", "add ", "keep ")):
        return message, fix
    return text, ""


def _is_value(v: SSAValue | None) -> bool:
    return v is not None and not isinstance(v.type, GlobalType | SmemType | MBarrierType)


def _kind(v: SSAValue) -> str:
    if isinstance(v.type, GlobalType):
        return "global tensor"
    if isinstance(v.type, SmemType):
        return "shared buffer"
    if isinstance(v.type, MBarrierType):
        return "mbarrier array"
    return "tile" if isinstance(v.type, TileType) else "scalar"


def _def_span(v: SSAValue) -> Span | None:
    return span_of(v.owner) if isinstance(v.owner, Operation) else None


def _op_name(factory) -> str:
    return getattr(factory, "name", getattr(factory, "__name__", "op"))


# Re-exported for tools that build explicit-level programs.
__all__ = ["Builder", "parse_sym", "Access", "Layout", "ex", "tl", "st", "RESERVED"]
