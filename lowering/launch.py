"""Binding a kernel's shape symbols to the tensors of a launch on the GPU (torch tensors, no
copies): what `kir.interp.launch.bind` does for numpy arrays, for the runtimes and the harness.

A shape symbol takes its value from the first argument whose declared dimension (or declared
stride) is that bare symbol; then every argument's shape is checked against its declared
expression, a tensor without declared strides must be contiguous, and the `where` constraints
must hold. A mismatch is a `run.bind` diagnostic at the argument (or at the kernel).
"""

from __future__ import annotations

from typing import Any, cast

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, KirError
from kir.dialect.types import GlobalType, shape_of
from kir.program import Program

I32_MAX = 2**31 - 1  # shape symbols are i32 in run-time code (docs/language.md)


def _error(program: Program, name: str | None, message: str, hint: str = "") -> KirError:
    span = program.arg_spans.get(name) if name else None
    return KirError(Diagnostic("run.bind", "error", span or program.span(), message, hint))


def bind_shapes(program: Program, params: dict[str, int], tensors: dict[str, Any]) -> dict[str, int]:
    """The shape symbols of a launch on `tensors` (every kernel argument, by name). In a
    program of several kernels, every kernel's but the scratch buffers' (whose sizes must be
    known: `scratch_sizes`)."""
    if not program.is_multi:
        return _bind_kernel(program, {**program.params, **params}, tensors, set())
    scratch_sizes(program, params, tensors)
    values = {**program.params, **params}
    symbols: dict[str, int] = {}
    for k in program.kernels():
        own = {n: v for n, v in values.items() if n in k.params}
        symbols.update(_bind_kernel(k, own, tensors, {s.name for s in program.scratch}))
    return symbols


def _bind_kernel(program: Program, values: dict[str, int], tensors: dict[str, Any], skip: set[str]) -> dict[str, int]:
    args = [(name, cast(GlobalType, arg.type)) for name, arg in program.kernel.args if name not in skip]
    symbols: dict[str, int] = {}
    for name, t in args:
        if name not in tensors:
            raise _error(program, name, f"no tensor for `{name}`")
        tensor = tensors[name]
        if len(tensor.shape) != len(shape_of(t)):
            raise _error(
                program, name, f"`{name}` has {len(shape_of(t))} dimensions; the tensor has shape {list(tensor.shape)}"
            )
        for expr, n in zip(shape_of(t), tensor.shape, strict=True):
            if isinstance(expr, sx.Sym) and expr.name not in values:
                symbols.setdefault(expr.name, int(n))
        for expr, n in zip([s.data for s in t.strides.data], tensor.stride(), strict=False):
            if isinstance(expr, sx.Sym) and expr.name not in values:
                symbols.setdefault(expr.name, int(n))
    for symbol, n in symbols.items():
        if n > I32_MAX:
            arg = next(
                a for a, t in args if symbol in {str(d) for d in shape_of(t)} | {str(d.data) for d in t.strides.data}
            )
            raise _error(
                program,
                arg,
                f"`{symbol}` would be {n} from `{arg}`: a shape symbol is an i32 (docs/language.md, Types), "
                f"at most {I32_MAX}",
                "split the work over several launches, or declare the dimension as a product of two symbols "
                "(f32[M, N] for a flat buffer) and compute the flat offset in i64",
            )
    env = {**values, **symbols}
    for name, t in args:
        tensor = tensors[name]
        want = tuple(sx.fold(d).evaluate(env) for d in shape_of(t))
        if tuple(tensor.shape) != want:
            raise _error(program, name, f"`{name}` has shape {list(tensor.shape)}; the kernel wants {list(want)}")
        if not t.strides.data and not tensor.is_contiguous():
            raise _error(program, name, f"`{name}` must be contiguous (no strides are declared for it)")
    for w in program.kernel.where.data:
        if not sx.fold(w.data).evaluate(env):
            shown = {s: env[s] for s in sorted(w.data.symbols()) if s in env}
            raise _error(
                program, None, f"`where {w.data}` does not hold for {shown}", "pass shapes the `where` clause allows"
            )
    return symbols


def scratch_sizes(program: Program, params: dict[str, int], tensors: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """A program of several kernels (`kir.multi`): the extents of each scratch buffer, its
    declared shape with the parameters and the shape symbols of the task's tensors bound (each
    symbol from the first argument of any kernel whose declared dimension is that bare symbol)."""
    scratch = {s.name for s in program.scratch}
    env: dict[str, int] = {**program.params, **params}
    for k in program.kernels():
        for name, arg in k.kernel.args:
            if name in scratch or name not in tensors:
                continue
            for expr, n in zip(shape_of(arg.type), tensors[name].shape, strict=False):
                if isinstance(expr, sx.Sym) and expr.name not in env:
                    env[expr.name] = int(n)
    sizes: dict[str, tuple[int, ...]] = {}
    for s in program.scratch:
        try:
            sizes[s.name] = s.sizes(env)
        except (KeyError, ZeroDivisionError) as err:
            raise KirError(
                Diagnostic("run.bind", "error", s.span, f"the size of scratch `{s.name}` is not known: {err}")
            ) from None
        if any(n < 0 for n in sizes[s.name]):
            raise KirError(Diagnostic("run.bind", "error", s.span, f"scratch `{s.name}` has a negative extent"))
    return sizes
