"""Reductions, scans, top-k and dot in C++: the operand staged in shared memory, combined in
the interpreter's order."""

from __future__ import annotations

from xdsl.ir import Operation

from kir.dialect import tile as tl
from kir.dialect.types import dtype_of
from kir.dtypes import DTYPES
from lowering.emit.cbase.dialect import Unsupported, _prod
from lowering.emit.cbase.values import Scalar, Tile


class Reductions:
    """The reductions, scans, top-k and dot of `KernelGen`."""

    def _reduce_setup(self, op: Operation, what: str) -> tuple[Tile, int, int, int, int]:
        x = self.val(op.operands[0])
        assert isinstance(x, Tile)
        self.require_sync(what)
        axis = op.axis.data
        n = x.shape[axis]
        return x, n, _prod(x.shape[:axis]), _prod(x.shape[axis + 1 :]), axis

    def strided(self, total: int, op: Operation) -> None:
        T, tid = self.instance.threads, self.instance.tid
        self.w.line(f"for (int kir_t = {tid}; kir_t < {total}; kir_t += {T}) {{", op)
        self.w.indent()

    def read_rows(self, x: Tile | Scalar, op: Operation, n: int, inner: int, ptr: str) -> None:
        """Read the reduced value of each (outer, inner) row from position 0 of the scratch."""
        if isinstance(x, Scalar):
            self.w.line(f"{x.name} = {ptr}[0];", op)
            return
        idx, lin, closers = self.open_slots(x.layout, x.shape, op)
        self.w.line(f"{x.name}[kir_i] = {ptr}[({lin} / {inner}) * {n * inner} + {lin} % {inner}];", op)
        self.close(closers)

    def op_reduce(self, op: Operation) -> None:
        arg = isinstance(op, tl.ArgReduceOp)
        x, n, outer, inner, _ = self._reduce_setup(op, op.fn.data)
        dt = x.dtype
        ct = self.c.ctype(dt)
        w = self.w
        res = self.declare(op.results[0], op)
        w.line("{", op)
        w.indent()
        vals = self.scratch(ct, _prod(x.shape), DTYPES[dt].nbytes)
        idxs = self.scratch("int", _prod(x.shape), 4) if arg else None
        idx, lin, closers = self.open_slots(x.layout, x.shape, op)
        w.line(f"{vals}[{lin}] = {self.own(op.operands[0], idx)};", op)
        if idxs:
            w.line(f"{idxs}[{lin}] = ({lin} / {inner}) % {n};", op)
        self.close(closers)
        self.sync(op)
        m = n
        while m > 1:
            h = m // 2
            self.strided(outer * h * inner, op)
            w.line(f"const int kir_p = (kir_t / {h * inner}) * {n * inner} + kir_t % {h * inner};", op)
            w.line(f"const {ct} kir_a = {vals}[kir_p], kir_b = {vals}[kir_p + {h * inner}];", op)
            if idxs is None:
                fn = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}[op.fn.data]
                w.line(f"{vals}[kir_p] = {self.c.binary(fn, 'kir_a', 'kir_b', dt)};", op)
            else:
                w.line(f"if ({self.arg_better(op.fn.data, 'kir_b', 'kir_a', dt)}) {{", op)
                w.line(f"    {vals}[kir_p] = kir_b;", op)
                w.line(f"    {idxs}[kir_p] = {idxs}[kir_p + {h * inner}];", op)
                w.line("}", op)
            self.close(1)
            self.sync(op)
            if m % 2:  # the odd last element moves down to wait for the next level
                self.strided(outer * inner, op)
                w.line(f"const int kir_p = (kir_t / {inner}) * {n * inner} + kir_t % {inner};", op)
                w.line(f"{vals}[kir_p + {h * inner}] = {vals}[kir_p + {2 * h * inner}];", op)
                if idxs:
                    w.line(f"{idxs}[kir_p + {h * inner}] = {idxs}[kir_p + {2 * h * inner}];", op)
                self.close(1)
                self.sync(op)
            m = h + m % 2
        self.read_rows(res, op, n, inner, idxs or vals)
        self.sync(op)
        w.dedent()
        w.line("}", op)
        self.scratch_top = 0

    def arg_better(self, fn: str, b: str, a: str, dt: str) -> str:
        """Whether the right candidate `b` replaces the left `a` (lower index) in argmax/argmin:
        strictly better, or NaN where `a` is not (the first NaN wins)."""
        x, y = self.c.widen(a, dt), self.c.widen(b, dt)
        cmp = ">" if fn == "argmax" else "<"
        if not DTYPES[dt].is_float:
            return f"{y} {cmp} {x}"
        return f"({x} == {x}) && ({y} != {y} || {y} {cmp} {x})"

    def op_scan(self, op: tl.ScanOp) -> None:
        x, n, outer, inner, _ = self._reduce_setup(op, op.fn.data)
        dt = x.dtype
        ct = self.c.ctype(dt)
        fn = {"cumsum": "add", "cumprod": "mul", "cummax": "maximum", "cummin": "minimum"}[op.fn.data]
        w = self.w
        res = self.declare(op.res, op)
        w.line("{", op)
        w.indent()
        vals = self.scratch(ct, _prod(x.shape), DTYPES[dt].nbytes)
        self.store_to_scratch(op.operand, vals, op)
        self.sync(op)
        self.strided(outer * inner, op)
        w.line(f"const int kir_p = (kir_t / {inner}) * {n * inner} + kir_t % {inner};", op)
        first, last, step = (n - 1, -1, -1) if op.reverse.data else (0, n, 1)
        w.line(f"{ct} kir_acc = {vals}[kir_p + {first * inner}];", op)
        w.line(f"for (int kir_j = {first + step}; kir_j != {last}; kir_j += {step}) {{", op)
        w.line(f"    const {ct} kir_b = {vals}[kir_p + kir_j * {inner}];", op)
        w.line(f"    kir_acc = {self.c.binary(fn, 'kir_acc', 'kir_b', dt)};", op)
        w.line(f"    {vals}[kir_p + kir_j * {inner}] = kir_acc;", op)
        w.line("}", op)
        self.close(1)
        self.sync(op)
        assert isinstance(res, Tile)
        idx, lin, closers = self.open_slots(res.layout, res.shape, op)
        w.line(f"{res.name}[kir_i] = {vals}[{lin}];", op)
        self.close(closers)
        self.sync(op)
        w.dedent()
        w.line("}", op)
        self.scratch_top = 0

    def op_topk(self, op: tl.TopKOp) -> None:
        x = self.val(op.operand)
        assert isinstance(x, Tile)
        self.require_sync("topk")
        dt = x.dtype
        ct = self.c.ctype(dt)
        n = x.shape[-1]
        rows = _prod(x.shape[:-1])
        k = self.static(op.k.data, "k")
        if not 1 <= k <= n:
            raise Unsupported(op, f"topk: k = {k} must be between 1 and {n}")
        w = self.w
        results = [self.declare(op.values, op), self.declare(op.indices, op)]
        w.line("{", op)
        w.indent()
        vals = self.scratch(ct, rows * n, DTYPES[dt].nbytes)
        out_v = self.scratch(ct, rows * k, DTYPES[dt].nbytes)
        out_i = self.scratch("int", rows * k, 4)
        self.store_to_scratch(op.operand, vals, op)
        self.sync(op)
        # the rank of an element is the number of elements of its row that come before it
        # (better, or equal with a lower index; NaN ranks above every number)
        self.strided(rows * n, op)
        w.line(f"const int kir_row = kir_t / {n}, kir_j = kir_t % {n};", op)
        w.line(f"const {ct} kir_v = {vals}[kir_t];", op)
        w.line("int kir_rank = 0;", op)
        w.line(f"for (int kir_m = 0; kir_m < {n}; ++kir_m) {{", op)
        w.line(f"    const {ct} kir_u = {vals}[kir_row * {n} + kir_m];", op)
        w.line(
            f"    kir_rank += {self.topk_before('kir_u', 'kir_v', 'kir_m', 'kir_j', dt, bool(op.largest.data))};", op
        )
        w.line("}", op)
        w.line(f"if (kir_rank < {k}) {{", op)
        w.line(f"    {out_v}[kir_row * {k} + kir_rank] = kir_v;", op)
        w.line(f"    {out_i}[kir_row * {k} + kir_rank] = kir_j;", op)
        w.line("}", op)
        self.close(1)
        self.sync(op)
        for r, ptr in zip(results, (out_v, out_i), strict=True):
            assert isinstance(r, Tile)
            idx, lin, closers = self.open_slots(r.layout, r.shape, op)
            w.line(f"{r.name}[kir_i] = {ptr}[{lin}];", op)
            self.close(closers)
        self.sync(op)
        w.dedent()
        w.line("}", op)
        self.scratch_top = 0

    def topk_before(self, u: str, v: str, m: str, j: str, dt: str, largest: bool) -> str:
        x, y = self.c.widen(u, dt), self.c.widen(v, dt)
        cmp = ">" if largest else "<"
        if not DTYPES[dt].is_float:
            return f"(({x} {cmp} {y}) || ({x} == {y} && {m} < {j}))"
        first = f"({x} != {x} && {y} == {y})" if largest else f"({x} == {x} && {y} != {y})"
        tie = f"((({x} == {y}) || ({x} != {x} && {y} != {y})) && {m} < {j})"
        return f"({first} || ({x} {cmp} {y}) || {tie})"

    def op_dot(self, op: tl.DotOp) -> None:
        a, b = self.val(op.lhs), self.val(op.rhs)
        assert isinstance(a, Tile) and isinstance(b, Tile)
        self.require_sync("dot")
        m, k = a.shape
        n = b.shape[1]
        in_dt, acc_dt = a.dtype, dtype_of(op.res.type)
        c = self.c
        if DTYPES[acc_dt].is_float:
            comp = c.compute_dtype(acc_dt)
        else:
            comp = "i64"
        cct = c.ctype(comp)
        w = self.w
        res = self.declare(op.res, op)
        assert isinstance(res, Tile)
        w.line("{", op)
        w.indent()
        pa = self.scratch(c.ctype(in_dt), m * k, DTYPES[in_dt].nbytes)
        pb = self.scratch(c.ctype(in_dt), k * n, DTYPES[in_dt].nbytes)
        self.store_to_scratch(op.lhs, pa, op)
        self.store_to_scratch(op.rhs, pb, op)
        self.sync(op)
        idx, lin, closers = self.open_slots(res.layout, res.shape, op)

        def widen(x: str) -> str:
            if DTYPES[acc_dt].is_float:
                return c.cast(x, in_dt, comp)
            return c.cast(c.cast(x, in_dt, acc_dt), acc_dt, "i64")

        w.line(f"{cct} kir_s = {c.zero(comp)};", op)
        w.line(f"for (int kir_k = 0; kir_k < {k}; ++kir_k) {{", op)
        xa, xb = widen(f"{pa}[{idx[0]} * {k} + kir_k]"), widen(f"{pb}[kir_k * {n} + {idx[1]}]")
        if comp == "i64":
            w.line(
                f"    kir_s = (long long)((unsigned long long)kir_s + (unsigned long long){xa} * (unsigned long long){xb});",
                op,
            )
        else:
            w.line(f"    kir_s += {xa} * {xb};", op)
        w.line("}", op)
        if op.acc is not None:
            wide = c.cast(self.fetch(op.acc, res.shape, res.layout, idx), acc_dt, comp)
            if comp == "i64":
                w.line(f"kir_s = (long long)((unsigned long long)kir_s + (unsigned long long){wide});", op)
            else:
                w.line(f"kir_s += {wide};", op)
        w.line(f"{res.name}[kir_i] = {c.cast('kir_s', comp, acc_dt)};", op)
        self.close(closers)
        self.sync(op)
        w.dedent()
        w.line("}", op)
        self.scratch_top = 0
