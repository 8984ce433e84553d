"""Symbolic integer expressions over shape symbols and compile-time parameters.

They appear wherever KIR needs a value that is known before the kernel runs: tile dimensions
(`f32[BM, BN]`), global tensor shapes (`bf16[M, K]`), the launch grid (`grid(M / BM)`), and the
`where` constraints. Division is integer division truncating toward zero (as in C); every symbol
is a size, so it is never negative in a legal launch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Precedence used by the printer; higher binds tighter.
_PREC = {"==": 1, "!=": 1, "<": 1, "<=": 1, ">": 1, ">=": 1, "+": 2, "-": 2, "*": 3, "/": 3, "%": 3}
FUNCS = ("cdiv", "min", "max")
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


class SymExpr:
    """Base of the expression tree. Nodes are frozen dataclasses, so they hash and compare."""

    def __str__(self) -> str:
        return self.render(0)

    def render(self, parent_prec: int) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def symbols(self) -> set[str]:
        return set()

    def evaluate(self, env: Mapping[str, int]) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def substitute(self, env: Mapping[str, SymExpr]) -> SymExpr:
        return self

    def as_int(self) -> int | None:
        """The value when the expression is a constant, else None."""
        return None


@dataclass(frozen=True)
class Int(SymExpr):
    value: int

    def render(self, parent_prec: int) -> str:
        return str(self.value)

    def evaluate(self, env: Mapping[str, int]) -> int:
        return self.value

    def as_int(self) -> int | None:
        return self.value


@dataclass(frozen=True)
class Sym(SymExpr):
    name: str

    def render(self, parent_prec: int) -> str:
        return self.name

    def symbols(self) -> set[str]:
        return {self.name}

    def evaluate(self, env: Mapping[str, int]) -> int:
        if self.name not in env:
            raise KeyError(self.name)
        return int(env[self.name])

    def substitute(self, env: Mapping[str, SymExpr]) -> SymExpr:
        return env.get(self.name, self)


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_rem(a: int, b: int) -> int:
    return a - b * c_div(a, b)


def _apply(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%", "cdiv") and b == 0:
        raise ZeroDivisionError(f"division by zero in symbolic expression ({a} {op} {b})")
    if op == "/":
        return c_div(a, b)
    if op == "%":
        return c_rem(a, b)
    if op == "cdiv":
        return -((-a) // b)  # ceiling division (floor-based: sizes are positive)
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    comparisons = {
        "==": a == b,
        "!=": a != b,
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
    }
    return int(comparisons[op])


@dataclass(frozen=True)
class Bin(SymExpr):
    op: str
    lhs: SymExpr
    rhs: SymExpr

    def render(self, parent_prec: int) -> str:
        if self.op in FUNCS:
            return f"{self.op}({self.lhs.render(0)}, {self.rhs.render(0)})"
        prec = _PREC[self.op]
        # Left-associative: the right operand needs parentheses at equal precedence.
        text = f"{self.lhs.render(prec)} {self.op} {self.rhs.render(prec + 1)}"
        return f"({text})" if prec < parent_prec else text

    def symbols(self) -> set[str]:
        return self.lhs.symbols() | self.rhs.symbols()

    def evaluate(self, env: Mapping[str, int]) -> int:
        return _apply(self.op, self.lhs.evaluate(env), self.rhs.evaluate(env))

    def substitute(self, env: Mapping[str, SymExpr]) -> SymExpr:
        return Bin(self.op, self.lhs.substitute(env), self.rhs.substitute(env))


def fold(expr: SymExpr) -> SymExpr:
    """Constant-fold, so that `BM * 1` and `BM` or `2 * 64` and `128` compare equal."""
    if not isinstance(expr, Bin):
        return expr
    lhs, rhs = fold(expr.lhs), fold(expr.rhs)
    a, b = lhs.as_int(), rhs.as_int()
    if a is not None and b is not None:
        try:
            return Int(_apply(expr.op, a, b))
        except ZeroDivisionError:
            return Bin(expr.op, lhs, rhs)
    if expr.op == "*" and b == 1 or expr.op in ("+", "-") and b == 0 or expr.op == "/" and b == 1:
        return lhs
    if expr.op == "*" and a == 1 or expr.op == "+" and a == 0:
        return rhs
    return Bin(expr.op, lhs, rhs)


def same(a: SymExpr, b: SymExpr) -> bool:
    return fold(a) == fold(b)
