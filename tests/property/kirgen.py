"""Random well-typed KIR programs, as text, for the property tests.

A program is generated as a small syntax tree (expressions `E`, statements `Stmt`), typed as it
is built, and rendered to text with random but legal layout: parentheses, line breaks inside
brackets, `;` separators, comments and blank lines. The generator mirrors the typing rules of
`kir.sema` that decide whether a program is accepted, above all how a bare literal takes its
dtype (from the first non-literal operand of its group, else the position's wanted dtype, else
its own kind), so that every program it makes parses.

Choices are drawn through a `draw(lo, hi) -> int` callable: `ByteChoices` reads them from a
byte string that hypothesis draws once (cheap, and it shrinks toward zero bytes, which pick
the first and simplest option everywhere); `random.Random(seed).randint` works for debugging.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# ---- types --------------------------------------------------------------------------------
# A value type is (dtype, shape); a shape is a tuple of dimension texts ("BM", "1", "4").

Type = tuple[str, tuple[str, ...]]

FLOATS = ("f32", "bf16", "f16", "f64", "f8e4m3")
SIGNED = ("i32", "i64", "i8", "i16")
UNSIGNED = ("u8", "u16", "u32", "u64")
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
DTYPES = NUMERIC + ("i1",)
DIMS = ("BM", "BN", "BK")
DEFAULT_OF_KIND = {"int": "i32", "float": "f32", "bool": "i1"}

# Names a program may use for values: ordinary ones, op names (they are not keywords), and
# names that look like the ones the printer invents (`_v0`, `x_1`).
VAR_NAMES = (
    "x",
    "y",
    "acc",
    "t",
    "v",
    "idx",
    "rows",
    "cols",
    "m",
    "tmp",
    "sum",
    "exp",
    "load",
    "zeros",
    "tma",
    "wait",
    "mbarrier",
    "role_rank",
    "_v0",
    "_v1",
    "x_1",
    "acc_1",
    "_",
    "a1",
    "best",
)
ROLE_NAMES = ("load", "mma", "producer", "consumer", "epilogue", "r0")


def kind(dtype: str) -> str:
    if dtype == "i1":
        return "bool"
    return "float" if dtype in FLOATS else "int"


def is_signed(dtype: str) -> bool:
    return dtype in SIGNED or dtype in FLOATS


def int_range(dtype: str) -> tuple[int, int]:
    bits = int(dtype[1:])
    if dtype.startswith("u"):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


# ---- expressions --------------------------------------------------------------------------
# Precedence of printed forms, loosest first (as in grammar.lark).
P_OR, P_XOR, P_AND, P_CMP, P_SHIFT, P_ADD, P_MUL, P_UNARY, P_POSTFIX, P_ATOM = range(1, 11)
BIN_PREC = {
    "|": P_OR,
    "^": P_XOR,
    "&": P_AND,
    "<<": P_SHIFT,
    ">>": P_SHIFT,
    "+": P_ADD,
    "-": P_ADD,
    "*": P_MUL,
    "/": P_MUL,
    "%": P_MUL,
    "<": P_CMP,
    "<=": P_CMP,
    ">": P_CMP,
    ">=": P_CMP,
    "==": P_CMP,
    "!=": P_CMP,
}


class E:
    """An expression node; `literal` says whether sema treats it as a bare or typed literal."""

    literal = False
    prec = P_ATOM

    def text(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass
class Raw(E):
    """Text printed as is: names, types (`f32[BM, BN]`), shape lists, layouts."""

    src: str

    def text(self) -> str:
        return self.src


@dataclass
class Lit(E):
    """A bare literal: `2`, `-3`, `0.5`, `-inf`, `true`, `0x1f`."""

    src: str
    literal = True

    @property
    def prec(self) -> int:  # type: ignore[override]
        return P_UNARY if self.src.startswith("-") else P_ATOM

    def text(self) -> str:
        return self.src


@dataclass
class TLit(E):
    """A typed literal: `bf16(0.5)`, `i64(-1)`."""

    dtype: str
    src: str
    literal = True

    def text(self) -> str:
        return f"{self.dtype}({self.src})"


@dataclass
class Bin(E):
    op: str
    lhs: E
    rhs: E

    @property
    def prec(self) -> int:  # type: ignore[override]
        return BIN_PREC[self.op]

    def text(self) -> str:
        p = self.prec
        # comparisons do not chain; everything else is left-associative
        left_need = p + 1 if p == P_CMP else p
        return f"{wrap(self.lhs, left_need)} {self.op} {wrap(self.rhs, p + 1)}"


@dataclass
class Un(E):
    op: str  # "-" or "~"
    x: E
    prec = P_UNARY

    def text(self) -> str:
        inner = wrap(self.x, P_UNARY)
        # `- -x` and `-(-1)`: keep the tokens apart so the text reads the same way back
        sep = " " if inner.startswith(("-", "~")) else ""
        return f"{self.op}{sep}{inner}"


@dataclass
class Paren(E):
    x: E

    @property
    def literal(self) -> bool:  # type: ignore[override]
        return self.x.literal

    def text(self) -> str:
        return f"({self.x.text()})"


@dataclass
class Call(E):
    fname: str
    args: list[E] = field(default_factory=list)
    kwargs: list[tuple[str, E]] = field(default_factory=list)
    breaks: bool = False  # put each argument on its own line (newlines inside (...) are free)

    def text(self) -> str:
        parts = [a.text() for a in self.args] + [f"{k} = {v.text()}" for k, v in self.kwargs]
        if self.breaks and len(parts) > 1:
            return f"{self.fname}(\n      " + ",\n      ".join(parts) + "\n    )"
        return f"{self.fname}({', '.join(parts)})"


@dataclass
class Index(E):
    """`base[sub, ...]`; a sub is an expression, ("slice", start, extent), ":" or "None"."""

    base: E
    subs: list
    prec = P_POSTFIX

    def text(self) -> str:
        parts = []
        for s in self.subs:
            if isinstance(s, E):
                parts.append(s.text())
            elif isinstance(s, tuple):
                _, start, extent, form = s
                if form == "zero":
                    parts.append(f"0 : {extent}")
                else:
                    st = wrap(start, P_ADD)
                    parts.append(f"{st} : {st} + {extent}")
            else:
                parts.append(s)
        return f"{wrap(self.base, P_POSTFIX)}[{', '.join(parts)}]"


def wrap(e: E, need: int) -> str:
    t = e.text()
    return f"({t})" if e.prec < need else t


# ---- statements -----------------------------------------------------------------------------


@dataclass
class Stmt:
    kind: str  # "assign", "expr", "for", "if", "role"
    head: str = ""  # assign: "x" or "v, i"; for: the header; role: the header; if: condition
    value: E | None = None
    body: list[Stmt] = field(default_factory=list)
    orelse: list[Stmt] | None = None
    else_if: bool = False  # orelse holds a single `if` printed as `else if`
    leading: list[str] = field(default_factory=list)
    trailing: str | None = None
    blank_before: bool = False
    semicolon: bool = False  # end with `;` and keep the next statement on this line


def render_block(stmts: list[Stmt], depth: int, out: list[str], indent: str) -> None:
    pad = indent * depth
    line = ""
    for s in stmts:
        if s.blank_before and not line:
            out.append("")
        for c in s.leading:
            if line:
                out.append(line)
                line = ""
            out.append(pad + c)
        text = render_stmt(s, depth, indent)
        first, *rest = text.split("\n")
        line = (line + " " + first) if line else pad + first
        if rest:
            out.append(line)
            out.extend(rest[:-1])
            line = rest[-1]
        if s.trailing:
            out.append(line + "  " + s.trailing)
            line = ""
        elif s.semicolon:
            line += ";"
        else:
            out.append(line)
            line = ""
    if line:
        out.append(line)


def render_stmt(s: Stmt, depth: int, indent: str) -> str:
    pad = indent * depth
    if s.kind == "assign":
        return f"{s.head} = {s.value.text()}"
    if s.kind == "expr":
        return s.value.text()
    inner: list[str] = []
    render_block(s.body, depth + 1, inner, indent)
    if s.kind == "if":
        text = f"if {s.head} {{\n" + "".join(x + "\n" for x in inner) + pad + "}"
        if s.orelse is not None:
            if s.else_if:
                text += " else " + render_stmt(s.orelse[0], depth, indent)
            else:
                other: list[str] = []
                render_block(s.orelse, depth + 1, other, indent)
                text += " else {\n" + "".join(x + "\n" for x in other) + pad + "}"
        return text
    return f"{s.head} {{\n" + "".join(x + "\n" for x in inner) + pad + "}"


# ---- the generator ---------------------------------------------------------------------------

Draw = Callable[[int, int], int]


class ByteChoices:
    """`draw(lo, hi)` from a byte string, two bytes a choice; zeros once it runs out."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def __call__(self, lo: int, hi: int) -> int:
        chunk = self.data[self.pos : self.pos + 2]
        self.pos += 2
        value = int.from_bytes(chunk, "big") if chunk else 0
        return lo + value % (hi - lo + 1)


@dataclass
class Mem:
    kind: str  # "global", "smem", "mbar"
    dtype: str = ""
    dims: tuple[str, ...] = ()


class ProgramGen:
    """Generates one program; `text()` renders it."""

    def __init__(self, draw: Draw, max_stmts: int = 18, max_depth: int = 3):
        self._draw = draw
        self.budget = max_stmts
        self.max_depth = max_depth
        self.scopes: list[dict[str, Type]] = []
        self.mem: dict[str, Mem] = {}
        self.frames: list[str] = []  # "for", "if", "role"
        self.counter = 0
        self.params: list[tuple[str, int]] = []
        self.used_names: set[str] = set()
        self.symbols: list[str] = []

    # ---- choices ---------------------------------------------------------------------------

    def int(self, lo: int, hi: int) -> int:
        return self._draw(lo, hi)

    def pick(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def chance(self, percent: int) -> bool:
        # a zero draw says no: the simplest program takes no optional part
        return self.int(0, 99) >= 100 - percent

    # ---- names and scopes --------------------------------------------------------------------

    def lookup(self, name: str) -> Type | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def visible(self) -> dict[str, Type]:
        out: dict[str, Type] = {}
        for scope in self.scopes:
            out.update(scope)
        return out

    def vars_of(self, ty: Type) -> list[str]:
        return sorted(n for n, t in self.visible().items() if t == ty)

    def fresh(self) -> str:
        if self.chance(30):
            base = self.pick(VAR_NAMES)
            if self.lookup(base) is None and base not in self.mem:
                self.used_names.add(base)
                return base
        self.counter += 1
        return f"{self.pick(('t', 'v', 'x', 'acc', 'w'))}{self.counter}"

    def bind(self, name: str, ty: Type) -> None:
        self.scopes[-1][name] = ty

    def may_retype(self) -> bool:
        """Outside loops and branches a name may be rebound to a value of another type."""
        return not any(f in ("for", "if") for f in self.frames)

    # ---- types -------------------------------------------------------------------------------

    def dtype(self) -> str:
        return self.pick(("f32", "f32", "bf16", "i32", "i32", "i64", "i1", "f16", "u8", "i8", "f64", "u32"))

    def shape(self, rank: int | None = None) -> tuple[str, ...]:
        rank = self.pick((0, 1, 1, 2, 2)) if rank is None else rank
        if rank == 0:
            return ()
        if rank == 1:
            return (self.pick(DIMS),)
        x, y = self.pick(DIMS), self.pick(DIMS)
        return self.pick(((x, y), (x, y), (x, "1"), ("1", y)))

    def value_type(self) -> Type:
        return self.dtype(), self.shape()

    # ---- literals ----------------------------------------------------------------------------

    def literal_text(self, dtype: str) -> str:
        k = kind(dtype)
        if k == "bool":
            return self.pick(("true", "false"))
        if k == "float":
            return self.pick(
                ("0.5", "1.0", "2.5e-3", "1e3", "3", "0", "inf", "nan", "-0.25", "-inf", "-2", "1.5E+2", "0.1")
            )
        lo, hi = int_range(dtype)
        v = self.pick((0, 1, 2, 7, 100, lo, hi, -1, -5, 16))
        v = max(lo, min(hi, v))
        if v >= 0 and self.chance(10):
            return hex(v)
        return str(v)

    def bare_literal(self, dtype: str, default_kind: bool = False) -> Lit:
        """A bare literal that reads as `dtype` where its group's dtype is `dtype`; with
        `default_kind`, one whose own kind gives `dtype` (2 is i32, 2.0 f32, true i1)."""
        text = self.literal_text(dtype)
        if default_kind and kind(dtype) == "float" and not any(c in text for c in ".ei") and "nan" not in text:
            text += ".0"
        return Lit(text)

    def typed_literal(self, dtype: str) -> E:
        text = self.literal_text(dtype)
        if kind(dtype) == "bool":
            return TLit(dtype, text)
        return TLit(dtype, text)

    # ---- operand groups (sema.operands) --------------------------------------------------------

    def group(self, slots: list[Type], want: str | None, depth: int, lit_percent: int = 35) -> list[E]:
        """Operands that sema builds in one group: a bare literal takes the dtype of the first
        non-literal of the group, else `want`, else its own kind. All slots share one dtype."""
        dtype = slots[0][0]
        is_lit = [not ty[1] and self.chance(lit_percent) for ty in slots]
        out: list[E | None] = [None] * len(slots)
        for i, ty in enumerate(slots):
            if not is_lit[i]:
                out[i] = self.expr(ty, depth)
        if any(not f for f in is_lit):
            lit_dtype: str | None = dtype
        elif want is not None:
            lit_dtype = want
        else:
            lit_dtype = None  # decided by the literals' kinds (or a typed one among them)
        lits = [i for i, f in enumerate(is_lit) if f]
        if lits and lit_dtype is None:
            if dtype == DEFAULT_OF_KIND[kind(dtype)] and self.chance(60):
                for i in lits:
                    out[i] = self.bare_literal(dtype, default_kind=True)
                if kind(dtype) == "float":
                    out[lits[0]] = Lit(self.pick(("0.5", "1.0", "inf", "-2.5", "1e-3")))
            else:
                first = self.pick(lits)
                out[first] = self.typed_literal(dtype)
                for i in lits:
                    if i != first:
                        out[i] = self.bare_literal(dtype) if self.chance(70) else self.typed_literal(dtype)
            return out  # type: ignore[return-value]
        for i in lits:
            if lit_dtype == dtype and self.chance(75):
                out[i] = self.bare_literal(dtype)
            else:
                out[i] = self.typed_literal(dtype)
        if lit_dtype != dtype and lit_dtype is not None:
            for i in lits:
                out[i] = self.typed_literal(dtype)
        return out  # type: ignore[return-value]

    def one(self, ty: Type, depth: int, want: str | None = None, lit_percent: int = 35) -> E:
        return self.group([ty], want, depth, lit_percent)[0]

    # ---- expressions -------------------------------------------------------------------------

    def expr(self, ty: Type, depth: int) -> E:
        """A non-literal expression of type `ty`."""
        e = self._expr(ty, depth)
        if self.chance(6):
            e = Paren(e)
        return e

    def _expr(self, ty: Type, depth: int) -> E:
        dtype, shape = ty
        options: list[tuple[int, Callable[[], E | None]]] = []
        names = self.vars_of(ty)
        if names:
            options.append((6 if depth > 0 else 30, lambda: Raw(self.pick(names))))
        if depth > 0:
            options += self.compound_options(ty, depth - 1)
        options += self.leaf_options(ty)
        total = sum(w for w, _ in options)
        for _ in range(8):
            r = self.int(0, total - 1)
            for w, make in options:
                if r < w:
                    e = make()
                    if e is not None:
                        return e
                    break
                r -= w
        return self.fallback(ty)

    def fallback(self, ty: Type) -> E:
        """A leaf of any type, for when the drawn options did not fit."""
        dtype, shape = ty
        if shape:
            return Call("zeros", [Raw(f"{dtype}[{', '.join(shape)}]")])
        return Call(f"cast<{dtype}>", [Call("program_id", [Lit("0")])])

    def leaf_options(self, ty: Type) -> list:
        dtype, shape = ty
        opts: list = []
        if not shape:
            if dtype == "i32":
                opts.append((4, lambda: Call(self.pick(("program_id", "num_programs")), [Lit(str(self.int(0, 2)))])))
                opts.append((4, lambda: Raw(self.pick(["BM", "BN", "BK", "S", *self.symbols]))))
                if "role" in self.frames:
                    opts.append((3, lambda: Call("role_rank")))
                smem = [n for n, m in self.mem.items() if m.kind == "smem"]
                if smem:
                    opts.append((1, lambda: Call("sizeof", [self.smem_view(self.pick(smem), 0)[0]])))
            if is_signed(dtype):
                opts.append((2, lambda: Un("-", self.typed_literal(dtype))))
            if dtype == "i1":
                opts.append(
                    (
                        3,
                        lambda: Bin(
                            self.pick(("<", ">=", "==", "!=")), Call("program_id", [Lit("0")]), Lit(str(self.int(0, 9)))
                        ),
                    )
                )
            opts.append((2, lambda: Call(f"cast<{dtype}>", [Call("program_id", [Lit(str(self.int(0, 2)))])])))
        else:
            opts.append((3, lambda: Call("zeros", [Raw(f"{dtype}[{', '.join(shape)}]")])))
            opts.append(
                (
                    2,
                    lambda: Call(
                        "full",
                        [Raw(f"{dtype}[{', '.join(shape)}]"), self.one((dtype, ()), 0, want=dtype, lit_percent=80)],
                    ),
                )
            )
            if dtype == "i32" and len(shape) == 1 and shape[0] != "1":
                opts.append((4, lambda: Call("arange", [Lit("0"), Raw(shape[0])])))
        return opts

    def compound_options(self, ty: Type, d: int) -> list:
        dtype, shape = ty
        k = kind(dtype)
        opts: list = []
        # infix arithmetic and bitwise operators
        ops = {
            "float": ("+", "-", "*", "/", "%"),
            "int": ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"),
            "bool": ("&", "|", "^"),
        }[k]
        opts.append((8, lambda: self.binary(self.pick(ops), ty, d)))
        if dtype == "i1":
            opts.append((8, lambda: self.compare(ty, d)))
        if is_signed(dtype):
            opts.append(
                (
                    2,
                    lambda: Un(
                        "-",
                        self.expr(ty, d)
                        if self.chance(70)
                        else self.typed_literal(dtype)
                        if not shape
                        else self.expr(ty, d),
                    ),
                )
            )
        if k in ("int", "bool"):
            opts.append((2, lambda: Un("~", self.one(ty, d))))
        if k == "float":
            fn = (
                "abs",
                "exp",
                "exp2",
                "log",
                "log2",
                "sqrt",
                "rsqrt",
                "erf",
                "sigmoid",
                "tanh",
                "sin",
                "cos",
                "floor",
                "ceil",
            )
            opts.append((3, lambda: Call(self.pick(fn), [self.one(ty, d, want="f32")])))
            opts.append((1, lambda: Call("pow", self.group([ty, ty], None, d))))
        if k != "bool":
            opts.append(
                (
                    2,
                    lambda: Call(
                        self.pick(("maximum", "minimum")), self.group(self.broadcast_pair(shape, dtype), None, d)
                    ),
                )
            )
            if k == "int" or self.chance(30):
                opts.append((1, lambda: Call("abs", [self.one(ty, d, want="f32")])))
        opts.append((3, lambda: self.where(ty, d)))
        opts.append((3, lambda: self.cast(ty, d)))
        opts.append((3, lambda: self.reduce(ty, d)))
        if dtype == "i32":
            opts.append((2, lambda: self.argreduce(ty, d)))
        if shape:
            opts.append(
                (
                    2,
                    lambda: Call(
                        self.pick(("cumsum", "cumprod", "cummax", "cummin")),
                        [self.expr(ty, d)],
                        [("axis", Lit(str(self.int(0, len(shape) - 1))))]
                        + ([("reverse", Lit(self.pick("01")))] if self.chance(40) else []),
                    ),
                )
            )
        if len(shape) == 2 and "1" not in shape:
            opts.append((3, lambda: self.dot(ty, d)))
            opts.append((1, lambda: Call("trans", [self.expr((dtype, shape[::-1]), d)])))
            opts.append((2, lambda: self.broadcast(ty, d)))
            opts.append((1, lambda: self.layout_operand(ty, d)))
        if shape:
            opts.append(
                (
                    1,
                    lambda: Call(
                        "reshape", [self.expr((dtype, self.shape(self.int(1, 2))), d), Raw(f"[{', '.join(shape)}]")]
                    ),
                )
            )
        if len(shape) == 2 and "1" in shape:
            opts.append((3, lambda: self.expand(ty, d)))
        if len(shape) == 1 and shape == ("1",):
            opts.append((1, lambda: Index(self.expr((dtype, ()), d), ["None"])))
        opts.append((5, lambda: self.load(ty, d)))
        opts.append((1, lambda: self.atomic_expr(ty, d)))
        return opts

    def broadcast_pair(self, shape: tuple[str, ...], dtype: str) -> list[Type]:
        if not shape:
            return [(dtype, ()), (dtype, ())]
        if len(shape) == 1 or "1" in shape:
            a, b = self.pick(((shape, shape), (shape, ()), ((), shape)))
            return [(dtype, a), (dtype, b)]
        x, y = shape
        a, b = self.pick(
            (
                (shape, shape),
                (shape, ()),
                ((), shape),
                ((x, "1"), ("1", y)),
                (("1", y), (x, "1")),
                (shape, (y,)),
                ((y,), shape),
                ((x, "1"), shape),
                (shape, ("1", y)),
            )
        )
        return [(dtype, a), (dtype, b)]

    def binary(self, op: str, ty: Type, d: int) -> E:
        a, b = self.group(self.broadcast_pair(ty[1], ty[0]), None, d)
        return Bin(op, a, b)

    def compare(self, ty: Type, d: int) -> E:
        src = self.pick(("f32", "i32", "i32", "bf16", "i64", "u8", "i1"))
        a, b = self.group(self.broadcast_pair(ty[1], src), None, d)
        return Bin(self.pick(("<", "<=", ">", ">=", "==", "!=")), a, b)

    def where(self, ty: Type, d: int) -> E:
        dtype, shape = ty
        a, b = self.broadcast_pair(shape, dtype)
        cshape: tuple[str, ...] = self.pick(
            [shape, ()] + ([(shape[0], "1"), ("1", shape[1])] if len(shape) == 2 else [])
        )
        (c,) = self.group([("i1", cshape)], "i1", d)
        x, y = self.group([a, b], None, d)
        return Call("where", [c, x, y])

    def cast(self, ty: Type, d: int) -> E:
        src = self.pick([t for t in DTYPES if t != ty[0]] + [ty[0]])
        return Call(f"cast<{ty[0]}>", [self.one((src, ty[1]), d)])

    def reduce(self, ty: Type, d: int) -> E | None:
        dtype, shape = ty
        if len(shape) >= 2:
            return None
        extra = self.pick(DIMS)
        axis = self.int(0, len(shape))
        src = list(shape)
        src.insert(axis, extra)
        fns = ("max", "min") if dtype == "i1" else ("sum", "max", "min", "prod")
        return Call(self.pick(fns), [self.expr((dtype, tuple(src)), d)], [("axis", Lit(str(axis)))])

    def argreduce(self, ty: Type, d: int) -> E | None:
        _, shape = ty
        if len(shape) >= 2:
            return None
        axis = self.int(0, len(shape))
        src = list(shape)
        src.insert(axis, self.pick(DIMS))
        return Call(
            self.pick(("argmax", "argmin")),
            [self.expr((self.pick(("f32", "i32", "bf16", "u8")), tuple(src)), d)],
            [("axis", Lit(str(axis)))],
        )

    def dot(self, ty: Type, d: int) -> E:
        dtype, (x, y) = ty
        inner = self.pick(DIMS)
        src = self.pick(("bf16", "f16", "f32", "i8")) if dtype != "i1" else "i1"
        args = [self.expr((src, (x, inner)), d), self.expr((src, (inner, y)), d)]
        if self.chance(50):
            args.append(self.expr(ty, d))
        return Call(f"dot<{dtype}>", args, breaks=self.chance(10))

    def broadcast(self, ty: Type, d: int) -> E:
        dtype, (x, y) = ty
        src = self.pick(((x, "1"), ("1", y), (y,), ()))
        return Call("broadcast", [self.one((dtype, src), d), Raw(f"[{x}, {y}]")])

    def layout_operand(self, ty: Type, d: int) -> E:
        """convert_layout gives a tile with a layout; an infix op drops it again."""
        lay = self.pick(
            (
                "blocked([1, 8], [4, 8], [4, 1], [1, 0])",
                "mma([3], [4, 1], [16, 8, 16])",
                "blocked([1, 1], [8, 4], [1, 4], [0, 1])",
            )
        )
        ops = {"float": "+*-", "int": "+*&", "bool": "&|"}[kind(ty[0])]
        return Bin(self.pick(ops), Call("convert_layout", [self.expr(ty, d), Raw(lay)]), self.expr(ty, d))

    def expand(self, ty: Type, d: int) -> E:
        dtype, shape = ty
        if shape[1] == "1":
            return Index(self.expr((dtype, (shape[0],)), d), [":", "None"])
        return Index(self.expr((dtype, (shape[1],)), d), ["None", ":"])

    # ---- memory ------------------------------------------------------------------------------

    def index_scalar(self, d: int) -> E:
        """An i32 scalar in an index position (its literals are i32)."""
        return self.one(("i32", ()), min(d, 1), want="i32", lit_percent=50)

    def slice_sub(self, extent: str, d: int):
        if self.chance(25):
            return ("slice", None, extent, "zero")
        return ("slice", self.index_scalar(d), extent, "start")

    def global_access(self, name: str, shape: tuple[str, ...], d: int) -> E | None:
        """`g[...]` reading a tile of `shape` from global `name` (block or gather)."""
        rank = len(self.mem[name].dims)
        if len(shape) > rank and self.chance(70):
            return None
        if not shape:
            return Index(Raw(name), [self.index_scalar(d) for _ in range(rank)])
        gather = self.chance(40) or len(shape) > rank or "1" in shape
        if not gather:
            subs: list = [self.index_scalar(d) for _ in range(rank)]
            positions = sorted(self.pick([p for p in _combinations(rank, len(shape))]))
            for p, ext in zip(positions, shape, strict=True):
                subs[p] = self.slice_sub(ext, d)
            return Index(Raw(name), subs)
        # gather: index tiles (and scalars) whose shapes broadcast to `shape`
        idx_dtype = self.pick(("i32", "i32", "i64", "u16"))
        if rank == 1:
            return Index(Raw(name), [self.expr((idx_dtype, shape), d)])
        if len(shape) == 2 and "1" not in shape:
            x, y = shape
            rows = Index(self.expr((idx_dtype, (x,)), d), [":", "None"])
            cols = Index(self.expr((idx_dtype, (y,)), d), ["None", ":"])
            subs = (
                [rows, cols]
                if self.chance(50)
                else [self.expr((idx_dtype, (x, "1")), d), self.expr((idx_dtype, shape), d)]
            )
            return Index(Raw(name), subs + [self.index_scalar(d) for _ in range(rank - 2)])
        subs = [self.expr((idx_dtype, shape), d)] + [self.index_scalar(d) for _ in range(rank - 1)]
        if self.chance(50):
            subs.reverse()
        return Index(Raw(name), subs)

    def smem_view(self, name: str, d: int, shape: tuple[str, ...] | None = None) -> tuple[E, tuple[str, ...]]:
        """`buf[s]`, `buf[s, r : r + X]`, `buf[s, i]`, `buf[s, :, :]` and the view's shape."""
        dims = self.mem[name].dims
        stage = self.index_scalar(d)
        form = self.pick(("stage", "stage", "all", "slice", "point"))
        if shape is not None:
            if tuple(dims[1:]) == shape:
                form = self.pick(("stage", "all"))
            elif len(shape) == 2 and shape[1] == dims[2]:
                form = "slice"
            elif len(shape) == 1 and shape[0] == dims[2]:
                form = "point"
            else:
                return None, ()  # type: ignore[return-value]
        if form == "stage":
            return Index(Raw(name), [stage]), tuple(dims[1:])
        if form == "all":
            return Index(Raw(name), [stage, ":", ":"][: self.int(2, 3)]), tuple(dims[1:])
        if form == "slice":
            ext = shape[0] if shape is not None else self.pick(DIMS)
            return Index(Raw(name), [stage, self.slice_sub(ext, d)]), (ext, dims[2])
        return Index(Raw(name), [stage, self.index_scalar(d)]), (dims[2],)

    def mask_for(self, shape: tuple[str, ...], d: int) -> E:
        mshape = self.pick(
            [shape, ()]
            + ([(shape[0], "1"), ("1", shape[1]), (shape[1],)] if len(shape) == 2 and "1" not in shape else [])
        )
        return self.one(("i1", mshape), d, want="i1", lit_percent=15)

    def load(self, ty: Type, d: int) -> E | None:
        dtype, shape = ty
        globals_ = [n for n, m in self.mem.items() if m.kind == "global" and m.dtype == dtype]
        smems = [n for n, m in self.mem.items() if m.kind == "smem" and m.dtype == dtype]
        if smems and (not globals_ or self.chance(30)):
            view, _ = self.smem_view(self.pick(smems), d, shape)
            if view is None:
                return None
            return Call("load", [view])
        if not globals_:
            return None
        access = self.global_access(self.pick(globals_), shape, d)
        if access is None:
            return None
        kwargs = []
        if self.chance(40):
            kwargs.append(("mask", self.mask_for(shape, d)))
            if self.chance(50):
                kwargs.append(("other", self.one((dtype, ()), d, want=dtype, lit_percent=80)))
        return Call("load", [access], kwargs, breaks=self.chance(10))

    def atomic_expr(self, ty: Type, d: int) -> E | None:
        dtype, shape = ty
        globals_ = [n for n, m in self.mem.items() if m.kind == "global" and m.dtype == dtype]
        if not globals_ or dtype == "i1":
            return None
        access = self.global_access(self.pick(globals_), shape, d)
        if access is None:
            return None
        value = self.one((dtype, self.pick((shape, ()))), d, want=dtype)
        kwargs = [("mask", self.mask_for(shape, d))] if self.chance(40) else []
        return Call("atomic_" + self.pick(("add", "max", "min", "xchg")), [access, value], kwargs)

    # ---- statements ----------------------------------------------------------------------------

    def decorate(self, s: Stmt) -> Stmt:
        if self.chance(12):
            s.leading = [self.comment() for _ in range(self.int(1, 2))]
        if self.chance(12):
            s.trailing = self.comment()
        if self.chance(10):
            s.blank_before = True
        if s.kind in ("assign", "expr") and s.trailing is None and self.chance(8):
            s.semicolon = True
        return s

    def comment(self) -> str:
        return "#" + self.pick(
            (" note", " x = y + 1  # nested", "", " é ∑ 中文", "#", " TODO: (unbalanced [", "\tTabbed")
        )

    def block(self, depth: int, n: int | None = None) -> list[Stmt]:
        n = self.int(0, 4) if n is None else n
        out = []
        for _ in range(n):
            if self.budget <= 0:
                break
            self.budget -= 1
            s = self.stmt(depth)
            if s is not None:
                out.append(self.decorate(s))
        return out

    def stmt(self, depth: int) -> Stmt | None:
        opts: list[tuple[int, Callable[[], Stmt | None]]] = [
            (10, self.assign_new),
            (6, self.assign_existing),
            (3, self.store),
            (1, self.alias),
            (1, self.topk),
            (1, self.atomic_stmt),
        ]
        if depth < self.max_depth:
            opts += [(3, lambda: self.for_stmt(depth)), (3, lambda: self.if_stmt(depth))]
        if any(m.kind == "mbar" for m in self.mem.values()) or any(m.kind == "smem" for m in self.mem.values()):
            opts.append((5, self.explicit_stmt))
        total = sum(w for w, _ in opts)
        for _ in range(4):
            r = self.int(0, total - 1)
            for w, make in opts:
                if r < w:
                    s = make()
                    if s is not None:
                        return s
                    break
                r -= w
        return self.assign_new()

    def assign_new(self) -> Stmt:
        ty = self.value_type()
        value = self.one(ty, self.int(0, 3))
        name = self.fresh()
        self.bind(name, ty)
        return Stmt("assign", name, value)

    def assign_existing(self) -> Stmt | None:
        names = sorted(self.visible())
        if not names:
            return None
        name = self.pick(names)
        ty = self.lookup(name)
        if self.may_retype() and self.chance(15):
            ty = self.value_type()
        value = self.one(ty, self.int(0, 3))
        self.bind(name, ty)
        return Stmt("assign", name, value)

    def alias(self) -> Stmt | None:
        names = sorted(self.visible())
        if not names:
            return None
        src = self.pick(names)
        ty = self.lookup(src)
        same = [n for n in names if self.lookup(n) == ty and n != src]
        name = self.pick(same) if same and self.chance(50) else self.fresh()
        self.bind(name, ty)
        return Stmt("assign", name, Raw(src))

    def topk(self) -> Stmt:
        dtype = self.pick(("f32", "bf16", "i32"))
        shape = self.pick(((self.pick(DIMS),), (self.pick(DIMS), self.pick(DIMS))))
        k = self.pick(("4", "1", "2"))
        kwargs = [("k", Lit(k))]
        if self.chance(40):
            kwargs.append(("largest", Lit(self.pick("01"))))
        value = Call("topk", [self.expr((dtype, shape), self.int(0, 2))], kwargs)
        out_shape = shape[:-1] + (k,)
        a, b = self.fresh(), self.fresh()
        while b == a:
            b = self.fresh()
        self.bind(a, (dtype, out_shape))
        self.bind(b, ("i32", out_shape))
        return Stmt("assign", f"{a}, {b}", value)

    def store(self) -> Stmt | None:
        targets = [n for n, m in self.mem.items() if m.kind in ("global", "smem")]
        if not targets:
            return None
        name = self.pick(targets)
        m = self.mem[name]
        d = self.int(0, 2)
        if m.kind == "smem":
            view, shape = self.smem_view(name, d)
        else:
            shape = self.shape(self.int(0, min(2, len(m.dims))))
            view = self.global_access(name, shape, d)
            if view is None:
                return None
        vshape = self.pick(
            [shape, ()]
            + ([(shape[0], "1"), ("1", shape[1]), (shape[1],)] if len(shape) == 2 and "1" not in shape else [])
        )
        value = self.one((m.dtype, vshape), d, want=m.dtype)
        kwargs = [("mask", self.mask_for(shape, d))] if self.chance(30) else []
        return Stmt("expr", value=Call("store", [view, value], kwargs, breaks=self.chance(10)))

    def atomic_stmt(self) -> Stmt | None:
        e = self.atomic_expr((self.pick(("f32", "i32", "i64", "bf16")), self.shape(self.int(0, 2))), self.int(0, 2))
        return Stmt("expr", value=e) if e is not None else None

    def loop_bound(self, dtype: str) -> E:
        return self.one((dtype, ()), self.int(0, 1), want="i32", lit_percent=60)

    def for_stmt(self, depth: int) -> Stmt:
        dtype = "i64" if self.chance(10) else "i32"
        lo, hi = self.group([(dtype, ()), (dtype, ())], "i32", self.int(0, 1), lit_percent=60)
        header = f"for {{iv}} in {lo.text()} .. {hi.text()}"
        if self.chance(30):
            step = self.one((dtype, ()), 0, want="i32", lit_percent=80) if dtype == "i32" else self.expr((dtype, ()), 0)
            header += f" step {step.text()}"
        if self.chance(20):
            header += f" pipeline(stages = {self.pick(('S', '2', 'S + 1'))})"
        if self.chance(10):
            header += " warp_specialize"
        iv = (
            self.fresh()
            if self.chance(85)
            else self.pick(["i", "k"] + sorted(n for n, t in self.visible().items() if t == (dtype, ())))
        )
        self.frames.append("for")
        self.scopes.append({iv: (dtype, ())})
        body = self.block(depth + 1)
        # carried values: rebind a few visible names with their own type
        carried = [n for n in sorted(self.visible()) if n != iv and self.lookup(n) is not None]
        for _ in range(self.int(0, 2)):
            if carried and self.budget > 0:
                self.budget -= 1
                name = self.pick(carried)
                ty = self.lookup(name)
                body.append(self.decorate(Stmt("assign", name, self.one(ty, self.int(0, 2)))))
        self.scopes.pop()
        self.frames.pop()
        return Stmt("for", header.replace("{iv}", iv), body=body)

    def if_stmt(self, depth: int) -> Stmt:
        cond = self.one(("i1", ()), self.int(0, 2), want="i1", lit_percent=10)
        self.frames.append("if")
        self.scopes.append({})
        then = self.block(depth + 1)
        then_new = dict(self.scopes.pop())
        orelse = None
        else_if = False
        both: dict[str, Type] = {}
        if self.chance(60):
            self.scopes.append({})
            if self.chance(25):
                else_if = True
                orelse = [self.if_stmt(depth + 1)]
            else:
                orelse = self.block(depth + 1)
                if self.chance(40):
                    # assign a name new in the then-branch here too: it becomes a result
                    fresh_new = [n for n in then_new if self.lookup(n) is None]
                    if fresh_new:
                        name = self.pick(fresh_new)
                        orelse.append(self.decorate(Stmt("assign", name, self.one(then_new[name], 1))))
                        self.bind(name, then_new[name])
            else_new = self.scopes.pop()
            for name, ty in else_new.items():
                if name in then_new and self.lookup(name) is None:
                    # a name new in both branches is a result of the `if`; with two types
                    # it would not type-check
                    if then_new[name] != ty:
                        raise _Retry
                    both[name] = ty
        self.frames.pop()
        for name, ty in both.items():
            self.bind(name, ty)
        return Stmt("if", cond.text(), body=then, orelse=orelse, else_if=else_if)

    # ---- the explicit level ------------------------------------------------------------------

    def bar_ref(self, d: int = 0) -> E | None:
        bars = [n for n, m in self.mem.items() if m.kind == "mbar"]
        if not bars:
            return None
        return Index(Raw(self.pick(bars)), [self.index_scalar(d)])

    def explicit_stmt(self) -> Stmt | None:
        which = self.pick(
            (
                "wait",
                "arrive",
                "expect",
                "tma.load",
                "tma.store",
                "cp.async",
                "commit",
                "cpwait",
                "barrier",
                "fence",
                "wgmma",
                "wgmma.wait",
                "store_wait",
                "smem_store",
            )
        )
        d = self.int(0, 1)
        if which in ("wait", "arrive", "expect"):
            bar = self.bar_ref(d)
            if bar is None:
                return None
            if which == "wait":
                return Stmt(
                    "expr",
                    value=Call("wait", [bar], [("parity", self.one(("i32", ()), d, want="i32", lit_percent=40))]),
                )
            if which == "arrive":
                return Stmt(
                    "expr", value=Call("arrive", [bar], [("count", Lit(self.pick("12")))] if self.chance(30) else [])
                )
            smem = [n for n, m in self.mem.items() if m.kind == "smem"]
            nbytes = self.one(("i32", ()), d, want="i32", lit_percent=40)
            if smem and self.chance(60):
                nbytes = Bin("+", Call("sizeof", [self.smem_view(self.pick(smem), 0)[0]]), nbytes)
            return Stmt("expr", value=Call("expect", [bar], [("bytes", nbytes)]))
        smems = [n for n, m in self.mem.items() if m.kind == "smem"]
        if which in ("tma.load", "tma.store", "cp.async", "smem_store") and smems:
            buf = self.pick(smems)
            m = self.mem[buf]
            view, shape = self.smem_view(buf, d)
            if which == "smem_store":
                return Stmt(
                    "expr", value=Call("store", [view, self.one((m.dtype, self.pick((shape, ()))), d, want=m.dtype)])
                )
            globals_ = [
                n
                for n, g in self.mem.items()
                if g.kind == "global" and g.dtype == m.dtype and len(g.dims) >= len(shape)
            ]
            if not globals_:
                return None
            g = self.pick(globals_)
            rank = len(self.mem[g].dims)
            subs: list = [self.index_scalar(d) for _ in range(rank)]
            for p, ext in zip(sorted(self.pick(list(_combinations(rank, len(shape))))), shape, strict=True):
                subs[p] = self.slice_sub(ext, d)
            box = Index(Raw(g), subs)
            if which == "tma.load":
                bar = self.bar_ref(d)
                if bar is None:
                    return None
                return Stmt("expr", value=Call("tma.load", [box, view], [("signal", bar)], breaks=self.chance(20)))
            if which == "tma.store":
                return Stmt("expr", value=Call("tma.store", [view, box]))
            kwargs = [("mask", self.mask_for(shape, d))] if self.chance(40) else []
            return Stmt("expr", value=Call("cp.async", [box, view], kwargs))
        if which == "wgmma":
            pairs = [
                (a, b)
                for a in smems
                for b in smems
                if self.mem[a].dtype == self.mem[b].dtype and self.mem[a].dims[2] == self.mem[b].dims[1]
            ]
            if not pairs:
                return None
            a, b = self.pick(pairs)
            acc_ty = ("f32", (self.mem[a].dims[1], self.mem[b].dims[2]))
            names = self.vars_of(acc_ty)
            name = self.pick(names) if names and self.chance(70) else self.fresh()
            value = Call(
                "wgmma",
                [Index(Raw(a), [self.index_scalar(d)]), Index(Raw(b), [self.index_scalar(d)]), self.expr(acc_ty, d)],
            )
            if self.lookup(name) is not None and self.lookup(name) != acc_ty:
                name = self.fresh()
            self.bind(name, acc_ty)
            return Stmt("assign", name, value)
        simple = {"commit": "cp.async.commit", "barrier": "barrier", "fence": "fence.async"}
        if which in simple:
            return Stmt("expr", value=Call(simple[which]))
        waits = {"cpwait": "cp.async.wait", "wgmma.wait": "wgmma.wait", "store_wait": "tma.store_wait"}
        if which in waits:
            return Stmt("expr", value=Call(waits[which], [Lit(str(self.int(0, 2)))]))
        return None

    def role(self, name: str, unit: str, ids: list[int]) -> Stmt:
        head = f"role {name} {unit}({', '.join(map(str, ids))})"
        if self.chance(70):
            head += f" regs({self.pick((40, 232, 128, 0))})"
        self.frames.append("role")
        self.scopes.append({})
        body = self.block(1, self.int(1, 5))
        self.scopes.pop()
        self.frames.pop()
        return Stmt("role", head, body=body)

    # ---- the kernel ----------------------------------------------------------------------------

    def program(self) -> str:
        while True:
            saved = (self.budget, self.counter)
            try:
                return self._program()
            except _Retry:
                self.budget, self.counter = saved
                self.scopes, self.mem, self.frames = [], {}, []

    def _program(self) -> str:
        explicit = self.chance(35)
        params = [
            ("BM", self.pick((16, 32, 64, 128))),
            ("BN", self.pick((16, 64, 128))),
            ("BK", self.pick((16, 32, 64))),
            ("S", self.int(2, 4)),
        ]
        if self.chance(30):
            params.append(("NEG", -self.int(1, 9)))
        if self.chance(30):
            params.append(("UNROLL", self.int(0, 4)))
        order = list(range(len(params)))
        if self.chance(30):
            order.reverse()
        self.params = [params[i] for i in order]
        # global arguments
        arg_specs = (
            [("a", "bf16", ("M", "K")), ("b", "bf16", ("K", "N")), ("c", "f32", ("M", "N"))]
            if explicit
            else [("x", "f32", ("M", "N"))]
        )
        for i in range(self.int(1, 4)):
            dtype = self.pick(("f32", "bf16", "i64", "i1", "i32", "f16", "u8", "f64", "i8"))
            dims = self.pick((("M",), ("N",), ("M", "N"), ("K", "N"), ("M", "K")))
            arg_specs.append((f"g{i}", dtype, dims))
        args = []
        self.symbols = sorted({d for _, _, dims in arg_specs for d in dims})
        for name, dtype, dims in arg_specs:
            self.mem[name] = Mem("global", dtype, dims)
            text = f"{name}: {'out ' if self.chance(30) else ''}global {dtype}[{', '.join(dims)}]"
            if len(dims) == 2 and self.chance(15):
                text += f" strides({dims[1]}, 1)"
            if self.chance(25):
                text += f" align({self.pick((16, 8, 128))})"
            args.append(text)
        head = f"kernel {self.pick(('k', 'gemm_ws', 'fused_op', 'kernel_1'))}"
        head += "<" + ", ".join(f"{n} = {v}" for n, v in self.params) + ">"
        if self.chance(30):
            head += (
                "(\n" + "".join(f"    {a},{'  # ' + a.split(':')[0] if self.chance(10) else ''}\n" for a in args) + ")"
            )
        else:
            head += "(" + ", ".join(args) + (", " if self.chance(10) else "") + ")"
        lines = []
        if self.chance(30):
            lines.append(self.comment())
            if self.chance(30):
                lines.append("")
        lines.append(head)
        if self.chance(60):
            conds = [
                "M % BM == 0",
                "N % BN == 0",
                "K % BK == 0",
                "M > 0",
                "min(M, N) >= 16",
                "cdiv(K, BK) < 1000",
                "N - 1 >= -1",
                "(M + N) * 2 != 0",
            ]
            conds = [c for c in conds if "K" not in c.replace("BK", "") or "K" in self.symbols]
            n = self.int(1, 3)
            lines.append("  where " + ", ".join(self.pick(conds) for _ in range(n)))
        grids = [
            "cdiv(M, BM)",
            "M / BM",
            "N / BN",
            "1",
            "(N + BN - 1) / BN",
            "max(M / BM, 1)",
            "M * N / (BM * BN)",
            "-(-M / BM)",
        ]
        grid = ", ".join(self.pick(grids) for _ in range(self.int(1, 3)))
        unit, count = ("warpgroups", 3) if explicit else ("warps", self.pick((1, 4, 8)))
        sep = "\n  " if self.chance(30) else " "
        lines.append(
            f"  target {self.pick(('sm_90', 'sm_80', 'interp', 'mtia-sim', 'gfx942'))}{sep}grid({grid}){sep}{unit}({count})"
        )
        lines.append("{  # body" if self.chance(10) else "{")
        self.scopes.append({})
        body: list[Stmt] = []
        if explicit:
            for name, dtype, dims in (("as", "bf16", ("S", "BM", "BK")), ("bs", "bf16", ("S", "BK", "BN"))):
                sw = self.pick(("", ", swizzle = 128", ", swizzle = 64", ", swizzle = 0"))
                body.append(self.decorate(Stmt("assign", name, Raw(f"smem({dtype}[{', '.join(dims)}]{sw})"))))
                self.mem[name] = Mem("smem", dtype, dims)
            for name, count_ in (("full", "1"), ("empty", "2")):
                count_text = "" if count_ == "1" and self.chance(50) else f", count = {count_}"
                body.append(self.decorate(Stmt("assign", name, Raw(f"mbarrier(S{count_text})"))))
                self.mem[name] = Mem("mbar")
            body += self.block(1, self.int(0, 3))
            ids = [[0], [1, 2]] if self.chance(70) else [[0, 1], [2]]
            for i, group in enumerate(ids):
                body.append(
                    self.decorate(self.role(self.pick(ROLE_NAMES) + str(i), self.pick(("warpgroups", "warps")), group))
                )
            body += self.block(1, self.int(0, 2))
        else:
            body += self.block(1, self.int(1, 14))
        self.scopes.pop()
        indent = self.pick(("  ", "    ", "\t", " "))
        out: list[str] = []
        render_block(body, 1, out, indent)
        lines += out
        lines.append("}  # end" if self.chance(20) else "}")
        if self.chance(20):
            lines.append(self.comment())
        return "\n".join(lines) + ("" if self.chance(10) else "\n")


class _Retry(Exception):
    """The branch just generated cannot type-check; generate the program again."""


def _combinations(n: int, k: int) -> list[tuple[int, ...]]:
    from itertools import combinations

    return list(combinations(range(n), k))


def random_program(seed: int, **kw) -> str:
    """A program from a seed, for debugging: `print(random_program(3))`."""
    import random

    rng = random.Random(seed)
    return ProgramGen(rng.randint, **kw).program()
