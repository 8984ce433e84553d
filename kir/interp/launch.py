"""A launch: binding the arguments to the kernel's symbols, checking the `where` constraints,
and running the programs of the grid one after another.

Binding: a shape symbol takes its value from the first argument whose declared dimension is
that bare symbol (`x: global f32[N]`); every dimension of every given array is then checked
against its declared expression. Declared stride symbols bind to the array's element strides
(the interpreter addresses tensors by logical index, so values never depend on strides).
Parameters take their defaults unless `params` overrides them. Arrays are copied before the
run, so the caller's arrays stay untouched; the result holds every argument after the run.
An `out` argument left out of `inputs` is allocated and filled with poison (NaN, or the most
negative / largest integer), so an element the kernel never writes is visible.

Programs run in launch order with axis 0 fastest; with `grid_limit = L` on a larger grid, only
the first ceil(L/2) and the last floor(L/2) programs run (the edges are where bounds go wrong).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn, cast

import numpy as np
from xdsl.ir import Attribute, Block, Operation

from kir import symexpr as sx
from kir.dialect.structure import KernelOp
from kir.dialect.types import GlobalType, shape_of
from kir.dtypes import DTYPES
from kir.interp import values as V
from kir.interp.errors import fail
from kir.interp.memory import Tensor


class Launch:
    """What every program of one launch shares: symbols, grid, global tensors, caches."""

    def __init__(
        self,
        kernel: KernelOp,
        symbols: dict[str, int],
        grid: tuple[int, ...],
        tensors: dict[str, Tensor],
        time_limit: float,
    ):
        self.kernel = kernel
        self.trace = False  # keep each CTA's last synchronization events for its counterexamples
        self.symbols = symbols
        self.grid = grid
        self.tensors = tensors
        self.arguments = {arg: tensors[name] for name, arg in kernel.args}
        self.time_limit = time_limit
        self.deadline = time.monotonic() + time_limit
        self.steps = 0
        self.op: Operation | None = None  # the op running now, for internal-error reports
        self._ops: dict[int, list[Operation]] = {}
        self._syms: dict[int, tuple[sx.SymExpr, int]] = {}
        self._shapes: dict[int, tuple[Attribute, tuple[int, ...]]] = {}
        self._cache: dict[tuple[int, str], tuple[Operation, Any]] = {}

    def sym(self, expr: sx.SymExpr) -> int:
        hit = self._syms.get(id(expr))
        if hit is None:
            try:
                value = expr.evaluate(self.symbols)
            except KeyError as err:
                fail(
                    "interp.unbound-symbol",
                    self.op,
                    f"`{err.args[0]}` in `{expr}` is neither a parameter nor a shape symbol",
                )
            except ZeroDivisionError:
                fail("interp.bad-symbolic", self.op, f"`{expr}` divides by zero with {self.symbols}")
            hit = self._syms[id(expr)] = (expr, value)
        return hit[1]

    def shape(self, t: Attribute) -> tuple[int, ...]:
        hit = self._shapes.get(id(t))
        if hit is None:
            hit = self._shapes[id(t)] = (t, tuple(self.sym(d) for d in shape_of(t)))
        return hit[1]

    def ops_of(self, block: Block) -> list[Operation]:
        ops = self._ops.get(id(block))
        if ops is None:
            ops = self._ops[id(block)] = list(iter(block.ops))  # (its len is another walk)
        return ops

    def cached(self, op: Operation, make: Callable[[], Any], tag: str = "") -> Any:
        """What `make` computes from an op's attributes and the launch's symbols, once per op:
        reading xdsl properties costs more than most tile ops."""
        key = (id(op), tag)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = (op, make())
        return hit[1]

    def check_time(self, op: Operation) -> None:
        if time.monotonic() > self.deadline:
            fail(
                "interp.timeout",
                op,
                f"the run took longer than {self.time_limit:g} s",
                "run smaller inputs, or pass grid_limit to run only some programs",
            )

    def program_ids(self, grid_limit: int | None) -> Iterator[tuple[int, int, int]]:
        dims = [*self.grid, 1, 1][:3]
        total = math.prod(dims)
        if grid_limit is not None and total > grid_limit:
            head = (grid_limit + 1) // 2
            order: Sequence[int] = [*range(head), *range(total - (grid_limit - head), total)]
        else:
            order = range(total)
        for linear in order:
            x = linear % dims[0]
            y = (linear // dims[0]) % dims[1]
            z = linear // (dims[0] * dims[1])
            yield (x, y, z)


# ---- binding -------------------------------------------------------------------------------


I32_MAX = 2**31 - 1  # shape symbols are i32 in run-time code (docs/language.md)


def _bad(kernel: KernelOp, message: str, hint: str = "", cex: dict | None = None) -> NoReturn:
    fail("interp.bad-input", kernel, message, hint, (), cex)


def _bind_dim(
    kernel, symbols: dict[str, int], params: set[str], expr: sx.SymExpr, value: int, what: str, origin: dict[str, str]
) -> None:
    if isinstance(expr, sx.Sym) and expr.name not in params:
        if expr.name not in symbols:
            if not 0 <= value <= I32_MAX:
                _bad(
                    kernel,
                    f"`{expr.name}` would be {value} from {what}: a shape symbol is an i32 (docs/language.md, "
                    f"Types), at most {I32_MAX}",
                    "split the work over several launches, or declare the dimension as a product of two "
                    "symbols (f32[M, N] for a flat buffer) and compute the flat offset in i64",
                    {expr.name: int(value)},
                )
            symbols[expr.name] = int(value)
            origin[expr.name] = what
        elif symbols[expr.name] != value:
            _bad(
                kernel,
                f"`{expr.name}` is {symbols[expr.name]} from {origin.get(expr.name, 'the parameters')} but {value} from {what}",
                "pass arrays whose shapes agree",
                {expr.name: [symbols[expr.name], int(value)]},
            )


def _element_strides(kernel, name: str, arr: np.ndarray) -> tuple[int, ...]:
    size = arr.dtype.itemsize
    if any(s % size for s in arr.strides):
        _bad(kernel, f"`{name}` has strides {arr.strides} bytes, not a multiple of its element size {size}")
    return tuple(s // size for s in arr.strides)


def _evaluate(kernel, expr: sx.SymExpr, symbols: dict[str, int], what: str) -> int:
    try:
        return expr.evaluate(symbols)
    except KeyError as err:
        _bad(
            kernel,
            f"cannot tell `{err.args[0]}` in {what} `{expr}`: no input array has it as a dimension",
            "pass the array, or make the symbol a parameter",
        )
    except ZeroDivisionError:
        _bad(kernel, f"{what} `{expr}` divides by zero with {symbols}")


def _allocate(shape: tuple[int, ...], strides: tuple[int, ...] | None, d) -> np.ndarray:
    fill = V.poison(d)
    if strides is None or strides == tuple(int(np.prod(shape[i + 1 :], dtype=np.int64)) for i in range(len(shape))):
        return np.full(shape, fill, dtype=d.numpy)
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides, strict=True)) if all(shape) else 1
    base = np.full(span, fill, dtype=d.numpy)
    return np.lib.stride_tricks.as_strided(base, shape, tuple(s * base.itemsize for s in strides))


def bind(kernel: KernelOp, inputs: dict[str, np.ndarray], params: dict[str, int], time_limit: float) -> Launch:
    defaults = kernel.params
    for k in params:
        if k not in defaults:
            _bad(
                kernel,
                f"`{k}` is not a parameter of `{kernel.kernel_name}`",
                f"its parameters: {', '.join(defaults) or 'none'}",
            )
    symbols: dict[str, int] = {**defaults, **{k: int(v) for k, v in params.items()}}
    param_names = set(defaults)
    args = [
        (name, cast(GlobalType, v.type)) for name, v in kernel.args
    ]  # the kernel verifies its arguments are tensors
    names = [n for n, _ in args]
    for k in inputs:
        if k not in names:
            _bad(kernel, f"`{k}` is not an argument of `{kernel.kernel_name}`", f"its arguments: {', '.join(names)}")
    arrays: dict[str, np.ndarray] = {}
    origin: dict[str, str] = {}
    for name, t in args:
        assert isinstance(t, GlobalType)
        d = DTYPES[t.dtype.data]
        if name not in inputs:
            if not t.is_out:
                _bad(kernel, f"input `{name}` is missing", f"pass a {t}")
            continue
        arr = np.asarray(inputs[name])
        if arr.dtype != d.numpy:
            _bad(
                kernel,
                f"`{name}` is declared {d.name} but the array holds {arr.dtype}",
                f"convert it: x.astype({d.numpy.name!r})",
            )
        dims = shape_of(t)
        if arr.ndim != len(dims):
            _bad(
                kernel,
                f"`{name}` is declared with {len(dims)} dimensions but the array has {arr.ndim} {list(arr.shape)}",
            )
        for i, (expr, n) in enumerate(zip(dims, arr.shape, strict=True)):
            _bind_dim(kernel, symbols, param_names, expr, n, f"`{name}` dimension {i}", origin)
        if t.strides.data:
            for i, (s, n) in enumerate(zip(t.strides.data, _element_strides(kernel, name, arr), strict=True)):
                _bind_dim(kernel, symbols, param_names, s.data, n, f"`{name}` stride {i}", origin)
        arrays[name] = arr
    for name, t in args:
        if name not in arrays:
            continue
        arr = arrays[name]
        for i, (expr, n) in enumerate(zip(shape_of(t), arr.shape, strict=True)):
            want = _evaluate(kernel, expr, symbols, f"the shape of `{name}`")
            if want != n:
                _bad(
                    kernel,
                    f"`{name}` dimension {i} is {n} but `{expr}` = {want}",
                    "",
                    {"argument": name, "dimension": i, "got": n, "want": want},
                )
        if t.strides.data:
            got = _element_strides(kernel, name, arr)
            for i, s in enumerate(t.strides.data):
                want = _evaluate(kernel, s.data, symbols, f"the strides of `{name}`")
                if want != got[i]:
                    _bad(kernel, f"`{name}` stride {i} is {got[i]} elements but `{s.data}` = {want}")
    for expr in (w.data for w in kernel.where.data):
        if not _evaluate(kernel, expr, symbols, "the constraint"):
            shown = {s: symbols[s] for s in sorted(expr.symbols())}
            fail(
                "interp.where-violated",
                kernel,
                f"the launch breaks `where {expr}`: " + ", ".join(f"{k} = {v}" for k, v in shown.items()),
                "pass shapes that satisfy the constraint, or relax it and mask the edges",
                (),
                shown,
            )
    tensors: dict[str, Tensor] = {}
    for name, t in args:
        d = DTYPES[t.dtype.data]
        if name in arrays:
            data = np.array(arrays[name], copy=True, order="K")
        else:
            shape = tuple(_evaluate(kernel, e, symbols, f"the shape of `{name}`") for e in shape_of(t))
            strides = (
                tuple(_evaluate(kernel, s.data, symbols, f"the strides of `{name}`") for s in t.strides.data) or None
            )
            if any(n < 0 for n in shape):
                _bad(kernel, f"`{name}` would have the negative shape {list(shape)}")
            data = _allocate(shape, strides, d)
        tensors[name] = Tensor(name, d, data)
    grid = tuple(_evaluate(kernel, g.data, symbols, "the grid") for g in kernel.grid.data)
    if any(g < 0 for g in grid):
        fail("interp.bad-grid", kernel, f"the grid {list(grid)} has a negative extent", "", (), dict(symbols))
    return Launch(kernel, symbols, grid, tensors, time_limit)
