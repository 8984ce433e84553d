"""What the two Python backends (Triton and Gluon) write alike: Python's operator precedence and
where it calls for parentheses, KIR's operators as Python's, the element types by name, the
NaN-propagating maximum and minimum, and the reductions built on them.

Each backend passes its language module's name (`ns`: "tl" for `triton.language`, "gl" for
Gluon's) where the two spell a call the same way in their own module."""

from __future__ import annotations

from kir.dialect.tile import CMP_PREDICATES

# ---- precedence --------------------------------------------------------------------------------

# Python's operator precedence, loosest first.
CMP, OR, XOR, AND, SHIFT, SUM, PRODUCT, UNARY, ATOM = range(9)
PREC = {
    "|": OR,
    "^": XOR,
    "&": AND,
    "<<": SHIFT,
    ">>": SHIFT,
    "+": SUM,
    "-": SUM,
    "*": PRODUCT,
    "/": PRODUCT,
    "//": PRODUCT,
    "%": PRODUCT,
}


def paren(text: str, prec: int, parent: int = ATOM, right: bool = False) -> str:
    """`text`, an expression of precedence `prec`, as an operand of an operator of precedence
    `parent`; a `right` operand is parenthesized at equal precedence too (`a - (b - c)`).
    Comparisons chain in Python (`a < b == c` means `a < b and b == c`): always parenthesized."""
    if prec == CMP or prec < parent or (right and prec == parent):
        return f"({text})"
    return text


class PyExpr:
    """Mixed into a backend's value type, which has `text` (Python source) and `prec`."""

    text: str
    prec: int

    def operand(self, parent: int = ATOM, right: bool = False) -> str:
        """The text as an operand of an operator of precedence `parent` (see `paren`)."""
        return paren(self.text, self.prec, parent, right)


def infix(a: PyExpr, sym: str, b: PyExpr) -> str:
    """`a sym b`, each side parenthesized where Python needs it."""
    prec = PREC[sym]
    return f"{a.operand(prec)} {sym} {b.operand(prec, right=True)}"


def int_text(n: int) -> tuple[str, int]:
    """An integer literal and its precedence (a negative one is a unary minus)."""
    return str(n), ATOM if n >= 0 else UNARY


def special_float_text(value: float) -> str | None:
    """NaN and the infinities as Python expressions (None for a finite value)."""
    if value != value:
        return 'float("nan")'
    if value in (float("inf"), float("-inf")):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    return None


# ---- KIR's operators ---------------------------------------------------------------------------

# Binary operators whose Python spelling is KIR's meaning on integers (the backends guard the
# cases where it is not: division by zero, shifts past the width).
INFIX = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "rem": "%",
    "and": "&",
    "or": "|",
    "xor": "^",
    "shl": "<<",
    "shr": ">>",
}
COMPARE = CMP_PREDICATES  # Python's comparison operators are KIR's predicates' symbols

# Static expressions (kir.symexpr) over parameters and shape symbols, as run-time Python.
STATIC_INFIX = {"+": "+", "-": "-", "*": "*", "/": "//", "%": "%"}
STATIC_CALLS = {"cdiv": "cdiv", "min": "minimum", "max": "maximum"}


def static_op(op: str, ns: str, lhs: tuple[str, int], rhs: tuple[str, int]) -> tuple[str, int]:
    """A static expression's operator `op` over two rendered operands (text, precedence)."""
    if op in STATIC_CALLS:
        return f"{ns}.{STATIC_CALLS[op]}({lhs[0]}, {rhs[0]})", ATOM
    sym = STATIC_INFIX[op]
    prec = PREC[sym]
    return f"{paren(*lhs, prec)} {sym} {paren(*rhs, prec, right=True)}", prec


# ---- element types -----------------------------------------------------------------------------

_LANGUAGE_DTYPE = {
    "i1": "int1",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "f8e4m3": "float8e4nv",
    "f8e5m2": "float8e5",
}


def dtype_names(ns: str) -> dict[str, str]:
    """KIR dtype -> the language module's dtype (`tl.bfloat16`, `gl.bfloat16`)."""
    return {k: f"{ns}.{v}" for k, v in _LANGUAGE_DTYPE.items()}


# Triton's names in a kernel signature (`ASTSource`), without the pointer star; Gluon kernels
# compile through the same signatures.
SIGNATURE_DTYPE = {
    "i1": "i1",
    "i8": "i8",
    "i16": "i16",
    "i32": "i32",
    "i64": "i64",
    "u8": "u8",
    "u16": "u16",
    "u32": "u32",
    "u64": "u64",
    "f16": "fp16",
    "bf16": "bf16",
    "f32": "fp32",
    "f64": "fp64",
    "f8e4m3": "fp8e4nv",
    "f8e5m2": "fp8e5",
}


# ---- maximum, minimum and reductions -----------------------------------------------------------


def nan_minmax(ns: str, fn: str, a: str, b: str) -> str:
    """KIR's float `maximum` or `minimum` (`fn`): a NaN in either operand gives NaN, which the
    languages' own do only when asked (both take Triton's `tl.PropagateNan`)."""
    return f"{ns}.{fn}({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"


def nan_combine(decorator: str, name: str, ns: str, fn: str, what: str) -> list[str]:
    """The lines of the combine function `name` of float max / min reductions and scans
    (`fn`: maximum or minimum; `what` names it in the function's comment)."""
    return [
        decorator,
        f"def {name}(a, b):",
        f"    # KIR's {what}: a NaN in either operand gives NaN",
        f"    return {nan_minmax(ns, fn, 'a', 'b')}",
    ]


def product_combine(decorator: str, name: str) -> list[str]:
    """The lines of the combine function `name` of product reductions (neither language has one)."""
    return [decorator, f"def {name}(a, b):", "    return a * b"]


def reduce_combine(fn: str, is_float: bool) -> str | None:
    """The KIR reduction ("max", "min", "prod") that needs a combine function of the backend's,
    or None where the language's own reduction is KIR's: sums, and max and min of integers."""
    if fn == "prod" or (is_float and fn in ("max", "min")):
        return fn
    return None


def reduce_call(ns: str, fn: str, src: str, axis: int, combine: str | None) -> str:
    """A reduction of `src` along `axis`: the language's own (`fn`) or `reduce` with `combine`."""
    if combine is None:
        return f"{ns}.{fn}({src}, axis={axis})"
    return f"{ns}.reduce({src}, {axis}, {combine})"


def bool_reduce(ns: str, fn: str, ints: str, axis: int) -> str:
    """A reduction of an i1 tile given as its 0/1 values in i32 (`ints`): a sum is a parity (i1
    addition wraps), a product is the minimum. The result is a comparison."""
    return {
        "sum": f"({ns}.sum({ints}, axis={axis}) & 1) != 0",
        "prod": f"{ns}.min({ints}, axis={axis}) != 0",
        "max": f"{ns}.max({ints}, axis={axis}) != 0",
        "min": f"{ns}.min({ints}, axis={axis}) != 0",
    }[fn]


def widened_int(ns: str, x: str, kind: str) -> str:
    """`x`, an integer tile narrower than 32 bits, in 32 bits of its signedness (`kind`: "int" or
    "uint"), as product reductions take it; the caller casts the product back, which wraps it."""
    return f"{x}.to({f'{ns}.int32' if kind == 'int' else f'{ns}.uint32'})"
