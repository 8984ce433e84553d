"""A small concrete instance of a kernel's shapes, for the bounded model check.

Shape symbols satisfy the `where` constraints and, where they allow it, are large enough that
every loop goes round each mbarrier ring at least twice (so parity and release bugs show up),
and small enough to run in milliseconds. Inputs are random with both signs; integer inputs are
zero so that indices read from memory stay in bounds.
"""

from __future__ import annotations

import numpy as np
import z3

from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect.types import GlobalType
from kir.dtypes import DTYPES

MAX_ELEMENTS = 1 << 22


def small_instance(ctx) -> tuple[dict[str, np.ndarray], dict[str, int]] | None:
    """Inputs and shapes of a small instance (None where none is small enough)."""
    found = _shapes(ctx, rings=True)
    instance = _inputs(ctx, found) if found is not None else None
    if instance is None:  # going round the rings takes shapes too large to run: the smallest ones
        found = _shapes(ctx, rings=False)
        instance = _inputs(ctx, found) if found is not None else None
    return instance


def _shapes(ctx, rings: bool) -> dict[str, int] | None:
    kernel = ctx.kernel
    sym = ctx.symbolic
    ring = max((ctx.static(i.op.res.type.size.data) or 1 for i in ctx.ops(ex.MBarrierAllocOp)), default=1)
    # A context of its own, and a budget of solver steps rather than seconds: the instance must
    # depend neither on the machine's load nor on what the process solved before (in the shared
    # context the same search took 0.13 M steps first and 1.6 M the second time; the persistent
    # attention's needs ~0.13 M). The timeout is a backstop.
    z3ctx = z3.Context()
    opt = z3.Optimize(ctx=z3ctx)
    opt.set("rlimit", 10_000_000)
    opt.set("timeout", 20_000)
    names = kernel.shape_symbols
    variables = [sym.sym_var(n).translate(z3ctx) for n in names]
    opt.add(*(f.translate(z3ctx) for f in sym.shape_facts()))
    for v in variables:
        opt.add(v <= 1 << 16)
    # Loops whose trip count depends only on sizes should go round each ring twice. The check
    # runs the first program: its ids are 0 (a persistent program's loop over its tiles counts).
    first = [(p, z3.IntVal(0)) for p in sym.pids]
    for info in ctx.ops(st.ForOp) if rings else ():
        loop = info.op
        lo, hi = sym.value(loop.lower), sym.value(loop.upper)
        if lo.tainted or hi.tainted:
            continue
        trips = z3.substitute(hi.expr - lo.expr, *first) if first else hi.expr - lo.expr
        if _only_sizes(trips, set(names)):
            opt.add_soft((trips >= 2 * ring + 1).translate(z3ctx))
    opt.minimize(z3.Sum(variables) if variables else z3.IntVal(0, ctx=z3ctx))
    if opt.check() != z3.sat:
        return None
    model = opt.model()
    return {n: model.eval(v, model_completion=True).as_long() for n, v in zip(names, variables, strict=True)}


def _inputs(ctx, shapes: dict[str, int]) -> tuple[dict[str, np.ndarray], dict[str, int]] | None:
    kernel = ctx.kernel
    env = {**shapes, **ctx.params}
    rng = np.random.default_rng(0)
    inputs: dict[str, np.ndarray] = {}
    total = 0
    for name, arg in kernel.args:
        t = arg.type
        assert isinstance(t, GlobalType)
        if t.is_out:
            continue
        shape = tuple(d.data.evaluate(env) for d in t.shape.data)
        total += int(np.prod(shape)) if shape else 1
        if total > MAX_ELEMENTS:
            return None
        d = DTYPES[t.dtype.data]
        if d.is_float:
            inputs[name] = rng.standard_normal(shape).astype(d.numpy)
        elif d.kind == "bool":
            inputs[name] = rng.integers(0, 2, shape).astype(bool)
        else:
            inputs[name] = np.zeros(shape, dtype=d.numpy)
    return inputs, shapes


def _only_sizes(expr: z3.ExprRef, sizes: set[str]) -> bool:
    """Whether every variable of `expr` is a shape symbol (no program id, loop variable, ...)."""
    seen = []

    def visit(e):
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            seen.append(e.decl().name())
        for c in e.children():
            visit(c)

    visit(expr)
    return all(n in sizes for n in seen)
