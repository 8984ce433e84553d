"""From the lark syntax tree to dialect ops: names, literals, calls, loops and roles.

The walk builds ops through `kir.builder.Builder`. Two rules fix the order of the ops it emits,
which the printer relies on to print expressions back inline:
- the operands of an op are built left to right, except that bare literals are built after the
  other operands (a literal takes its dtype from them: `x * 2.0` is bf16 when `x` is);
- every op is emitted right after its operands.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeGuard, cast

from lark import Token, Tree
from xdsl.ir import Operation, SSAValue

from kir import symexpr as sx
from kir.builder import Builder
from kir.diagnostics import Edit, KirError, Span, apply_edits
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
    dtype_of,
    shape_of,
    shape_text,
    smem,
    tile_type,
)
from kir.dtypes import DTYPES
from kir.fixes import with_edits
from kir.names import suggest
from kir.program import Program
from kir.spans import set_block_comments, set_comments, span_of
from kir.syntax import Node, TreeReader, call_name, parse_tree

_BINARY_TREES = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "div": "div",
    "rem": "rem",
    "bin_and": "and",
    "bin_or": "or",
    "bin_xor": "xor",
}
_SHIFTS = {"<<": "shl", ">>": "shr"}
_CMP = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
_LITERALS = ("int_lit", "float_lit", "inf_lit", "nan_lit", "true_lit", "false_lit", "typed_lit")
_UNARY_CALLS = tuple(f for f in tl.UNARY_FNS if f not in ("neg", "not"))


# Set while an edited text is read to check a fix: the errors found then need no fixes.
_CHECKING_FIX: ContextVar[bool] = ContextVar("checking_fix", default=False)


def lower_tree(tree: Tree, comments: list[Token], text: str, file: str) -> Program:
    walker = _Walker(text, file)
    try:
        program = walker.kernel(tree.children[0])
    except KirError as err:
        if _CHECKING_FIX.get():
            raise
        raise KirError([with_edits(d, tree, text, _reads_with(text, file)) for d in err.diagnostics]) from None
    walker.attach_comments(program, comments)
    program.source = text
    return program


def _reads_with(text: str, file: str) -> Callable[[tuple[Edit, ...]], bool]:
    """Whether `text` with the edits made reads without error."""

    def reads(edits: tuple[Edit, ...]) -> bool:
        token = _CHECKING_FIX.set(True)
        try:
            edited = apply_edits(text, edits)
            lower_tree(*parse_tree(edited, file), edited, file)
        except Exception:  # noqa: BLE001 - any failure to read it: the fix does not hold
            return False
        finally:
            _CHECKING_FIX.reset(token)
        return True

    return reads


class _Walker(TreeReader):
    def __init__(self, text: str, file: str):
        super().__init__(text, file)
        self.builder: Builder | None = None
        # Where statements and blocks are in the text, for placing comments.
        self.stmt_lines: list[_StmtLines] = []
        self.block_lines: list[_BlockLines] = []
        self.open_blocks: list[int] = []  # indices into block_lines, innermost last

    @property
    def b(self) -> Builder:
        """The builder of the kernel being read (set once its signature is read)."""
        assert self.builder is not None, "the kernel's body is read after its signature"
        return self.builder

    # ---- the kernel ------------------------------------------------------------------------

    def kernel(self, node: Tree) -> Program:
        name_tok = node.children[0]
        params: list[tuple[str, int]] = []
        args: list[Tree] = []
        clauses: dict[str, Tree] = {}
        body = None
        for child in node.children[1:]:
            if not isinstance(child, Tree):
                continue
            if child.data == "param_list":
                for p in child.children:
                    pname, pval = p.children
                    value = (
                        -self.integer(pval.children[0])
                        if isinstance(pval, Tree) and pval.data == "neg_int"
                        else self.integer(_tok_node(pval))
                    )
                    if any(pname == q for q, _ in params):
                        self.fail("name.duplicate", f"parameter '{pname}' is declared twice", pname)
                    params.append((str(pname), value))
            elif child.data == "arg":
                args.append(child)
            elif child.data == "block":
                body = child
            else:
                clauses[child.data] = child
        launch = clauses["launch_clause"]
        unit_tok, count_tok = launch.children
        param_names = {p for p, _ in params}
        b = Builder(
            str(name_tok),
            params=params,
            target=str(clauses["target_clause"].children[0]),
            grid=[self.static(e, param_names) for e in clauses["grid_clause"].children],
            warps=self.integer(count_tok),
            warp_unit=str(unit_tok),
            where=[self.static(e, param_names) for e in clauses.get("where_clause", Tree("w", [])).children],
            file=self.file,
        )
        self.builder = b
        for p, _ in params:
            b._check_new_name(p, self.span(node))
        for a in args:
            self.arg(a, param_names)
        self.check_symbols(clauses, param_names, node)
        b.begin(self.span(node))
        assert body is not None
        body_block = self.block(body)
        program = b.finish()
        self.own(body_block, b.kernel, 0)
        self.declaration_spans(program, node, clauses)
        return program

    def declaration_spans(self, program: Program, node: Tree, clauses: dict[str, Tree]) -> None:
        """Record where each parameter and the target, grid and launch clauses are written."""
        for child in node.children[1:]:
            if isinstance(child, Tree) and child.data == "param_list":
                for p in child.children:
                    if (span := self.span(p)) is not None:
                        program.param_spans[str(p.children[0])] = span
        target_tok = clauses["target_clause"].children[0]
        unit_tok, count_tok = clauses["launch_clause"].children
        for key, first, last in (
            ("target", target_tok, target_tok),
            ("launch", unit_tok, count_tok),
            ("grid", clauses["grid_clause"].children[0], clauses["grid_clause"].children[-1]),
        ):
            a, z = self.span(first), self.span(last)
            if a is not None and z is not None:
                end_col = z.end_col + (1 if key == "launch" else 0)  # the launch's closing ')'
                program.clause_spans[key] = Span(a.line, a.col, z.end_line, end_col, self.file)

    def arg(self, node: Tree, params: set[str]) -> None:
        name = node.children[0]
        rest = node.children[1:]
        out = False
        if rest and isinstance(rest[0], Token) and rest[0].type == "OUT":
            out = True
            rest = rest[1:]
        dtype = str(rest[0])
        dims, strides, align = [], [], 0
        for item in rest[1:]:
            if isinstance(item, Tree) and item.data == "align":
                align = self.integer(item.children[0])
                if align <= 0 or align & (align - 1):
                    self.fail("types.align", f"align({align}) is not a power of two", item)
            elif isinstance(item, Tree) and item.data == "strides":
                strides = [self.static(e, params, allow_any_name=True) for e in item.children]
            else:
                dims.append(self.static(item, params, allow_any_name=True))
        self.b.arg(str(name), dtype, dims, strides=strides, align=align, out=out, span=self.span(node))

    def check_symbols(self, clauses: dict[str, Tree], params: set[str], node: Tree) -> None:
        """Names in grid and where must be parameters or shape symbols of the arguments."""
        known = params | set(self.b.shape_symbols())
        for key in ("grid_clause", "where_clause"):
            clause = clauses.get(key)
            if clause is None:
                continue
            for e in clause.children:
                for n in (
                    e.scan_values(lambda t: isinstance(t, Token) and t.type == "NAME")
                    if isinstance(e, Tree)
                    else ([e] if isinstance(e, Token) and e.type == "NAME" else [])
                ):
                    if str(n) not in known and str(n) not in sx.FUNCS:
                        self.fail(
                            "name.undefined",
                            f"'{n}' is neither a parameter nor a shape symbol",
                            n,
                            suggest(str(n), known),
                        )

    # ---- static expressions ---------------------------------------------------------------

    def static_name(self, tok: Token, allow_any_name: bool) -> sx.SymExpr:
        """A name in a static expression: a parameter or a shape symbol of the kernel."""
        name = str(tok)
        if allow_any_name or self.builder is None:
            return sx.Sym(name)
        if self.b.is_static_name(name):
            return sx.Sym(name)
        if self.b.lookup(name) is not None:
            self.fail(
                "types.static",
                f"'{name}' is a run-time value; a static size is needed here",
                tok,
                "use a parameter or a shape symbol",
            )
        self.fail(
            "name.undefined",
            f"'{name}' is not defined",
            tok,
            suggest(name, list(self.b.params) + self.b.shape_symbols()),
        )
        raise AssertionError

    # ---- statements -------------------------------------------------------------------------

    def block(self, node: Tree) -> int:
        """Walk a `{ ... }` block; returns its index in `block_lines` (see `own`)."""
        index = len(self.block_lines)
        self.block_lines.append(_BlockLines(node.meta.line, node.meta.column, node.meta.end_line))
        self.open_blocks.append(index)
        for stmt in node.children:
            if isinstance(stmt, Tree):
                self.stmt(stmt)
        self.open_blocks.pop()
        return index

    def own(self, block: int, op, region: int) -> None:
        """Record that block `block` is region `region` of `op` (known once the op is built)."""
        self.block_lines[block].owner = op
        self.block_lines[block].region = region

    def last_op(self):
        return self.b._blocks[-1].last_op

    def stmt(self, node: Tree) -> None:
        # Whether the statement emitted an op into its block: ops are only ever appended, so the
        # last op changes exactly when one was (`len(block.ops)` walks the whole block, which
        # made parsing quadratic in the length of a block).
        block = self.b._blocks[-1]
        before = block.last_op
        kind = node.data
        if kind == "assign":
            self.assign(node)
        elif kind == "expr_stmt":
            self.expr_stmt(node.children[0])
        elif kind == "for_stmt":
            self.for_stmt(node)
        elif kind == "if_stmt":
            self.if_stmt(node)
        elif kind == "role_stmt":
            self.role_stmt(node)
        else:  # pragma: no cover - the grammar has no other statements
            self.fail("syntax.statement", f"unknown statement {kind}", node)
        if block.last_op is not before:
            container = self.open_blocks[-1] if self.open_blocks else -1
            self.stmt_lines.append(_StmtLines(node.meta.line, node.meta.end_line, self.last_op(), container))

    def assign(self, node: Tree) -> None:
        *names, value_node = node.children
        if len(names) == 1:
            value = self.expr(value_node)
            self.b.assign(str(names[0]), value, self.span(names[0]))
            return
        if not (isinstance(value_node, Tree) and value_node.data == "call" and call_name(value_node) == "topk"):
            self.fail("syntax.assign", "only topk(...) gives several values", value_node)
        op = self.call_op(value_node)
        if len(names) != len(op.results):
            self.fail("syntax.assign", f"topk gives {len(op.results)} values, {len(names)} names are bound", node)
        for n, r in zip(names, op.results, strict=True):
            self.b.assign(str(n), r, self.span(n))

    def expr_stmt(self, node: Node) -> None:
        if not (isinstance(node, Tree) and node.data == "call"):
            self.fail(
                "syntax.statement",
                "an expression alone does nothing",
                node,
                "assign it (`x = ...`) or call an op with an effect (store, wait, ...)",
            )
        self.call_op(node)

    def for_stmt(self, node: Tree) -> None:
        iv, lo, hi, *rest = node.children
        body = rest[-1]
        step_node = None
        stages = None
        ws = False
        for item in rest[:-1]:
            if item.data == "step":
                step_node = item.children[0]
            elif item.data == "pipeline_hint":
                stages = self.static(item.children[0])
            elif item.data == "warp_specialize_hint":
                ws = True
        nodes = [lo, hi] + ([step_node] if step_node is not None else [])
        vals = self.operands([(n, 0) for n in nodes], want={0: "i32"})
        lower, upper = vals[0], vals[1]
        step = vals[2] if step_node is not None else self.b.const(1, dtype_of(lower.type), self.span(node))
        for v, what in ((lower, "lower bound"), (upper, "upper bound"), (step, "step")):
            if not isinstance(v.type, ScalarType) or dtype_of(v.type) not in ("i32", "i64"):
                self.fail("types.loop-bound", f"the loop's {what} is an i32 or i64 scalar, not {v.type}", node)
        carried = [n for n in _assigned_names(body) if n != str(iv) and self._is_visible_value(n)]
        self.b.begin_for(str(iv), lower, upper, step, carried, stages=stages, warp_specialize=ws, span=self.span(node))
        body_block = self.block(body)
        self.b.end_for(self.span(node))
        self.own(body_block, self.last_op(), 0)

    def _is_visible_value(self, name: str) -> bool:
        v = self.b.lookup(name)
        return v is not None and isinstance(v.type, ScalarType | TileType)

    def if_stmt(self, node: Tree) -> None:
        cond_node, then_block, *rest = node.children
        cond = self.operands([(cond_node, 0)], want={0: "i1"})[0]
        if not isinstance(cond.type, ScalarType) or dtype_of(cond.type) != "i1":
            self.fail(
                "types.condition",
                f"the condition of `if` is an i1 scalar, not {cond.type}",
                cond_node,
                "reduce a tile mask with max(...) first",
            )
        self.b.begin_if(cond, self.span(node))
        blocks = [self.block(then_block)]
        if rest:
            self.b.begin_else()
            other = rest[0]
            if other.data == "block":
                blocks.append(self.block(other))
            else:
                self.stmt(other)  # `else if`: the inner `if` is the else branch's one statement
        self.b.end_if()
        for region, block in enumerate(blocks):
            self.own(block, self.last_op(), region)

    def role_stmt(self, node: Tree) -> None:
        name, unit, *rest = node.children
        ids = [self.integer(t) for t in rest if isinstance(t, Token) and t.type == "INT"]
        regs = 0
        body = rest[-1]
        for t in rest:
            if isinstance(t, Tree) and t.data == "role_regs":
                regs = self.integer(t.children[0])
        self.b.begin_role(str(name), str(unit), ids, regs, self.span(node))
        body_block = self.block(body)
        self.b.end_role()
        self.own(body_block, self.last_op(), 0)

    # ---- expressions ------------------------------------------------------------------------

    def is_literal(self, node: Node) -> bool:
        if isinstance(node, Tree):
            if node.data in _LITERALS:
                return True
            if node.data == "neg":
                return self.is_literal(node.children[0]) and not (
                    isinstance(node.children[0], Tree)
                    and node.children[0].data in ("typed_lit", "neg", "true_lit", "false_lit")
                )
        return False

    def literal(self, node: Tree, want: str | None) -> SSAValue:
        negate = False
        while node.data == "neg":
            negate = not negate
            node = node.children[0]
        explicit = None
        if node.data == "typed_lit":
            explicit = str(node.children[0])
            node = node.children[1]
            if node.data == "neg_value":
                negate = not negate
                node = node.children[0]
        kind = node.data
        text = {"inf_lit": "inf", "nan_lit": "nan", "true_lit": "true", "false_lit": "false"}.get(kind)
        if text is None:
            text = str(node.children[0])
        is_float = kind in ("float_lit", "inf_lit", "nan_lit")
        is_bool = text in ("true", "false")
        dtype = explicit or want or ("i1" if is_bool else "f32" if is_float else "i32")
        d = DTYPES[dtype]
        span = self.span(node)
        try:
            if is_bool:
                if d.kind != "bool":
                    self.fail("types.literal", f"{text} is an i1 literal; {dtype} is expected here", node)
                value: int | float | bool = text == "true"
            elif is_float:
                if not d.is_float:
                    self.fail(
                        "types.literal",
                        f"{text} is not an integer; {dtype} is expected here",
                        node,
                        f"write an integer or cast<{dtype}>(...)",
                    )
                value = -float(text) if negate else float(text)
            else:
                iv = self.integer(node.children[0])
                value = -iv if negate else iv
                if d.kind == "bool":
                    self.fail("types.literal", f"{text} is not a boolean; use true or false", node)
                if d.is_int and not _fits(value, dtype):
                    self.fail("types.literal", f"{value} does not fit in {dtype}", node)
        except ValueError:
            self.fail("syntax.literal", f"'{text}' is not a number", node)
        if negate and is_bool:
            self.fail("types.literal", "cannot negate a boolean literal", node)
        return self.b.const(value, dtype, span)

    def literal_group_dtype(self, literal_nodes: list[Node]) -> str:
        kinds = set()
        for n in literal_nodes:
            while isinstance(n, Tree) and n.data == "neg":
                n = n.children[0]
            lit = cast(Tree, n)  # a literal is a tree (int_lit, typed_lit, ...)
            if lit.data == "typed_lit":
                return str(lit.children[0])
            if lit.data in ("float_lit", "inf_lit", "nan_lit"):
                kinds.add("f")
            elif lit.data in ("true_lit", "false_lit"):
                kinds.add("b")
            else:
                kinds.add("i")
        if "f" in kinds:
            return "f32"
        if kinds == {"b"}:
            return "i1"
        return "i32"

    def operands(self, items: list[tuple[Node, int]], want: dict[int, str] | None = None) -> list[SSAValue]:
        """Build operands: non-literals first, left to right; then literals, each taking the
        dtype of the first non-literal of its group, else the group's wanted dtype, else the
        literals' own kind (any real makes the group f32)."""
        want = want or {}
        vals: list[SSAValue | None] = [None] * len(items)
        for i, (n, _) in enumerate(items):
            if not self.is_literal(n):
                vals[i] = self.expr(n)
        for i, (n, g) in enumerate(items):
            if vals[i] is not None:
                continue
            partner = next(
                (
                    vals[j]
                    for j, (m, h) in enumerate(items)
                    if h == g and vals[j] is not None and not self.is_literal(m)
                ),
                None,
            )
            if partner is not None and isinstance(partner.type, ScalarType | TileType):
                dtype = dtype_of(partner.type)
            elif g in want:
                dtype = want[g]
            else:
                dtype = self.literal_group_dtype([m for m, h in items if h == g and self.is_literal(m)])
            if isinstance(n, Tree) and n.data == "typed_lit":
                dtype = str(n.children[0])
            vals[i] = self.literal(cast(Tree, n), dtype)  # the values not built above are literals
        return cast(list[SSAValue], vals)  # every slot is filled: the non-literals, then the literals

    def expr(self, node: Node) -> SSAValue:
        if isinstance(node, Token):  # pragma: no cover - atoms are always wrapped
            self.fail("syntax.expr", f"unexpected {node}", node)
        kind = node.data
        span = self.span(node)
        if kind == "name":
            return self.b.value(str(node.children[0]), span)
        if self.is_literal(node):
            return self.operands([(node, 0)])[0]
        if kind in _BINARY_TREES:
            lhs, rhs = self.operands([(node.children[0], 0), (node.children[1], 0)])
            return self.b.binary(_BINARY_TREES[kind], lhs, rhs, span)
        if kind == "shift":
            lhs, rhs = self.operands([(node.children[0], 0), (node.children[2], 0)])
            return self.b.binary(_SHIFTS[str(node.children[1])], lhs, rhs, span)
        if kind == "compare":
            lhs, rhs = self.operands([(node.children[0], 0), (node.children[2], 0)])
            return self.b.compare(_CMP[str(node.children[1])], lhs, rhs, span)
        if kind == "neg":
            return self.b.unary("neg", self.expr(node.children[0]), span)
        if kind == "invert":
            return self.b.unary("not", self.expr(node.children[0]), span)
        if kind == "index":
            return self.index_expr(node)
        if kind in ("call", "cast", "dot"):
            op = self.call_op(node)
            if len(op.results) != 1:
                self.fail(
                    "call.result",
                    f"{_call_label(node)} gives {len(op.results)} values here; a single value is needed",
                    node,
                    "bind them with `a, b = ...`" if op.results else "call it as a statement",
                )
            return op.results[0]
        if kind == "list":
            self.fail("types.value", "a list is only a shape or layout argument", node)
        if kind in ("tile_type", "kwarg"):
            self.fail("syntax.expr", "a type or keyword argument is only allowed as a call argument", node)
        self.fail("syntax.expr", f"unexpected {kind}", node)
        raise AssertionError

    def subscripted(self, node: Node) -> SSAValue | None:
        """What the name of `name[...]` is bound to (None when `node` is not a subscripted name,
        or the name is not bound)."""
        if not (isinstance(node, Tree) and node.data == "index"):
            return None
        base = node.children[0]
        if not (isinstance(base, Tree) and base.data == "name"):
            return None
        return self.b.lookup(str(base.children[0]))

    def index_expr(self, node: Tree) -> SSAValue:
        """`x[:, None]` on a tile inserts axes; `a[...]` on memory needs load(...)."""
        base, *subs = node.children
        bound = self.subscripted(node)
        if bound is not None and isinstance(bound.type, GlobalType | SmemType | MBarrierType):
            what = "mbarrier" if isinstance(bound.type, MBarrierType) else "memory"
            self.fail(
                "syntax.access",
                f"'{base.children[0]}[...]' names {what}, not a value",
                node,
                "read it with load(...)" if what == "memory" else "use it in wait/arrive/expect/tma.load",
            )
        if not all(s.data in ("sub_all", "sub_newaxis") for s in subs) or not any(
            s.data == "sub_newaxis" for s in subs
        ):
            self.fail(
                "syntax.access",
                "a tile is only indexed to add axes, as in x[:, None]",
                node,
                "index memory with load(a[...]); reshape tiles with reshape(...)",
            )
        value = self.expr(base)
        rank = len(shape_of(value.type))
        if sum(s.data == "sub_all" for s in subs) != rank:
            self.fail("types.index", f"x[...] needs one ':' per dimension of the {rank}-d value", node)
        for axis, s in enumerate(subs):
            if s.data == "sub_newaxis":
                value = self.b.make(tl.ExpandDimsOp, value, axis, span=self.span(node)).res
        return value

    # ---- calls ------------------------------------------------------------------------------

    def call_op(self, node: Tree):
        """Build the op a call names; returns the op."""
        span = self.span(node)
        if node.data == "cast":
            dtype, arg = node.children
            (x,) = self.operands([(arg, 0)])
            return self.b.make(tl.CastOp, x, str(dtype), span=span)
        if node.data == "dot":
            dtype, *args = node.children
            pos, kw = self.split_args(node, args)
            self.no_kwargs(node, kw, "dot", ("precision",))
            if len(pos) not in (2, 3):
                self.fail("call.arguments", "dot<T>(a, b) or dot<T>(a, b, acc)", node)
            precision = _precision(self, kw["precision"]) if "precision" in kw else None
            vals = self.operands([(a, i) for i, a in enumerate(pos)])
            acc = vals[2] if len(vals) == 3 else None
            return self.b.make(tl.DotOp, vals[0], vals[1], str(dtype), acc, precision, span=span)
        fname = call_name(node)
        pos, kw = self.split_args(node, node.children[1:])
        handler = _CALLS.get(fname)
        if handler is None:
            self.fail(
                "call.unknown",
                f"unknown op '{fname}'",
                node,
                suggest(fname, _CALLS) or "see docs/language.md for the ops",
            )
        return handler(self, node, pos, kw, span)

    def split_args(self, node: Tree, args: list[Node]) -> tuple[list[Node], dict[str, Node]]:
        pos: list[Node] = []
        kw: dict[str, Node] = {}
        for a in args:
            if isinstance(a, Tree) and a.data == "kwarg":
                key = str(a.children[0])
                if key in kw:
                    self.fail("call.arguments", f"'{key}' is given twice", a)
                kw[key] = a.children[1]
            else:
                if kw:
                    self.fail("call.arguments", "positional arguments come before keyword arguments", a)
                pos.append(a)
        return pos, kw

    def no_kwargs(self, node, kw, what, allowed=()):
        for k in kw:
            if k not in allowed:
                extra = f"; it takes {', '.join(allowed)}" if allowed else ""
                self.fail("call.arguments", f"{what} has no argument '{k}'{extra}", kw[k])

    def arity(self, node, pos, n, usage):
        if (len(pos) not in n) if isinstance(n, tuple) else len(pos) != n:
            self.fail("call.arguments", f"usage: {usage}", node)

    def int_arg(self, node: Node, what: str) -> int:
        value = self.static(node)
        v = sx.fold(value).as_int()
        if v is None:
            self.fail("types.static", f"{what} is an integer constant", node)
        return v

    def param_arg(self, node: Node, what: str) -> sx.SymExpr:
        """A count known when the kernel is compiled: a static expression of integers and
        parameters (not shape symbols, which only the launch knows), at least 0 with the
        parameters' defaults; kept symbolic, so that a new parameter value changes it."""
        value = sx.fold(self.static(node))
        shapes = sorted(value.symbols() - set(self.b.params))
        if shapes:
            self.fail(
                "types.static",
                f"{what} depends on the shape symbol{'s' if len(shapes) > 1 else ''} {', '.join(shapes)}, known only "
                "at launch; it must fold to a constant when the kernel is compiled",
                node,
                "write it with integers and parameters",
            )
        try:
            v = value.evaluate(self.b.params)
        except ZeroDivisionError:
            self.fail("types.static", f"{what} `{value}` divides by zero", node)
        if v < 0:
            shown = f"`{value}` is {v}" if value.symbols() else f"is {v}"
            self.fail("types.static", f"{what} {shown}; it is at least 0", node)
        return value

    def tile_type_arg(self, node: Node, what: str) -> TileType:
        if not (isinstance(node, Tree) and node.data == "tile_type"):
            self.fail("call.arguments", f"{what} takes a type such as f32[BM, BN]", node)
        dtype, *dims = node.children
        if not dims:
            self.fail(
                "types.tile",
                f"{dtype}[] has no dimensions; a tile has at least one",
                node,
                f"a scalar is written {dtype}(value)",
            )
        return tile_type(str(dtype), [self.static(d) for d in dims])

    def shape_arg(self, node: Node, what: str) -> list[sx.SymExpr]:
        if not (isinstance(node, Tree) and node.data == "list"):
            self.fail("call.arguments", f"{what} takes a shape such as [BM, BN]", node)
        return [self.static(d) for d in node.children]

    def access(self, node: Node, what: str, kinds=(GlobalType, SmemType)):
        """`a[i, j0 : j0 + BN]` -> (memory value, Access, index values)."""
        if _is_trans_call(node):
            self.fail(
                "types.access",
                f"{what} takes a memory access as stored, not trans(...) of one: a transposed shared "
                "view is only a wgmma operand",
                node,
                "write wgmma(a_buf[s], trans(b_buf[s]), acc); elsewhere load the tile and transpose it: "
                "trans(load(buf[s]))",
            )
        if not (
            isinstance(node, Tree)
            and node.data == "index"
            and isinstance(node.children[0], Tree)
            and node.children[0].data == "name"
        ):
            self.fail("call.arguments", f"{what} takes a memory access such as a[i, j0 : j0 + BN]", node)
        base, *subs = node.children
        mem = self.b.value(str(base.children[0]), self.span(base))
        if not isinstance(mem.type, kinds):
            names = " or ".join(
                {GlobalType: "a global tensor", SmemType: "a shared buffer", MBarrierType: "an mbarrier"}[k]
                for k in kinds
            )
            self.fail("types.access", f"{what}: '{base.children[0]}' is not {names}", base)
        dims: list[sx.SymExpr | None] = []
        items: list[tuple[Node, int]] = []
        for i, s in enumerate(subs):
            if s.data == "sub_index":
                dims.append(None)
                items.append((s.children[0], i))
            elif s.data == "sub_slice":
                start, end = s.children
                dims.append(self.slice_extent(start, end, s))
                items.append((start, i))
            elif s.data == "sub_all":
                if any(t.data != "sub_all" for t in subs[i:]):
                    self.fail("syntax.access", "':' may only stand for trailing whole dimensions", s)
                break
            else:
                self.fail("syntax.access", "None adds an axis to a tile, not to memory", s)
        want = {i: "i32" for i in range(len(items))}
        values = self.operands(items, want)
        return mem, Access(tuple(dims)), values

    def no_memory_trans(self, node: Node, arg: Node) -> None:
        """`trans(buf[s])` of memory outside wgmma: name where it is allowed."""
        bound = self.subscripted(arg)
        if bound is None or not isinstance(bound.type, GlobalType | SmemType):
            return
        base = cast(Tree, arg).children[0]  # a subscripted name: name[...]
        kind = "a shared view" if isinstance(bound.type, SmemType) else "global memory"
        self.fail(
            "types.access",
            f"trans of {kind} ('{base.children[0]}[...]') is only allowed as an operand of wgmma, "
            "as in wgmma(a_buf[s], trans(b_buf[s]), acc)",
            node,
            "to transpose a tile elsewhere, load it first: trans(load(buf[s]))",
        )

    def slice_extent(self, start: Node, end: Node, node: Node) -> sx.SymExpr:
        if isinstance(end, Tree) and end.data == "add" and _same_tree(end.children[0], start):
            return self.static(end.children[1])
        try:
            s = self.static(start)
        except KirError:
            self.fail(
                "syntax.slice",
                "a slice is written `start : start + EXTENT` with a static extent",
                node,
                "e.g. a[m0 : m0 + BM]",
            )
        return sx.fold(sx.Bin("-", self.static(end), s))

    def barrier_ref(self, node: Node, what: str) -> tuple[SSAValue, SSAValue]:
        mem, access, values = self.access(node, what, kinds=(MBarrierType,))
        if len(values) != 1 or access.dims != (None,):
            self.fail("types.access", f"{what}: name one mbarrier, as in full[s]", node)
        return mem, values[0]

    # ---- comments ---------------------------------------------------------------------------

    def attach_comments(self, program: Program, comments: list[Token]) -> None:
        """Give every comment a place the printer puts it back in:
        - before the kernel: the file's header; after it (or on its closing line): the footer;
        - after code on a line: trailing the innermost statement that ends on that line, else
          after the `{` of the innermost block that opens on it;
        - otherwise (on its own line, or inside a statement that spans lines): before the next
          statement of the innermost block around it, else at the end of that block; in the
          signature, the header.
        A blank line before a statement (or its comments), or before a block's closing
        comments, is kept too."""
        kernel_span = span_of(program.kernel)
        first_line, last_line = (kernel_span.line, kernel_span.end_line) if kernel_span else (1, 1)
        lines = self.text.split("\n")  # lines as lark counts them (not str.splitlines)
        stmts = self.stmt_lines
        blocks = self.block_lines
        # Indexes over statements and blocks, so that placing every comment takes time linear
        # in the program rather than a scan of all statements per comment.
        ending = _ending_statements(stmts)
        opening = _opening_blocks(blocks)
        # lark places every token it reads, comments included: their lines are never None
        around = _innermost_blocks(blocks, sorted({cast(int, c.line) for c in comments}))
        following = _Following(stmts)
        leading: dict[int, list[tuple[int, str]]] = {}
        trailing: dict[int, str] = {}
        ends: dict[int, list[tuple[int, str]]] = {}
        for c in comments:
            text, line = str(c), cast(int, c.line)
            if line < first_line:
                program.header_comments.append(text)
                continue
            if line > last_line:
                program.footer_comments.append(text)
                continue
            own_line = lines[line - 1][: cast(int, c.column) - 1].strip() == ""
            if not own_line:
                if line in ending:
                    trailing[ending[line]] = text
                    continue
                if line in opening:
                    blocks[opening[line]].head = text
                    continue
                if line == last_line:
                    program.footer_comments.append(text)
                    continue
            block = around.get(line)
            if block is None:
                program.header_comments.append(text)  # in the signature
                continue
            after = following.first_after(block, line)
            if after is not None:
                leading.setdefault(after, []).append((line, text))
            else:
                ends.setdefault(block, []).append((line, text))

        def blank_before(line: int) -> bool:
            return line >= 2 and lines[line - 2].strip() == ""

        for i, stmt in enumerate(stmts):
            lead = leading.get(i, [])
            top = lead[0][0] if lead else stmt.first
            set_comments(stmt.op, [t for _, t in lead], trailing.get(i), blank_before(top))
        for i, b in enumerate(blocks):
            end = ends.get(i, [])
            if b.owner is not None:
                set_block_comments(
                    b.owner, b.region, b.head, [t for _, t in end], bool(end) and blank_before(end[0][0])
                )


def _ending_statements(stmts: list[_StmtLines]) -> dict[int, int]:
    """For each line, the statement a comment at its end trails: of the statements that end on
    the line, the one that starts last (the first of those that start on the same line)."""
    best: dict[int, int] = {}
    for i, s in enumerate(stmts):
        j = best.get(s.last)
        if j is None or s.first > stmts[j].first:
            best[s.last] = i
    return best


def _opening_blocks(blocks: list[_BlockLines]) -> dict[int, int]:
    """For each line, the block whose `{` is the rightmost on it."""
    best: dict[int, int] = {}
    for i, b in enumerate(blocks):
        j = best.get(b.open_line)
        if j is None or b.open_col > blocks[j].open_col:
            best[b.open_line] = i
    return best


def _innermost_blocks(blocks: list[_BlockLines], lines: list[int]) -> dict[int, int]:
    """For each of `lines` (ascending), the block around it that opens last (by line, then
    column), if any: a sweep over the lines, with the blocks opened so far in a heap."""
    # blocks are listed in the order of their `{` in the text
    order = sorted(range(len(blocks)), key=lambda i: (blocks[i].open_line, blocks[i].open_col))
    out: dict[int, int] = {}
    heap: list[tuple[int, int, int]] = []  # (-open_line, -open_col, index): the latest on top
    k = 0
    for line in lines:
        while k < len(order) and blocks[order[k]].open_line <= line:
            b = blocks[order[k]]
            heapq.heappush(heap, (-b.open_line, -b.open_col, order[k]))
            k += 1
        # a block closed before this line is closed for every later line too
        while heap and blocks[heap[0][2]].close_line < line:
            heapq.heappop(heap)
        if heap:
            out[line] = heap[0][2]
    return out


class _Following:
    """The first statement of a block that starts after a line (the earliest listed of those
    that start on the same line)."""

    def __init__(self, stmts: list[_StmtLines]):
        by_block: dict[int, list[tuple[int, int]]] = {}
        for i, s in enumerate(stmts):
            by_block.setdefault(s.container, []).append((s.first, i))
        self.firsts: dict[int, list[int]] = {}
        self.index: dict[int, list[int]] = {}
        for block, items in by_block.items():
            items.sort()
            self.firsts[block] = [f for f, _ in items]
            self.index[block] = [i for _, i in items]

    def first_after(self, block: int, line: int) -> int | None:
        firsts = self.firsts.get(block)
        if not firsts:
            return None
        k = bisect.bisect_right(firsts, line)
        return self.index[block][k] if k < len(firsts) else None


@dataclass
class _StmtLines:
    """A statement's first and last line, the op standing for it, and the block it is in."""

    first: int
    last: int
    op: Operation
    container: int


@dataclass
class _BlockLines:
    """A `{ ... }` block's lines, the op and region it is the body of, and its `{` comment."""

    open_line: int
    open_col: int
    close_line: int
    owner: Operation | None = None
    region: int = 0
    head: str | None = None


def _fits(value: int, dtype: str) -> bool:
    d = DTYPES[dtype]
    if d.kind == "uint":
        return 0 <= value < (1 << d.bits)
    return -(1 << (d.bits - 1)) <= value < (1 << (d.bits - 1))


def _tok_node(node: Node) -> Token:
    return cast(Token, node.children[0]) if isinstance(node, Tree) else node


def _tok(node: Node) -> str:
    return str(node.children[0]) if isinstance(node, Tree) else str(node)


def _is_trans_call(node: Node) -> TypeGuard[Tree]:
    return isinstance(node, Tree) and node.data == "call" and call_name(node) == "trans"


def _call_label(node: Tree) -> str:
    return node.data if node.data in ("cast", "dot") else call_name(node)


def _same_tree(a: Node, b: Node) -> bool:
    if isinstance(a, Token) or isinstance(b, Token):
        return isinstance(a, Token) and isinstance(b, Token) and a.type == b.type and str(a) == str(b)
    return (
        a.data == b.data
        and len(a.children) == len(b.children)
        and all(_same_tree(x, y) for x, y in zip(a.children, b.children, strict=True))
    )


def _assigned_names(block: Tree) -> list[str]:
    """Names assigned anywhere in a block (nested loops and branches included), in order.
    In a nested loop's body its loop variable is another variable: assigning it does not
    assign the name outside."""
    out: dict[str, None] = {}  # an ordered set: a list's membership test made a long block quadratic
    for stmt in block.children:
        if not isinstance(stmt, Tree):
            continue
        if stmt.data == "assign":
            for n in stmt.children[:-1]:
                out.setdefault(str(n))
        elif stmt.data in ("for_stmt", "if_stmt", "role_stmt"):
            shadowed = str(stmt.children[0]) if stmt.data == "for_stmt" else None
            for sub in stmt.children:
                if isinstance(sub, Tree) and sub.data in ("block", "if_stmt"):
                    inner = _assigned_names(sub if sub.data == "block" else Tree("block", [sub]))
                    for n in inner:
                        if n != shadowed:
                            out.setdefault(n)
    return list(out)


# ---- the call table: one handler per op name --------------------------------------------------

Handler = Callable[[_Walker, Tree, list, dict, Span | None], object]
_CALLS: dict[str, Handler] = {}


def _call(*names: str):
    def register(fn: Handler) -> Handler:
        for n in names:
            _CALLS[n] = fn
        return fn

    return register


@_call("program_id", "num_programs")
def _program_id(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, call_name(node))
    w.arity(node, pos, 1, f"{call_name(node)}(axis)")
    cls = tl.ProgramIdOp if call_name(node) == "program_id" else tl.NumProgramsOp
    return w.b.make(cls, w.int_arg(pos[0], "the axis"), span=span)


@_call("role_rank")
def _role_rank(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "role_rank")
    w.arity(node, pos, 0, "role_rank()")
    if not any(f.kind == "role" for f in w.b._frames):
        w.fail("role.rank", "role_rank() is only meaningful inside a role", node)
    return w.b.make(st.RoleRankOp, span=span)


@_call("arange")
def _arange(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "arange")
    w.arity(node, pos, 2, "arange(start, end) with static bounds")
    return w.b.make(tl.ArangeOp, w.static(pos[0]), w.static(pos[1]), span=span)


@_call("zeros")
def _zeros(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "zeros")
    w.arity(node, pos, 1, "zeros(f32[BM, BN])")
    return w.b.make(tl.ZerosOp, w.tile_type_arg(pos[0], "zeros"), span=span)


@_call("full")
def _full(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "full")
    w.arity(node, pos, 2, "full(f32[BM, BN], value)")
    t = w.tile_type_arg(pos[0], "full")
    (v,) = w.operands([(pos[1], 0)], {0: t.dtype.data})
    return w.b.make(tl.FullOp, t, v, span=span)


@_call(*_UNARY_CALLS)
def _unary(w: _Walker, node, pos, kw, span):
    fname = call_name(node)
    w.no_kwargs(node, kw, fname)
    w.arity(node, pos, 1, f"{fname}(x)")
    (x,) = w.operands([(pos[0], 0)], {0: "f32"})
    return w.b.make(tl.UnaryOp, fname, x, span=span)


@_call("maximum", "minimum", "pow")
def _binary_call(w: _Walker, node, pos, kw, span):
    fname = call_name(node)
    w.no_kwargs(node, kw, fname)
    w.arity(node, pos, 2, f"{fname}(a, b)")
    a, b = w.operands([(pos[0], 0), (pos[1], 0)])
    return w.b.make(tl.BinaryOp, fname, a, b, span=span)


@_call("rand", "randint")
def _rand(w: _Walker, node, pos, kw, span):
    fname = call_name(node)
    w.no_kwargs(node, kw, fname)
    w.arity(node, pos, 2, f"{fname}(seed, offsets)")
    seed, offsets = w.operands([(pos[0], 0), (pos[1], 1)], {0: "i64", 1: "i32"})
    return w.b.make(tl.RandOp, fname, seed, offsets, span=span)


@_call("where")
def _where(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "where")
    w.arity(node, pos, 3, "where(cond, a, b)")
    c, a, b = w.operands([(pos[0], 1), (pos[1], 0), (pos[2], 0)], {1: "i1"})
    return w.b.make(tl.WhereOp, c, a, b, span=span)


@_call("broadcast", "reshape")
def _shape_change(w: _Walker, node, pos, kw, span):
    fname = call_name(node)
    w.no_kwargs(node, kw, fname)
    w.arity(node, pos, 2, f"{fname}(x, [d0, d1, ...])")
    shape = w.shape_arg(pos[1], fname)
    (x,) = w.operands([(pos[0], 0)])
    return w.b.make(tl.BroadcastOp if fname == "broadcast" else tl.ReshapeOp, x, shape, span=span)


@_call("trans")
def _trans(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "trans")
    w.arity(node, pos, 1, "trans(x)")
    w.no_memory_trans(node, pos[0])
    (x,) = w.operands([(pos[0], 0)])
    return w.b.make(tl.TransOp, x, span=span)


def _axis(w: _Walker, node, kw, fname, extra=()) -> int:
    w.no_kwargs(node, kw, fname, ("axis", *extra))
    if "axis" not in kw:
        w.fail("call.arguments", f"{fname} needs axis = N", node)
    return w.int_arg(kw["axis"], "the axis")


@_call(*tl.REDUCE_FNS)
def _reduce(w: _Walker, node, pos, kw, span):
    fname = call_name(node)
    w.arity(node, pos, 1, f"{fname}(x, axis = N)")
    axis = _axis(w, node, kw, fname)
    (x,) = w.operands([(pos[0], 0)])
    return w.b.make(tl.ReduceOp, fname, x, axis, span=span)


@_call("argmax", "argmin")
def _argreduce(w: _Walker, node, pos, kw, span):
    fname = call_name(node)
    w.arity(node, pos, 1, f"{fname}(x, axis = N)")
    axis = _axis(w, node, kw, fname)
    (x,) = w.operands([(pos[0], 0)])
    return w.b.make(tl.ArgReduceOp, fname, x, axis, span=span)


@_call(*tl.SCAN_FNS)
def _scan(w: _Walker, node, pos, kw, span):
    fname = call_name(node)
    w.arity(node, pos, 1, f"{fname}(x, axis = N)")
    axis = _axis(w, node, kw, fname, ("reverse",))
    reverse = bool(w.int_arg(kw["reverse"], "reverse")) if "reverse" in kw else False
    (x,) = w.operands([(pos[0], 0)])
    return w.b.make(tl.ScanOp, fname, x, axis, reverse, span=span)


@_call("topk")
def _topk(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "topk", ("k", "largest"))
    w.arity(node, pos, 1, "topk(x, k = K)")
    if "k" not in kw:
        w.fail("call.arguments", "topk needs k = K", node)
    k = w.static(kw["k"])
    largest = bool(w.int_arg(kw["largest"], "largest")) if "largest" in kw else True
    (x,) = w.operands([(pos[0], 0)])
    return w.b.make(tl.TopKOp, x, k, largest, span=span)


_GATHER_USAGE = "gather(src, index, axis = A)"
_REAL_LITERALS = ("float_lit", "inf_lit", "nan_lit")


@_call("gather")
def _gather(w: _Walker, node, pos, kw, span):
    # Checked here rather than left to GatherOp's constructor, so that each misuse points at
    # the argument at fault (the op reports the same facts under types.* ids for the builder).
    w.no_kwargs(node, kw, "gather", ("axis",))
    w.arity(node, pos, 2, _GATHER_USAGE)
    src, index = w.operands([(pos[0], 0), (pos[1], 1)], {1: "i32"})
    for what, arg, v in (("source", pos[0], src), ("index", pos[1], index)):
        if not isinstance(v.type, TileType):
            w.fail("call.arguments", f"gather: the {what} must be a tile, not {v.type}", arg, f"usage: {_GATHER_USAGE}")
    if DTYPES[dtype_of(index.type)].kind not in ("int", "uint"):
        w.fail(
            "call.arguments",
            f"gather: the index must be an integer tile (i32 or i64), not {index.type}",
            pos[1],
            "cast<i32>(...) the index",
        )
    s, i = shape_of(src.type), shape_of(index.type)
    if len(s) != len(i):
        w.fail(
            "call.arguments",
            f"gather: the index {shape_text(i)} must have the rank of the source {shape_text(s)}",
            pos[1],
            "add axes to the index (idx[None, :]) and broadcast it to the source's other dimensions",
        )
    axis = _gather_axis(w, node, kw, len(s))
    for d, (a, b) in enumerate(zip(s, i, strict=True)):
        if d != axis and not sx.same(a, b):
            want = [b if k == axis else a for k, (a, b) in enumerate(zip(s, i, strict=True))]
            w.fail(
                "call.arguments",
                f"gather: dimension {d} of the index is {b} but the source's is {a}: every dimension but "
                f"the gathered axis {axis} must be equal (Triton's tl.gather requires it too)",
                pos[1],
                f"broadcast the index to the source's other dimensions: broadcast(idx, {shape_text(want)})",
            )
    return w.b.make(tl.GatherOp, src, index, axis, span=span)


def _gather_axis(w: _Walker, node, kw, rank: int) -> int:
    """`axis = A`: a compile-time integer; it may be left out for a 1-D source only."""
    if "axis" not in kw:
        if rank != 1:
            w.fail("call.arguments", f"gather of a rank-{rank} source needs axis = A", node, f"usage: {_GATHER_USAGE}")
        return 0
    arg = kw["axis"]
    if isinstance(arg, Tree) and any(t.data in _REAL_LITERALS for t in arg.iter_subtrees()):
        w.fail("call.arguments", "gather: axis is an integer constant, not a real number", arg, "e.g. axis = 1")
    axis = w.int_arg(arg, "the axis")
    if not 0 <= axis < rank:
        w.fail(
            "call.arguments",
            f"gather: axis {axis} is out of range for a rank-{rank} source",
            arg,
            f"the axes of a rank-{rank} tile are 0 to {rank - 1}",
        )
    return axis


def _mask_other(w: _Walker, kw, mem_dtype: str, keys: tuple[str, ...]):
    items, want = [], {}
    if "mask" in keys and "mask" in kw:
        items.append((kw["mask"], 100))
        want[100] = "i1"
    if "other" in keys and "other" in kw:
        items.append((kw["other"], 101))
        want[101] = mem_dtype
    vals = w.operands(items, want)
    out = {}
    i = 0
    for key in keys:
        if key in kw:
            out[key] = vals[i]
            i += 1
    return out.get("mask"), out.get("other")


def _evict(w: _Walker, node) -> str:
    """The policy named by `evict = first` (a word, not an expression)."""
    if isinstance(node, Tree) and node.data == "name" and str(node.children[0]) in tl.EVICT_POLICIES:
        return str(node.children[0])
    w.fail(
        "types.evict",
        "evict is `first` or `last`",
        node,
        "evict = first: lines read once, evicted before others; evict = last: lines read again soon, kept",
    )


def _precision(w: _Walker, node) -> str:
    """The precision named by `precision = tf32` (a word, not an expression)."""
    if isinstance(node, Tree) and node.data == "name" and str(node.children[0]) in tl.DOT_PRECISIONS:
        return str(node.children[0])
    w.fail(
        "types.dot-precision",
        "precision is `ieee` or `tf32`",
        node,
        "precision = ieee: an f32 product (the default); precision = tf32: operands rounded to TF32, on the tensor cores",
    )


@_call("load")
def _load(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "load", ("mask", "other", "evict"))
    w.arity(node, pos, 1, "load(a[...], mask = m, other = v, evict = first)")
    mem, access, idx = w.access(pos[0], "load")
    evict = _evict(w, kw["evict"]) if "evict" in kw else None  # on shared memory: the op refuses it
    mask, other = _mask_other(w, kw, dtype_of(mem.type), ("mask", "other"))
    return w.b.make(tl.LoadOp, mem, access, idx, mask, other, evict, span=span)


@_call("store")
def _store(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "store", ("mask",))
    w.arity(node, pos, 2, "store(a[...], value, mask = m)")
    mem, access, idx = w.access(pos[0], "store")
    (value,) = w.operands([(pos[1], 0)], {0: dtype_of(mem.type)})
    mask, _ = _mask_other(w, kw, dtype_of(mem.type), ("mask",))
    return w.b.make(tl.StoreOp, mem, access, idx, value, mask, span=span)


@_call(*(f"atomic_{fn}" for fn in tl.ATOMIC_FNS))
def _atomic(w: _Walker, node, pos, kw, span):
    fname = call_name(node)
    w.no_kwargs(node, kw, fname, ("mask",))
    w.arity(node, pos, 2, f"{fname}(a[...], value, mask = m)")
    mem, access, idx = w.access(pos[0], fname, kinds=(GlobalType,))
    (value,) = w.operands([(pos[1], 0)], {0: dtype_of(mem.type)})
    mask, _ = _mask_other(w, kw, dtype_of(mem.type), ("mask",))
    return w.b.make(tl.AtomicOp, fname.removeprefix("atomic_"), mem, access, idx, value, mask, span=span)


@_call("smem")
def _smem(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "smem", ("swizzle",))
    w.arity(node, pos, 1, "smem(bf16[S, BM, BK], swizzle = 128)")
    t = w.tile_type_arg(pos[0], "smem")
    swizzle = w.int_arg(kw["swizzle"], "swizzle") if "swizzle" in kw else 0
    if swizzle not in (0, 32, 64, 128):
        w.fail("types.swizzle", f"swizzle is 0, 32, 64 or 128 bytes, not {swizzle}", kw["swizzle"])
    return w.b.make(ex.SmemAllocOp, smem(t.dtype.data, [d.data for d in t.shape.data], swizzle), span=span)


@_call("mbarrier")
def _mbarrier(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "mbarrier", ("count",))
    w.arity(node, pos, 1, "mbarrier(N, count = C)")
    count = w.static(kw["count"]) if "count" in kw else sx.Int(1)
    return w.b.make(ex.MBarrierAllocOp, w.static(pos[0]), count, span=span)


@_call("expect")
def _expect(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "expect", ("bytes",))
    w.arity(node, pos, 1, "expect(bar[i], bytes = N)")
    if "bytes" not in kw:
        w.fail("call.arguments", "expect needs bytes = N", node)
    bar, idx = w.barrier_ref(pos[0], "expect")
    (nbytes,) = w.operands([(kw["bytes"], 0)], {0: "i32"})
    return w.b.make(ex.ExpectOp, bar, idx, nbytes, span=span)


@_call("arrive")
def _arrive(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "arrive", ("count",))
    w.arity(node, pos, 1, "arrive(bar[i])")
    bar, idx = w.barrier_ref(pos[0], "arrive")
    count = w.int_arg(kw["count"], "count") if "count" in kw else 1
    return w.b.make(ex.ArriveOp, bar, idx, count, span=span)


@_call("wait")
def _wait(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "wait", ("parity",))
    w.arity(node, pos, 1, "wait(bar[i], parity = p)")
    if "parity" not in kw:
        w.fail("call.arguments", "wait needs parity = p", node, "the phase parity to wait for, e.g. (k / S) % 2")
    bar, idx = w.barrier_ref(pos[0], "wait")
    (parity,) = w.operands([(kw["parity"], 0)], {0: "i32"})
    return w.b.make(ex.WaitOp, bar, idx, parity, span=span)


@_call("tma.load")
def _tma_load(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "tma.load", ("signal",))
    w.arity(node, pos, 2, "tma.load(a[...], buf[s], signal = bar[s])")
    if "signal" not in kw:
        w.fail("call.arguments", "tma.load needs signal = bar[i]", node)
    src, sa, si = w.access(pos[0], "tma.load", kinds=(GlobalType,))
    dst, da, di = w.access(pos[1], "tma.load", kinds=(SmemType,))
    bar, idx = w.barrier_ref(kw["signal"], "tma.load")
    return w.b.make(ex.TmaLoadOp, src, sa, si, dst, da, di, bar, idx, span=span)


@_call("tma.store")
def _tma_store(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "tma.store")
    w.arity(node, pos, 2, "tma.store(buf[s], c[...])")
    src, sa, si = w.access(pos[0], "tma.store", kinds=(SmemType,))
    dst, da, di = w.access(pos[1], "tma.store", kinds=(GlobalType,))
    return w.b.make(ex.TmaStoreOp, src, sa, si, dst, da, di, span=span)


@_call("cp.async")
def _cp_async(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "cp.async", ("mask",))
    w.arity(node, pos, 2, "cp.async(a[...], buf[s], mask = m)")
    src, sa, si = w.access(pos[0], "cp.async", kinds=(GlobalType,))
    dst, da, di = w.access(pos[1], "cp.async", kinds=(SmemType,))
    mask, _ = _mask_other(w, kw, dtype_of(src.type), ("mask",))
    return w.b.make(ex.CpAsyncOp, src, sa, si, dst, da, di, mask, span=span)


def _pending_call(cls, label):
    def handler(w: _Walker, node, pos, kw, span):
        w.no_kwargs(node, kw, label)
        w.arity(node, pos, 1, f"{label}(pending)")
        return w.b.make(cls, w.param_arg(pos[0], "the pending count"), span=span)

    return handler


def _nullary_call(cls, label):
    def handler(w: _Walker, node, pos, kw, span):
        w.no_kwargs(node, kw, label)
        w.arity(node, pos, 0, f"{label}()")
        return w.b.make(cls, span=span)

    return handler


_CALLS["tma.store_wait"] = _pending_call(ex.TmaStoreWaitOp, "tma.store_wait")
_CALLS["cp.async.wait"] = _pending_call(ex.CpAsyncWaitOp, "cp.async.wait")
_CALLS["wgmma.wait"] = _pending_call(ex.WgmmaWaitOp, "wgmma.wait")
_CALLS["cp.async.commit"] = _nullary_call(ex.CpAsyncCommitOp, "cp.async.commit")
_CALLS["barrier"] = _nullary_call(ex.CtaBarrierOp, "barrier")
_CALLS["fence.async"] = _nullary_call(ex.FenceAsyncOp, "fence.async")


@_call("wgmma")
def _wgmma(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "wgmma")
    w.arity(node, pos, 3, "wgmma(a_buf[s], b_buf[s], acc)")
    a_node, trans_a = _wgmma_operand(w, pos[0])
    b_node, trans_b = _wgmma_operand(w, pos[1])
    bound = w.subscripted(a_node)
    if bound is not None and isinstance(bound.type, SmemType | GlobalType):
        a, aa, ai = w.access(a_node, "wgmma", kinds=(SmemType,))
    elif trans_a:
        w.fail(
            "types.access",
            "wgmma's trans(A) takes a shared view: a transposed A is read from shared memory",
            a_node,
            "store the tile and pass trans(buf[...]), or pass the tile as multiplied, [M, K]",
        )
    else:  # A in registers: a tile value
        (a,) = w.operands([(a_node, 0)])
        if not isinstance(a.type, TileType):
            w.fail("types.access", f"wgmma's A is a shared view or a tile in registers, not {a.type}", a_node)
        aa, ai = Access(()), []
    b, ba, bi = w.access(b_node, "wgmma", kinds=(SmemType,))
    (acc,) = w.operands([(pos[2], 0)])
    return w.b.make(ex.WgmmaOp, a, aa, ai, b, ba, bi, acc, trans_a, trans_b, span=span)


def _wgmma_operand(w: _Walker, node: Node) -> tuple[Node, bool]:
    """A wgmma operand: a shared view `bs[s]`, or its transpose `trans(ks[s])`."""
    if not _is_trans_call(node):
        return node, False
    pos, kw = w.split_args(node, node.children[1:])
    w.no_kwargs(node, kw, "trans")
    w.arity(node, pos, 1, "trans(buf[s])")
    return pos[0], True


@_call("sizeof")
def _sizeof(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "sizeof")
    w.arity(node, pos, 1, "sizeof(buf[s])")
    mem, access, idx = w.access(pos[0], "sizeof", kinds=(SmemType,))
    return w.b.make(ex.SizeofOp, mem, access, idx, span=span)


@_call("convert_layout")
def _convert_layout(w: _Walker, node, pos, kw, span):
    w.no_kwargs(node, kw, "convert_layout")
    w.arity(node, pos, 2, "convert_layout(x, blocked([..], [..], [..], [..]))")
    lay = pos[1]
    if not (isinstance(lay, Tree) and lay.data == "call" and call_name(lay) in Layout.KINDS):
        w.fail("call.arguments", "the layout is blocked(...) or mma(...)", lay)
    lpos, lkw = w.split_args(lay, lay.children[1:])
    w.no_kwargs(lay, lkw, call_name(lay))
    params = []
    for p in lpos:
        if not (isinstance(p, Tree) and p.data == "list"):
            w.fail("call.arguments", "layout parameters are lists of integers", p)
        params.append(tuple(w.int_arg(v, "a layout entry") for v in p.children))
    (x,) = w.operands([(pos[0], 0)])
    return w.b.make(ex.ConvertLayoutOp, x, Layout(call_name(lay), tuple(params)), span=span)


_ = st  # structural ops are built by the Builder
