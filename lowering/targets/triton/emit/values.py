"""How a KIR value reads in generated Triton code (`Val`), KIR constants as Python literals,
and static expressions (shapes, bounds, strides) as Python over the kernel's parameters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation

from kir import symexpr as sx
from kir.dtypes import DTYPES
from lowering.emit.pyexpr import ATOM, STATIC_CALLS, UNARY, PyExpr, int_text, special_float_text, static_op

from .tables import refuse

# ---- values ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Val(PyExpr):
    """A KIR value in the generated code: a Python expression and the value's KIR type."""

    text: str
    dtype: str
    shape: tuple[int, ...] = ()
    prec: int = ATOM
    # A Python number or constexpr at run time (literal, parameter, shape symbol, loop
    # variable): it takes the dtype of a tensor partner, and is materialized where it stands alone.
    loose: bool = False
    known: int | float | bool | None = None  # the value, when known at emit time
    # Bounds of a loose integer, where known: Python's `//` and `%` agree with C's on operands
    # known to be non-negative (sizes, parameters, counters from 0).
    lo: int | None = None
    hi: int | None = None


def float_text(value: float, dtype: str) -> str:
    """A Python literal whose f64 value, rounded to f32 (or f64), is exactly `value`."""
    special = special_float_text(value)
    if special is not None:
        return special
    if dtype == "f64":
        return repr(float(value))
    f = np.float32(value)
    if f == 0 or 1e-4 <= abs(f) < 1e16:
        short = np.format_float_positional(f, unique=True, trim="0")
    else:
        short = np.format_float_scientific(f, unique=True, trim="0")
    if short.endswith("."):
        short += "0"
    # Python reads the text as f64 and Triton rounds that to f32: check the two roundings land on f.
    return short if np.float32(float(short)) == f else repr(float(f))


def rounded(number: float, dtype: str) -> float:
    """A KIR float constant's value in its dtype (constants are rounded to their dtype)."""
    return float(np.asarray(number, dtype=np.float64).astype(DTYPES[dtype].numpy).astype(np.float64))


def literal(number: int | float | bool, dtype: str) -> Val:
    d = DTYPES[dtype]
    if d.kind == "bool":
        return Val("True" if number else "False", dtype, loose=True, known=bool(number))
    if d.is_int:
        n = int(number)
        text, prec = int_text(n)
        return Val(text, dtype, prec=prec, loose=True, known=n, lo=n, hi=n)
    value = rounded(float(number), dtype)
    text = float_text(value, "f64" if dtype == "f64" else "f32")
    neg = text.startswith("-") or text == 'float("-inf")'
    return Val(text, dtype, prec=UNARY if neg and not text.startswith("float") else ATOM, loose=True, known=value)


# ---- static expressions ------------------------------------------------------------------------


class Statics:
    """Renders static expressions (shapes, bounds, strides) as Python text over the kernel's
    constexpr parameters and i32 shape-symbol arguments."""

    def __init__(self, params: dict[str, int], param_names: dict[str, str], symbol_names: dict[str, str]):
        self.params = params
        self.param_names = param_names
        self.symbol_names = symbol_names

    def value(self, expr: sx.SymExpr) -> int | None:
        """The value when the expression depends only on parameters."""
        try:
            return expr.evaluate(self.params)
        except (KeyError, ZeroDivisionError):
            return None

    def render(self, expr: sx.SymExpr) -> tuple[str, int]:
        """(text, precedence). Parameter-only expressions keep the parameters' names where the
        Python reading gives the same value (C division of sizes), else fold to the number."""
        expr = sx.fold(expr)
        value = self.value(expr)
        if value is not None:
            text, prec = self._render(expr, fold_calls=True)
            try:
                same = (
                    eval(
                        text,
                        {"__builtins__": {}},
                        dict(zip(self.param_names.values(), self.params.values(), strict=True)),
                    )
                    == value
                )  # noqa: S307 - our own text over ints
            except Exception:  # noqa: BLE001 - any failure means: use the number
                same = False
            return (text, prec) if same else int_text(value)
        return self._render(expr, fold_calls=False)

    def _render(self, expr: sx.SymExpr, fold_calls: bool) -> tuple[str, int]:
        if isinstance(expr, sx.Int):
            return int_text(expr.value)
        if isinstance(expr, sx.Sym):
            if expr.name in self.param_names:
                return self.param_names[expr.name], ATOM
            return self.symbol_names[expr.name], ATOM
        assert isinstance(expr, sx.Bin)
        if expr.op in STATIC_CALLS:
            value = self.value(expr) if fold_calls else None
            if value is not None:
                return int_text(value)
        return static_op(expr.op, "tl", self._render(expr.lhs, fold_calls), self._render(expr.rhs, fold_calls))

    def static_text(self, expr: sx.SymExpr, op: Operation | None, what: str) -> tuple[str, int]:
        """A compile-time size: parameters only (Triton needs constexpr shapes)."""
        if self.value(expr) is None:
            raise refuse(
                op,
                "lower.tile-shape",
                f"{what} `{expr}` depends on a shape symbol; Triton needs tile shapes known at compile time",
                "make the extent a parameter (BLOCK) and mask against the shape symbol",
            )
        return self.render(expr)
