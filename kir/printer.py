"""IR -> canonical KIR text, which parses back to the same IR.

Expressions are printed inline where the parser would rebuild the same ops in the same order
(see `kir.sema`): an op is folded into its single user when it is pure enough to move into an
expression, has no name of its own, and sits exactly where the parser would emit it. Everything
else is a statement. Names are the values' names where that keeps the meaning (a name rebound
inside a loop body would become a carried variable, so the printer renames instead), else fresh.

The parser orders a loop's carried values, and an `if`'s results, by the first assignment of
their names in the body (the branches); the printer checks the order its text gives and, where
it differs or a value passes through unchanged, names them up front (`acc = acc`), or prints
the `if` again with fresh result names. The names set at the end of a body (or before a loop)
are set as one parallel assignment, with a temporary where two swap.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from xdsl.ir import Block, Operation, SSAValue

from kir import symexpr as sx
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.traits import allocates, has_effect
from kir.dialect.types import Access, GlobalType, ScalarType, TileType, dtype_of
from kir.names import RESERVED
from kir.spans import block_comments_of, comments_of


class Printable(Protocol):
    """What the printer reads of a `kir.program.Program`: the program's text comes from here
    (`Program.text`), so this module cannot import that one."""

    kernel: st.KernelOp
    header_comments: list[str]
    footer_comments: list[str]


# Precedence of the printed forms, loosest first (mirrors grammar.lark).
P_OR, P_XOR, P_AND, P_CMP, P_SHIFT, P_ADD, P_MUL, P_UNARY, P_POSTFIX, P_ATOM = range(1, 11)
_INFIX = {
    "or": ("|", P_OR),
    "xor": ("^", P_XOR),
    "and": ("&", P_AND),
    "shl": ("<<", P_SHIFT),
    "shr": (">>", P_SHIFT),
    "add": ("+", P_ADD),
    "sub": ("-", P_ADD),
    "mul": ("*", P_MUL),
    "div": ("/", P_MUL),
    "rem": ("%", P_MUL),
}
INDENT = "  "


def print_program(program: Printable, comments: bool = True) -> str:
    return _Printer(program, comments).run()


# ---- how each op's operands are read back: one list per `operands()` call of the parser ----
# Each entry: (operand index, literal group, dtype a lone literal of that group takes).


_Call = list[tuple[int, int, str | None]]


def operand_calls(op: Operation) -> list[_Call]:
    n = len(op.operands)
    if isinstance(op, tl.BinaryOp | tl.CompareOp):
        return [[(0, 0, None), (1, 0, None)]]
    if isinstance(op, tl.UnaryOp):
        return [[(0, 0, None if op.fn.data in ("neg", "not") else "f32")]]
    if isinstance(op, tl.WhereOp):
        return [[(0, 1, "i1"), (1, 0, None), (2, 0, None)]]
    if isinstance(op, tl.RandOp):
        return [[(0, 0, "i64"), (1, 1, "i32")]]
    if isinstance(op, tl.FullOp):
        return [[(0, 0, dtype_of(op.res.type))]]
    if isinstance(op, tl.DotOp):
        return [[(i, i, None) for i in range(n)]]
    if isinstance(op, tl.LoadOp):
        idx = _indices_call(op, "indices")
        tail: _Call = []
        if op.mask is not None:
            tail.append((_index_of(op, op.mask), 100, "i1"))
        if op.other is not None:
            tail.append((_index_of(op, op.other), 101, dtype_of(op.mem.type)))
        return [idx, tail]
    if isinstance(op, tl.StoreOp | tl.AtomicOp):
        calls: list[_Call] = [_indices_call(op, "indices"), [(_index_of(op, op.value), 0, dtype_of(op.mem.type))]]
        if op.mask is not None:
            calls.append([(_index_of(op, op.mask), 100, "i1")])
        return calls
    if isinstance(op, ex.ExpectOp):
        return [[(1, 0, "i32")], [(2, 0, "i32")]]
    if isinstance(op, ex.WaitOp):
        return [[(1, 0, "i32")], [(2, 0, "i32")]]
    if isinstance(op, ex.ArriveOp):
        return [[(1, 0, "i32")]]
    if isinstance(op, ex.TmaLoadOp):
        return [
            _indices_call(op, "src_indices"),
            _indices_call(op, "dst_indices"),
            [(_index_of(op, op.bar_index), 0, "i32")],
        ]
    if isinstance(op, ex.TmaStoreOp):
        return [_indices_call(op, "src_indices"), _indices_call(op, "dst_indices")]
    if isinstance(op, ex.CpAsyncOp):
        calls = [_indices_call(op, "src_indices"), _indices_call(op, "dst_indices")]
        if op.mask is not None:
            calls.append([(_index_of(op, op.mask), 100, "i1")])
        return calls
    if isinstance(op, ex.WgmmaOp):
        a: _Call = [(_index_of(op, op.a), 0, None)] if op.a_in_registers else _indices_call(op, "a_indices")
        return [a, _indices_call(op, "b_indices"), [(_index_of(op, op.acc), 0, None)]]
    if isinstance(op, ex.SizeofOp):
        return [_indices_call(op, "indices")]
    if isinstance(op, st.ForOp):
        return [[(0, 0, "i32"), (1, 0, "i32"), (2, 0, "i32")]]
    if isinstance(op, st.IfOp):
        return [[(0, 0, "i1")]]
    return [[(i, 0, None) for i in range(n)]]


def _index_of(op: Operation, value: SSAValue) -> int:
    for i, operand in enumerate(op.operands):
        if operand is value:
            return i
    raise ValueError("not an operand")


def _indices_call(op: Operation, field_name: str) -> list[tuple[int, int, str | None]]:
    values = list(getattr(op, field_name))
    start = 0
    # operands are unique objects per position; find the segment's first position
    for i in range(len(op.operands)):
        if (
            values
            and op.operands[i] is values[0]
            and all(i + k < len(op.operands) and op.operands[i + k] is v for k, v in enumerate(values))
        ):
            start = i
            break
    return [(start + k, k, "i32") for k in range(len(values))]


def _const_bare_text(op: tl.ConstOp) -> str:
    return op.value.data


def _is_literal_op(op: Operation | None) -> bool:
    return isinstance(op, tl.ConstOp)


def _literal_kind(op: tl.ConstOp) -> str:
    text = op.value.data
    if text in ("true", "false"):
        return "b"
    return "f" if op.dtype in ("f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2") else "i"


class _Names:
    """Names in order of first mention, with membership in constant time (a list's made the
    printing of a long block quadratic)."""

    def __init__(self) -> None:
        self._order: dict[str, None] = {}

    def add(self, name: str) -> None:
        self._order.setdefault(name)

    def put_first(self, names: list[str]) -> None:
        """`names` first, in order, then the others as they were."""
        order = dict.fromkeys(names)
        for name in self._order:
            order.setdefault(name)
        self._order = order

    def __contains__(self, name: object) -> bool:
        return name in self._order

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)


@dataclass
class _Scope:
    kind: str  # "kernel", "for", "if", "role"
    names: dict[str, SSAValue] = field(default_factory=dict)
    allowed: set[str] = field(default_factory=set)  # outer names this block may rebind
    forbidden: set[str] = field(default_factory=set)  # names that would change the meaning here
    # Names assigned in the text, in order of first assignment, as the parser collects them:
    # `assigned` in this block and as results of the loops and branches in it (a branch's
    # results, in order), `textual` anywhere inside, nested blocks included (a loop's carried
    # values, in order).
    assigned: _Names = field(default_factory=_Names)
    textual: _Names = field(default_factory=_Names)
    # the other branch of this `if`: its uses of an outer value come from that value's own name
    # there, so they do not keep this branch from rebinding the name
    sibling: Block | None = None

    def record(self, name: str) -> None:
        self.assigned.add(name)
        self.textual.add(name)


def _inside(op: Operation, block: Block) -> bool:
    b = op.parent_block()
    while b is not None:
        if b is block:
            return True
        parent = b.parent_op()
        b = parent.parent_block() if parent is not None else None
    return False


class _Printer:
    def __init__(self, program: Printable, comments: bool):
        self.program = program
        self.kernel = program.kernel
        self.comments = comments
        self.lines: list[str] = []
        self.names: dict[SSAValue, str] = {}
        self.scopes: list[_Scope] = []
        self.pos: dict[Operation, int] = {}
        self.inlined: set[Operation] = set()
        self.literal_ctx: dict[tuple[Operation, int], bool] = {}
        self.fresh_counter = 0
        self.typed_first: set[Operation] = set()
        self.block_start = False  # the last line opened a block (no blank line goes here)
        self.taken_hints = set()
        self.end: dict[Operation, int] = {}  # position of the last op nested in an op
        for i, op in enumerate(self.kernel.walk()):
            self.pos[op] = i
            for parent in _ancestors(op):
                self.end[parent] = i
            for r in op.results:
                if r.name_hint:
                    self.taken_hints.add(r.name_hint)
        self.static_names = set(self.kernel.params) | set(self.kernel.shape_symbols) | {n for n, _ in self.kernel.args}

    # ---- names ------------------------------------------------------------------------------

    def last_use(self, value: SSAValue) -> int:
        return max((self.pos.get(u.operation, -1) for u in value.uses), default=-1)

    def last_use_here(self, value: SSAValue) -> int:
        """last_use, leaving out the uses in the other branch of each enclosing `if`."""
        siblings = [s.sibling for s in self.scopes if s.sibling is not None]
        return max(
            (self.pos.get(u.operation, -1) for u in value.uses if not any(_inside(u.operation, b) for b in siblings)),
            default=-1,
        )

    def lookup(self, name: str) -> SSAValue | None:
        for scope in reversed(self.scopes):
            if name in scope.names:
                return scope.names[name]
        return None

    def visible_outside(self, name: str) -> bool:
        """Bound in an enclosing scope, so that assigning it in this loop body or branch makes
        it carried or a result (the parser looks names up through roles too). In a role's or
        the kernel's own block an assignment only rebinds the name there."""
        if self.scopes[-1].kind in ("kernel", "role"):
            return False
        return any(name in scope.names for scope in self.scopes[:-1])

    def usable(self, name: str, value: SSAValue, at: int, shadow: bool = False) -> bool:
        if not name.isidentifier() or name in RESERVED or name.startswith("__") or name in self.static_names:
            return False
        if name in self.scopes[-1].forbidden:
            return False
        current = self.lookup(name)
        if current is value:
            return True
        if current is not None and self.last_use_here(current) > at:
            return False
        scope = self.scopes[-1]
        if not shadow and self.visible_outside(name) and name not in scope.allowed and name not in scope.names:
            return False
        return True

    def fresh(self) -> str:
        while True:
            name = f"_v{self.fresh_counter}"
            self.fresh_counter += 1
            if name not in self.taken_hints and self.lookup(name) is None:
                return name

    def bind(self, value: SSAValue, at: int, preferred: str | None = None, shadow: bool = False) -> str:
        name = preferred or value.name_hint
        if not name or not self.usable(name, value, at, shadow):
            base = value.name_hint if value.name_hint and value.name_hint.isidentifier() else None
            name = None
            if base and base not in RESERVED and not base.startswith("__") and base not in self.static_names:
                for k in range(1, 100):
                    cand = f"{base}_{k}"
                    if cand not in self.taken_hints and self.usable(cand, value, at):
                        name = cand
                        break
            if name is None:
                name = self.fresh()
            self.taken_hints.add(name)
        self.scopes[-1].names[name] = value
        self.scopes[-1].record(name)
        self.names[value] = name
        return name

    def name_of(self, value: SSAValue) -> str:
        return self.names[value]

    # ---- layout -----------------------------------------------------------------------------

    def emit(self, depth: int, text: str, op: Operation | None = None) -> None:
        """A statement, with the comments the parser kept for `op` around it."""
        leading: list[str] = []
        trailing: str | None = None
        blank = False
        if op is not None and self.comments:
            leading, trailing, blank = comments_of(op)
        self.line(depth, text, leading, trailing, blank)

    def line(self, depth: int, text: str, leading=(), trailing: str | None = None, blank: bool = False) -> None:
        if blank and self.lines and not self.block_start:
            self.lines.append("")
        for c in leading:
            self.lines.append(INDENT * depth + c)
        self.lines.append(INDENT * depth + text + (f"  {trailing}" if trailing else ""))
        self.block_start = False

    def open_block(self, depth: int, text: str, op: Operation, region: int, statement: bool = True) -> None:
        """`text` ends with `{`: a statement's head (`for ... {`, with the statement's leading
        comments when `statement`) or `} else {`; the comment after the brace follows it."""
        leading, _, blank = comments_of(op) if self.comments and statement else ([], None, False)
        head = block_comments_of(op, region)[0] if self.comments else None
        self.line(depth, text, leading, head, blank)
        self.block_start = True

    def close_block(self, depth: int, op: Operation, region: int, text: str = "}") -> None:
        """The comments at the end of the block, then its closing line (`}` ends the statement
        and takes its trailing comment; `} else {` opens the next region)."""
        if self.comments:
            _, end, blank = block_comments_of(op, region)
            if end:
                if blank and not self.block_start:
                    self.lines.append("")
                self.lines += [INDENT * (depth + 1) + c for c in end]
                self.block_start = False
        if text == "}":
            trailing = comments_of(op)[1] if self.comments and not isinstance(op, st.KernelOp) else None
            self.line(depth, text, (), trailing)
        else:
            self.open_block(depth, text, op, region + 1, statement=False)

    def has_block_comments(self, op: Operation, region: int) -> bool:
        head, end, _ = block_comments_of(op, region)
        return self.comments and (head is not None or bool(end))

    def run(self) -> str:
        k = self.kernel
        if self.comments:
            self.lines += self.program.header_comments
        params = ""
        if k.params:
            params = "<" + ", ".join(f"{n} = {v}" for n, v in k.params.items()) + ">"
        args = [f"{n}: {a.type}" for n, a in k.args]
        head = f"kernel {k.kernel_name}{params}(" + ", ".join(args) + ")"
        if len(head) <= 100:
            self.lines.append(head)
        else:
            self.lines.append(f"kernel {k.kernel_name}{params}(")
            self.lines += [f"    {a}," for a in args]
            self.lines.append(")")
        if k.where.data:
            self.lines.append("  where " + ", ".join(str(w.data) for w in k.where.data))
        grid = ", ".join(str(g.data) for g in k.grid.data)
        self.lines.append(f"  target {k.target.data} grid({grid}) {k.warp_unit.data}({k.num_warps.data})")
        self.open_block(0, "{", k, 0, statement=False)
        self.scopes.append(_Scope("kernel"))
        for n, a in k.args:
            self.scopes[-1].names[n] = a
            self.names[a] = n
        self.block(k.body.block, 1)
        self.scopes.pop()
        self.close_block(0, k, 0)
        if self.comments:
            self.lines += self.program.footer_comments
        return "\n".join(self.lines) + "\n"

    # ---- blocks and statements ----------------------------------------------------------------

    def block(self, block: Block, depth: int, tail: Sequence[tuple[str, SSAValue]] = ()) -> None:
        """Print a block; `tail` names that must hold given values at its end (carried values
        and branch results)."""
        ops = [op for op in block.ops if not isinstance(op, st.YieldOp)]
        pending: list[Operation] = []
        for op in ops:
            consumed = self.try_inline_operands(op, pending)
            if consumed is not None:
                del pending[len(pending) - len(consumed) :]
            if self.inlinable(op, block):
                pending.append(op)
                continue
            for p in pending:
                self.flush(p, depth)
            pending.clear()
            self.statement(op, depth)
        for p in pending:
            self.flush(p, depth)
        self.assign_all(depth, [(name, value) for name, value in tail if self.lookup(name) is not value])

    def assign_all(self, depth: int, moves: list[tuple[str, SSAValue]]) -> None:
        """`name = value` for every pair, as one parallel assignment: a name is not overwritten
        while another pair still reads the value it holds (`a, b = b, a` takes a temporary)."""
        sources = {name: self.name_of(value) for name, value in moves}
        todo = list(moves)
        while todo:
            blocked = {sources[n] for n, _ in todo}
            ready = next(((n, v) for n, v in todo if n not in blocked or sources[n] == n), None)
            if ready is None:  # a cycle: save one value under a fresh name first
                name, value = todo[0]
                temp = self.fresh()
                self.line(depth, f"{temp} = {sources[name]}")
                self.scopes[-1].names[temp] = value
                self.scopes[-1].record(temp)
                for n, _ in todo:
                    if sources[n] == sources[name]:
                        sources[n] = temp
                continue
            todo.remove(ready)
            name, value = ready
            self.line(depth, f"{name} = {sources[name]}")
            self.scopes[-1].names[name] = value
            self.scopes[-1].record(name)

    def inlinable(self, op: Operation, block: Block) -> bool:
        # an allocation is a declaration and an op with regions a block: both are statements
        if allocates(op) or op.regions or len(op.results) != 1:
            return False
        r = op.results[0]
        if r.name_hint is not None or not r.has_one_use():
            return False
        use = next(iter(r.uses))
        user = use.operation
        if isinstance(user, st.YieldOp) or isinstance(user, st.ForOp) and use.index >= 3:
            return False  # carried values are bound to names
        return user.parent_block() is block

    def expected(self, op: Operation, pending: set[Operation]) -> list[Operation] | None:
        """The ops the parser emits for `op`'s inlined operands, in order."""
        seq: list[Operation] = []
        for call in operand_calls(op):
            lits: list[Operation] = []
            for idx, _, _ in call:
                owner = op.operands[idx].owner
                if isinstance(owner, Operation) and owner in pending:
                    if _is_literal_op(owner):
                        lits.append(owner)
                    else:
                        sub = self.expected(owner, pending)
                        if sub is None:
                            return None
                        seq += sub + [owner]
            seq += lits
        return seq

    def try_inline_operands(self, op: Operation, pending: list[Operation]) -> list[Operation] | None:
        if not pending:
            return None
        candidates = {p for p in pending if next(iter(p.results[0].uses)).operation is op}
        if not candidates:
            return None
        # Every pending op reachable from `op` through pending operands belongs to its tree.
        tree: set[Operation] = set()
        stack = list(candidates)
        while stack:
            p = stack.pop()
            if p in tree:
                continue
            tree.add(p)
            for v in p.operands:
                o = v.owner
                if isinstance(o, Operation) and o in pending and o not in tree:
                    if next(iter(o.results[0].uses)).operation is p:
                        stack.append(o)
        seq = self.expected(op, tree)
        if seq is None or len(seq) == 0 or pending[-len(seq) :] != seq:
            return None
        self.inlined.update(seq)
        return seq

    def flush(self, op: Operation, depth: int) -> None:
        """A pending expression that no user folded in becomes a named statement."""
        text = self.expr(op, P_ATOM - 10)[0]
        name = self.bind(op.results[0], self.pos[op])
        self.emit(depth, f"{name} = {text}", op)

    def statement(self, op: Operation, depth: int) -> None:
        at = self.pos[op]
        if isinstance(op, st.ForOp):
            self.for_stmt(op, depth)
            return
        if isinstance(op, st.IfOp):
            self.if_stmt(op, depth, "if")
            return
        if isinstance(op, st.RoleOp):
            unit_ids = ", ".join(str(i) for i in op.id_list)
            regs = f" regs({op.regs.data})" if op.regs.data else ""
            self.open_block(depth, f"role {op.name_text} {op.unit.data}({unit_ids}){regs} {{", op, 0)
            self.scopes.append(_Scope("role"))
            self.block(op.body.block, depth + 1)
            self.scopes.pop()
            self.close_block(depth, op, 0)
            return
        text = self.expr(op, 0)[0]
        if not op.results:
            self.emit(depth, text, op)
            return
        # results nobody uses: an op kept for its effect (an atomic, a wgmma) is a bare statement
        if (
            all(r.first_use is None for r in op.results)
            and all(r.name_hint is None for r in op.results)
            and has_effect(op)
        ):
            self.emit(depth, text, op)
            return
        names = [self.bind(r, at) for r in op.results]
        self.emit(depth, f"{', '.join(names)} = {text}", op)

    def for_stmt(self, op: st.ForOp, depth: int) -> None:
        at = self.pos[op]
        body = op.body.block
        # values the `for` line reads by name; the lines that set up carried names come first
        # and must not overwrite them
        header_reads = self.reads(op, (0, 1, 2))
        carried: list[str] = []
        for init, arg, res in zip(op.inits, body.args[1:], op.res, strict=True):
            name = arg.name_hint or res.name_hint
            current = self.lookup(name) if name else None
            ok = (
                name
                and name.isidentifier()
                and name not in RESERVED
                and name not in self.static_names
                and not name.startswith("__")
                and name not in carried
                and name not in self.scopes[-1].forbidden
                and (
                    current is None or current is init or (self.last_use(current) <= at and current not in header_reads)
                )
                and (self.last_use(init) <= at or self.names.get(init) != name)
                # rebinding a name of an enclosing loop or branch here would carry it out of
                # that one too
                and not (
                    self.visible_outside(name)
                    and name not in self.scopes[-1].allowed
                    and name not in self.scopes[-1].names
                )
            )
            if not ok or name is None:
                name = self.fresh()
            carried.append(name)
        self.assign_all(depth, [(n, v) for n, v in zip(carried, op.inits, strict=True) if self.lookup(n) is not v])
        lo, hi, step = self.operand_texts(op)[:3]
        iv = body.args[0]
        rng = f"{lo} .. {hi}"
        step_op = op.step.owner
        if not (step_op in self.inlined and isinstance(step_op, tl.ConstOp) and step_op.value.data == "1"):
            rng += f" step {step}"
        hints = ""
        if op.stages is not None:
            hints += f" pipeline(stages = {op.stages.data})"
        if op.warp_specialize is not None:
            hints += " warp_specialize"
        self.scopes.append(_Scope("for", allowed=set(carried)))
        preferred = iv.name_hint if iv.name_hint and iv.name_hint not in carried else self.fresh()
        iv_name = self.bind(iv, at, preferred, shadow=True)
        self.open_block(depth, f"for {iv_name} in {rng}{hints} {{", op, 0)
        body_start = len(self.lines)
        for name, arg in zip(carried, body.args[1:], strict=True):
            self.scopes[-1].names[name] = arg
            self.names[arg] = name
        yields = list(body.last_op.operands) if isinstance(body.last_op, st.YieldOp) else []
        self.block(body, depth + 1, list(zip(carried, yields, strict=True)))
        scope = self.scopes.pop()
        if [n for n in scope.textual if n in carried] != carried:
            # The parser carries the names the body assigns, in order of first assignment: a
            # value passed through unchanged, or assigned out of order, is named up front.
            self.lines[body_start:body_start] = [INDENT * (depth + 1) + f"{n} = {n}" for n in carried]
            scope.textual.put_first(carried)
        self.close_block(depth, op, 0)
        outer = self.scopes[-1]
        for name in scope.textual:
            # in the body, the loop variable's name is the loop variable's own
            if name != iv_name:
                outer.textual.add(name)
        for name, res in zip(carried, op.res, strict=True):
            outer.names[name] = res
            outer.record(name)
            self.names[res] = name

    def if_stmt(self, op: st.IfOp, depth: int, keyword: str) -> None:
        mark = (len(self.lines), self.block_start, self.fresh_counter, set(self.taken_hints))
        if not self.try_if_stmt(op, depth, keyword, fresh_results=False):
            # The results' order could not be kept with their own names: print the `if` again
            # with fresh names, which only the branches' last lines assign, in order.
            del self.lines[mark[0] :]
            self.block_start, self.fresh_counter, self.taken_hints = mark[1:]
            printed = self.try_if_stmt(op, depth, keyword, fresh_results=True)
            assert printed, "fresh result names keep the order"

    def try_if_stmt(self, op: st.IfOp, depth: int, keyword: str, fresh_results: bool) -> bool:
        at = self.pos[op]
        results: list[str] = []
        for res in op.res:
            name = res.name_hint
            current = self.lookup(name) if name else None
            # uses of the old value inside the branches come before the result is bound
            if fresh_results or not (
                name
                and name.isidentifier()
                and name not in RESERVED
                and name not in self.static_names
                and name not in results
                and name not in self.scopes[-1].forbidden
                and (current is None or self.last_use(current) <= self.end.get(op, at))
                and not (
                    self.visible_outside(name)
                    and name not in self.scopes[-1].allowed
                    and name not in self.scopes[-1].names
                )
            ):
                name = self.fresh()
            results.append(name)
        cond = self.operand_texts(op)[0]
        self.open_block(depth, f"{keyword} {cond} {{", op, 0)
        then_start = len(self.lines)
        branches = []
        for region in (op.then_body, op.else_body):
            block = region.block
            yields = list(block.last_op.operands) if isinstance(block.last_op, st.YieldOp) else []
            branches.append((block, yields))
        self.scopes.append(_Scope("if", allowed=set(results), sibling=branches[1][0]))
        self.block(branches[0][0], depth + 1, list(zip(results, branches[0][1], strict=True)))
        then_scope = self.scopes.pop()
        else_block, else_yields = branches[1]
        needs_else = (
            any(o for o in else_block.ops if not isinstance(o, st.YieldOp))
            or any(self.lookup(n) is not v for n, v in zip(results, else_yields, strict=True))
            or self.has_block_comments(op, 1)
        )
        else_scope = _Scope("if", allowed=set(results))
        if needs_else:
            self.close_block(depth, op, 0, "} else {")
            # Names local to the then-branch must not reappear here: a name assigned in both
            # branches becomes a result of the `if`.
            else_scope.forbidden = set(then_scope.names) - set(results)
            self.scopes.append(else_scope)
            self.block(else_block, depth + 1, list(zip(results, else_yields, strict=True)))
            self.scopes.pop()
        if self.parsed_results(then_scope, else_scope) != results:
            # The parser's results are the names a branch assigns that were visible before it
            # (or that both branches assign), in order of first assignment: name them up front
            # when they all were visible.
            if any(self.lookup(n) is None for n in results):
                return False
            self.lines[then_start:then_start] = [INDENT * (depth + 1) + f"{n} = {n}" for n in results]
            then_scope.assigned.put_first(results)
            then_scope.textual.put_first(results)
        self.close_block(depth, op, 1 if needs_else else 0)
        outer = self.scopes[-1]
        for name in [*then_scope.textual, *else_scope.textual]:
            outer.textual.add(name)
        for name, res in zip(results, op.res, strict=True):
            outer.names[name] = res
            outer.record(name)
            self.names[res] = name
        return True

    def reads(self, op: Operation, indices) -> set[SSAValue]:
        """The values that the printed operands `indices` of `op` refer to by name (through
        the expressions folded into them)."""
        out: set[SSAValue] = set()
        stack = [op.operands[i] for i in indices]
        while stack:
            v = stack.pop()
            owner = v.owner
            if isinstance(owner, Operation) and owner in self.inlined:
                stack += list(owner.operands)
            else:
                out.add(v)
        return out

    def parsed_results(self, then_scope: _Scope, else_scope: _Scope) -> list[str]:
        """The results the parser gives an `if` whose branches assign these names."""
        out: dict[str, None] = {}  # an ordered set
        for n in [*then_scope.assigned, *else_scope.assigned]:
            if n in out:
                continue
            if self.lookup(n) is not None or (n in then_scope.assigned and n in else_scope.assigned):
                out[n] = None
        return list(out)

    # ---- expressions ------------------------------------------------------------------------

    def operand_texts(self, op: Operation) -> list[str]:
        texts = [""] * len(op.operands)
        for call in operand_calls(op):
            group_dtype = self.group_dtypes(op, call)
            for idx, group, _ in call:
                texts[idx] = self.operand_text(op, idx, group_dtype.get(group), P_ATOM)[0]
        return texts

    def group_dtypes(self, op: Operation, call) -> dict[int, str | None]:
        """The dtype the parser gives bare literals of each group of a call."""
        out: dict[int, str | None] = {}
        groups: dict[int, list[int]] = {}
        wants: dict[int, str | None] = {}
        for idx, g, want in call:
            groups.setdefault(g, []).append(idx)
            wants[g] = want
        for g, idxs in groups.items():
            partner = None
            lits = []
            for i in idxs:
                owner = op.operands[i].owner
                if isinstance(owner, tl.ConstOp) and owner in self.inlined:
                    lits.append(owner)
                elif partner is None:
                    v = op.operands[i]
                    partner = dtype_of(v.type) if isinstance(v.type, ScalarType | TileType) else None
            if partner is not None:
                out[g] = partner
            elif wants[g] is not None:
                out[g] = wants[g]
            else:
                kinds = {_literal_kind(c) for c in lits}
                out[g] = "f32" if "f" in kinds else ("i1" if kinds == {"b"} else "i32")
                # a group of literals all of one other dtype: the first is printed typed and
                # gives the others its dtype
                dts = {c.dtype for c in lits}
                if len(dts) == 1 and out[g] not in dts:
                    self.typed_first.add(lits[0])
                    out[g] = lits[0].dtype
        return out

    def operand_text(self, op: Operation, idx: int, literal_dtype: str | None, prec: int) -> tuple[str, int]:
        value = op.operands[idx]
        owner = value.owner
        if isinstance(owner, Operation) and owner in self.inlined:
            if isinstance(owner, tl.ConstOp):
                return self.literal(owner, literal_dtype), P_UNARY if owner.value.data.startswith("-") else P_ATOM
            return self.expr(owner, prec)
        return self.name_of(value), P_ATOM

    def literal(self, op: tl.ConstOp, ctx: str | None) -> str:
        text = op.value.data
        if op.dtype == ctx and op not in self.typed_first:
            return text
        return f"{op.dtype}({text})"

    def wrap(self, text: str, prec: int, need: int) -> str:
        return f"({text})" if prec < need else text

    def sub(self, op: Operation, idx: int, need: int, literal_dtype: str | None) -> str:
        text, prec = self.operand_text(op, idx, literal_dtype, need)
        return self.wrap(text, prec, need)

    def expr(self, op: Operation, need: int) -> tuple[str, int]:
        """Text of an op's expression and its precedence."""
        calls = operand_calls(op)
        dts: dict[int, str | None] = {}
        for call in calls:
            g = self.group_dtypes(op, call)
            for idx, group, _ in call:
                dts[idx] = g.get(group)
        args = [lambda i=i: self.sub(op, i, 0, dts.get(i)) for i in range(len(op.operands))]

        if isinstance(op, tl.ConstOp):
            return self.literal(op, None if op.dtype not in ("i32", "f32", "i1") else op.dtype), P_ATOM
        if isinstance(op, tl.SymValueOp):
            return op.symbol.data, P_ATOM
        if isinstance(op, tl.ProgramIdOp | tl.NumProgramsOp):
            fname = "program_id" if isinstance(op, tl.ProgramIdOp) else "num_programs"
            return f"{fname}({op.axis.data})", P_ATOM
        if isinstance(op, st.RoleRankOp):
            return "role_rank()", P_ATOM
        if isinstance(op, tl.ArangeOp):
            return f"arange({op.start.data}, {op.end.data})", P_ATOM
        if isinstance(op, tl.ZerosOp):
            return f"zeros({_type_text(op.res.type)})", P_ATOM
        if isinstance(op, tl.FullOp):
            return f"full({_type_text(op.res.type)}, {args[0]()})", P_ATOM
        if isinstance(op, tl.BinaryOp):
            fn = op.fn.data
            if fn in _INFIX:
                sym, prec = _INFIX[fn]
                # `(k / S) % 2` reads better than the equivalent `k / S % 2`
                left_need = prec + 1 if fn == "rem" else prec
                return f"{self.sub(op, 0, left_need, dts[0])} {sym} {self.sub(op, 1, prec + 1, dts[1])}", prec
            return f"{fn}({args[0]()}, {args[1]()})", P_ATOM
        if isinstance(op, tl.CompareOp):
            sym = tl.CMP_PREDICATES[op.predicate.data]
            return f"{self.sub(op, 0, P_CMP + 1, dts[0])} {sym} {self.sub(op, 1, P_CMP + 1, dts[1])}", P_CMP
        if isinstance(op, tl.UnaryOp):
            fn = op.fn.data
            if fn == "neg":
                owner = op.operand.owner
                if isinstance(owner, tl.ConstOp) and owner in self.inlined:
                    # `-1` would read back as the literal -1, not as a negation
                    return f"-{owner.dtype}({owner.value.data})", P_UNARY
                return f"-{self.sub(op, 0, P_UNARY, dts[0])}", P_UNARY
            if fn == "not":
                return f"~{self.sub(op, 0, P_UNARY, dts[0])}", P_UNARY
            return f"{fn}({args[0]()})", P_ATOM
        if isinstance(op, tl.WhereOp):
            return f"where({args[0]()}, {args[1]()}, {args[2]()})", P_ATOM
        if isinstance(op, tl.RandOp):
            return f"{op.fn.data}({args[0]()}, {args[1]()})", P_ATOM
        if isinstance(op, tl.CastOp):
            return f"cast<{dtype_of(op.res.type)}>({args[0]()})", P_ATOM
        if isinstance(op, tl.ExpandDimsOp):
            base = self.sub(op, 0, P_POSTFIX, dts[0])
            subs = [":"] * len(op.res.type.shape.data)
            subs[op.axis.data] = "None"
            return f"{base}[{', '.join(subs)}]", P_POSTFIX
        if isinstance(op, tl.BroadcastOp | tl.ReshapeOp):
            fname = "broadcast" if isinstance(op, tl.BroadcastOp) else "reshape"
            shape = ", ".join(str(d.data) for d in op.res.type.shape.data)
            return f"{fname}({args[0]()}, [{shape}])", P_ATOM
        if isinstance(op, tl.TransOp):
            return f"trans({args[0]()})", P_ATOM
        if isinstance(op, tl.ReduceOp | tl.ArgReduceOp):
            return f"{op.fn.data}({args[0]()}, axis = {op.axis.data})", P_ATOM
        if isinstance(op, tl.ScanOp):
            rev = ", reverse = 1" if op.reverse.data else ""
            return f"{op.fn.data}({args[0]()}, axis = {op.axis.data}{rev})", P_ATOM
        if isinstance(op, tl.TopKOp):
            largest = "" if op.largest.data else ", largest = 0"
            return f"topk({args[0]()}, k = {op.k.data}{largest})", P_ATOM
        if isinstance(op, tl.GatherOp):
            return f"gather({args[0]()}, {args[1]()}, axis = {op.axis.data})", P_ATOM
        if isinstance(op, tl.DotOp):
            inner = ", ".join(a() for a in args)
            if op.tf32:
                inner += ", precision = tf32"
            return f"dot<{op.acc_dtype.data}>({inner})", P_ATOM
        if isinstance(op, tl.LoadOp):
            text = self.access(op, op.mem, op.access.data, "indices", dts)
            if op.mask is not None:
                text += f", mask = {self.sub(op, _index_of(op, op.mask), 0, dts[_index_of(op, op.mask)])}"
            if op.other is not None:
                text += f", other = {self.sub(op, _index_of(op, op.other), 0, dts[_index_of(op, op.other)])}"
            if op.evict is not None:
                text += f", evict = {op.evict.data}"
            return f"load({text})", P_ATOM
        if isinstance(op, tl.StoreOp | tl.AtomicOp):
            fname = "store" if isinstance(op, tl.StoreOp) else f"atomic_{op.fn.data}"
            text = self.access(op, op.mem, op.access.data, "indices", dts)
            vi = _index_of(op, op.value)
            text += f", {self.sub(op, vi, 0, dts[vi])}"
            if op.mask is not None:
                mi = _index_of(op, op.mask)
                text += f", mask = {self.sub(op, mi, 0, dts[mi])}"
            return f"{fname}({text})", P_ATOM
        if isinstance(op, ex.SmemAllocOp):
            t = op.res.type
            dims = ", ".join(str(d.data) for d in t.shape.data)
            sw = f", swizzle = {t.swizzle.data}" if t.swizzle.data else ""
            return f"smem({t.dtype.data}[{dims}]{sw})", P_ATOM
        if isinstance(op, ex.MBarrierAllocOp):
            return f"mbarrier({op.res.type.size.data}, count = {op.count.data})", P_ATOM
        if isinstance(op, ex.ExpectOp):
            return f"expect({self.bar(op, dts)}, bytes = {self.sub(op, 2, 0, dts[2])})", P_ATOM
        if isinstance(op, ex.ArriveOp):
            count = f", count = {op.count.data}" if op.count.data != 1 else ""
            return f"arrive({self.bar(op, dts)}{count})", P_ATOM
        if isinstance(op, ex.WaitOp):
            return f"wait({self.bar(op, dts)}, parity = {self.sub(op, 2, 0, dts[2])})", P_ATOM
        if isinstance(op, ex.TmaLoadOp):
            src = self.access(op, op.src, op.src_access.data, "src_indices", dts)
            dst = self.access(op, op.dst, op.dst_access.data, "dst_indices", dts)
            bi = _index_of(op, op.bar_index)
            return f"tma.load({src}, {dst}, signal = {self.name_of(op.bar)}[{self.sub(op, bi, 0, dts[bi])}])", P_ATOM
        if isinstance(op, ex.TmaStoreOp):
            src = self.access(op, op.src, op.src_access.data, "src_indices", dts)
            dst = self.access(op, op.dst, op.dst_access.data, "dst_indices", dts)
            return f"tma.store({src}, {dst})", P_ATOM
        if isinstance(op, ex.CpAsyncOp):
            src = self.access(op, op.src, op.src_access.data, "src_indices", dts)
            dst = self.access(op, op.dst, op.dst_access.data, "dst_indices", dts)
            mask = ""
            if op.mask is not None:
                mi = _index_of(op, op.mask)
                mask = f", mask = {self.sub(op, mi, 0, dts[mi])}"
            return f"cp.async({src}, {dst}{mask})", P_ATOM
        if isinstance(op, ex.WgmmaOp):
            if op.a_in_registers:
                a = self.sub(op, _index_of(op, op.a), 0, dts[_index_of(op, op.a)])
            else:
                a = self.access(op, op.a, op.a_access.data, "a_indices", dts)
            b = self.access(op, op.b, op.b_access.data, "b_indices", dts)
            a = f"trans({a})" if op.is_trans_a else a
            b = f"trans({b})" if op.is_trans_b else b
            ai = _index_of(op, op.acc)
            return f"wgmma({a}, {b}, {self.sub(op, ai, 0, dts[ai])})", P_ATOM
        if isinstance(op, ex.SizeofOp):
            return f"sizeof({self.access(op, op.mem, op.access.data, 'indices', dts)})", P_ATOM
        if isinstance(op, ex.ConvertLayoutOp):
            return f"convert_layout({args[0]()}, {op.layout.data})", P_ATOM
        simple: dict[type[ex.TmaStoreWaitOp | ex.CpAsyncWaitOp | ex.WgmmaWaitOp], str] = {
            ex.TmaStoreWaitOp: "tma.store_wait",
            ex.CpAsyncWaitOp: "cp.async.wait",
            ex.WgmmaWaitOp: "wgmma.wait",
        }
        for cls, fname in simple.items():
            if isinstance(op, cls):
                return f"{fname}({op.pending.data})", P_ATOM
        nullary = {ex.CpAsyncCommitOp: "cp.async.commit", ex.CtaBarrierOp: "barrier", ex.FenceAsyncOp: "fence.async"}
        for kind, fname in nullary.items():
            if isinstance(op, kind):
                return f"{fname}()", P_ATOM
        raise ValueError(f"the printer does not know {op.name}")

    def bar(self, op: ex.ExpectOp | ex.ArriveOp | ex.WaitOp, dts) -> str:
        return f"{self.name_of(op.bar)}[{self.sub(op, 1, 0, dts.get(1))}]"

    def access(self, op: Operation, mem: SSAValue, access: Access, field_name: str, dts) -> str:
        values = list(getattr(op, field_name))
        call = _indices_call(op, field_name)
        parts = []
        for (idx, _, _), dim in zip(call, access.dims, strict=True):
            if dim is None:
                parts.append(self.sub(op, idx, 0, dts.get(idx)))
                continue
            owner = op.operands[idx].owner
            if (
                isinstance(owner, tl.ConstOp)
                and owner in self.inlined
                and owner.value.data == "0"
                and dts.get(idx) == owner.dtype
            ):
                parts.append(f"0 : {dim}")
                continue
            start = self.sub(op, idx, P_ADD, dts.get(idx))
            parts.append(f"{start} : {start} + {dim.render(3)}")
        _ = values
        return f"{self.name_of(mem)}[{', '.join(parts)}]"


def _ancestors(op: Operation) -> Iterator[Operation]:
    parent = op.parent_op()
    while parent is not None:
        yield parent
        parent = parent.parent_op()


def _type_text(t) -> str:
    return str(t)


def iter_lines(text: str) -> Iterator[str]:  # pragma: no cover - convenience
    yield from text.splitlines()


_ = (GlobalType, sx)
