"""Programs of several kernels: scratch buffers and launches in order.

    scratch partial: f32[M]          # global memory the launcher allocates; no task binds it

    kernel rows<BLOCK = 1024>(x: global f32[M, N], partial: out global f32[M])
      target sm_90 grid(M) warps(4)
    { ... }

    kernel total<RB = 1024>(partial: global f32[M], y: out global f32[1])
      target sm_90 grid(1) warps(4)
    { ... }

The kernels launch one after another in the order of the text, and each sees every write of
the ones before it (a launch boundary is a grid-wide barrier). An argument name means the same
tensor in every kernel that takes it; a `scratch` name is a buffer of the declared type, written
by an earlier kernel (`out` there) before a later one reads it. Each kernel is a complete KIR
kernel, so everything that reads one kernel (the verifier's rules, the cost model, each
lowering) reads each of them; `check` adds the rules across kernels (`multi.*`).

A text of one kernel and no `scratch` line is an ordinary program; `split` says which text is
which, and the parser (`kir.parser.parse`) reads each kernel's lines in place (the lines before
it blank), so every span is the span in the whole file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, KirError, Span
from kir.dialect.types import shape_of
from kir.dtypes import DTYPES
from kir.syntax import parse_static_text

_KERNEL = re.compile(r"kernel\b")
_SCRATCH_START = re.compile(r"scratch\b")
_SCRATCH = re.compile(r"scratch\s+([A-Za-z_]\w*)\s*:\s*([A-Za-z_]\w*)\s*\[(.*)\]\s*$")


@dataclass(frozen=True)
class Scratch:
    """`scratch NAME: DTYPE[dims]`: a global buffer the launcher allocates for the kernels."""

    name: str
    dtype: str
    shape: tuple[sx.SymExpr, ...]
    span: Span

    def text(self) -> str:
        return f"scratch {self.name}: {self.dtype}[{', '.join(str(d) for d in self.shape)}]"

    def sizes(self, env: dict[str, int]) -> tuple[int, ...]:
        """The buffer's extents with the shape symbols and parameters of `env` bound."""
        return tuple(int(d.evaluate(env)) for d in self.shape)


@dataclass
class Layout:
    """Where the parts of a program's text are: the scratch lines and each kernel's lines."""

    scratch: list[Scratch]
    kernels: list[tuple[int, int]]  # each kernel's first line and one past its last (0-based)

    @property
    def multi(self) -> bool:
        return bool(self.scratch) or len(self.kernels) > 1


def _code(line: str) -> str:
    idx = line.find("#")  # KIR has no string literals: the first '#' starts a comment
    return line if idx < 0 else line[:idx]


def split(text: str, file: str) -> Layout:
    """The scratch declarations and the kernels' line ranges of a text. A kernel starts at a
    line that begins with `kernel` outside every brace; a scratch line before the first kernel.
    Raises KirError for a scratch line that does not read or that stands after a kernel."""
    lines = text.split("\n")
    depth = 0
    scratch: list[Scratch] = []
    starts: list[int] = []
    for i, line in enumerate(lines):
        code = _code(line)
        if depth == 0 and _KERNEL.match(code):
            starts.append(i)
        elif depth == 0 and _SCRATCH_START.match(code):
            if starts:
                raise KirError(
                    Diagnostic(
                        "syntax.scratch",
                        "error",
                        Span(i + 1, 1, i + 1, len(line) + 1, file),
                        "a `scratch` declaration stands after a kernel",
                        "declare every scratch buffer before the first kernel",
                    )
                )
            scratch.append(_scratch(code.rstrip(), i + 1, file))
        depth = max(0, depth + code.count("{") - code.count("}"))
    ends = [*starts[1:], len(lines)]
    kernels = list(zip(starts, ends, strict=True)) if starts else [(0, len(lines))]  # none: the parser says why
    return Layout(scratch, kernels)


def _scratch(code: str, line: int, file: str) -> Scratch:
    span = Span(line, 1, line, len(code) + 1, file)
    m = _SCRATCH.match(code)
    if m is None:
        raise KirError(
            Diagnostic(
                "syntax.scratch",
                "error",
                span,
                f"not a scratch declaration: `{code.strip()}`",
                "write `scratch NAME: DTYPE[dims]`, for example `scratch partial: f32[M]`",
            )
        )
    name, dtype, dims = m.groups()
    if dtype not in DTYPES:
        raise KirError(
            Diagnostic(
                "syntax.scratch",
                "error",
                span,
                f"unknown dtype `{dtype}` for scratch `{name}`",
                f"one of {', '.join(sorted(DTYPES))}",
            )
        )
    shape = []
    for part in _dims(dims):
        try:
            shape.append(parse_static_text(part))
        except KirError:
            raise KirError(
                Diagnostic("syntax.scratch", "error", span, f"scratch `{name}`: `{part.strip()}` is not a size")
            ) from None
    if not shape:
        raise KirError(Diagnostic("syntax.scratch", "error", span, f"scratch `{name}` has no dimensions"))
    return Scratch(name, dtype, tuple(shape), span)


def _dims(text: str) -> list[str]:
    """`M, cdiv(N, B)` -> ["M", "cdiv(N, B)"]: commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    if cur.strip():
        out.append(cur)
    return out


def chunk(text: str, layout: Layout, index: int) -> str:
    """The text of kernel `index` in place: every other line blank, so that spans are the
    file's. The first kernel keeps the comments above it (the scratch lines blanked)."""
    lines = text.split("\n")
    start, end = layout.kernels[index]
    first = 0 if index == 0 else start
    scratch_lines = {s.span.line - 1 for s in layout.scratch}
    kept = ["" if i in scratch_lines else lines[i] for i in range(first, end)]
    return "\n" * first + "\n".join(kept)


# ---- the rules across kernels ---------------------------------------------------------------


def check(program) -> list[Diagnostic]:
    """The rules of a program of several kernels that no single kernel can see (`multi.*`):
    one target; an argument name, a parameter name and a scratch name mean one thing in every
    kernel; a scratch buffer is written (`out`) by a kernel before one reads it; every scratch
    buffer is used and its size is known from the kernels' shape symbols and parameters."""
    if not program.is_multi:
        return []
    kernels = program.kernels()
    out: list[Diagnostic] = []
    declared = {s.name: s for s in program.scratch}
    seen_scratch: dict[str, Scratch] = {}
    for s in program.scratch:
        if s.name in seen_scratch:
            out.append(Diagnostic("multi.scratch", "error", s.span, f"scratch `{s.name}` is declared twice"))
        seen_scratch[s.name] = s
    target = kernels[0].kernel.target.data
    args: dict[str, tuple[str, tuple[sx.SymExpr, ...], str]] = {}  # name -> dtype, shape, kernel
    params: dict[str, tuple[int, str]] = {}
    written: set[str] = set()
    used: set[str] = set()
    symbols: set[str] = set()
    names: dict[str, int] = {}
    for k in kernels:
        kern = k.kernel
        span = k.span()
        if k.name in names:
            out.append(
                Diagnostic(
                    "multi.name",
                    "error",
                    span,
                    f"a second kernel named `{k.name}`",
                    "give each kernel its own name: the lowerings define one function a kernel",
                )
            )
        names[k.name] = 1
        if kern.target.data != target:
            out.append(
                Diagnostic(
                    "multi.target",
                    "error",
                    k.clause_spans.get("target") or span,
                    f"kernel `{k.name}` targets {kern.target.data} but `{kernels[0].name}` targets {target}",
                    "a program's kernels run on one target: give them the same `target`",
                )
            )
        for name, value in kern.params.items():
            if name in params and params[name][0] != value:
                out.append(
                    Diagnostic(
                        "multi.param",
                        "error",
                        k.param_spans.get(name) or span,
                        f"parameter `{name}` is {value} here but {params[name][0]} in kernel `{params[name][1]}`",
                        "a parameter name is one parameter of the whole program: give it one default, or rename it",
                    )
                )
            params.setdefault(name, (value, k.name))
        symbols |= set(kern.params)
        reads: list[str] = []
        for name, arg in kern.args:
            t = arg.type
            shape = tuple(shape_of(t))
            dtype = t.dtype.data
            symbols |= {x for d in shape for x in d.symbols()}
            where = k.arg_spans.get(name) or span
            if name in declared:
                used.add(name)
                s = declared[name]
                if (
                    dtype != s.dtype
                    or len(shape) != len(s.shape)
                    or not all(sx.same(a, b) for a, b in zip(shape, s.shape, strict=True))
                ):
                    out.append(
                        Diagnostic(
                            "multi.scratch",
                            "error",
                            where,
                            f"`{name}` is {dtype}[{', '.join(map(str, shape))}] here but scratch `{name}` is "
                            f"declared {s.dtype}[{', '.join(map(str, s.shape))}]",
                            "declare the argument with the scratch buffer's type",
                        )
                    )
                if not t.is_out:
                    reads.append(name)
            elif name in args:
                dtype0, shape0, where0 = args[name]
                if (
                    dtype != dtype0
                    or len(shape) != len(shape0)
                    or not all(sx.same(a, b) for a, b in zip(shape, shape0, strict=True))
                ):
                    out.append(
                        Diagnostic(
                            "multi.arg",
                            "error",
                            where,
                            f"`{name}` is {dtype}[{', '.join(map(str, shape))}] here but "
                            f"{dtype0}[{', '.join(map(str, shape0))}] in kernel `{where0}`",
                            "an argument name is one tensor of the whole program: declare it alike in every kernel",
                        )
                    )
            else:
                args[name] = (dtype, shape, k.name)
        for name in reads:
            if name not in written:
                out.append(
                    Diagnostic(
                        "multi.scratch-unwritten",
                        "error",
                        k.arg_spans.get(name) or span,
                        f"kernel `{k.name}` reads scratch `{name}` before any kernel writes it: "
                        "its contents are whatever the allocator left",
                        "write it (`out`) in a kernel launched before this one",
                    )
                )
        written |= {name for name, arg in kern.args if arg.type.is_out}
    for s in program.scratch:
        if s.name not in used:
            out.append(Diagnostic("multi.scratch", "warning", s.span, f"scratch `{s.name}` is taken by no kernel"))
        unknown = sorted({x for d in s.shape for x in d.symbols()} - symbols)
        if unknown:
            out.append(
                Diagnostic(
                    "multi.scratch",
                    "error",
                    s.span,
                    f"the size of scratch `{s.name}` uses {', '.join(f'`{u}`' for u in unknown)}, "
                    "which no kernel's argument shape or parameter defines",
                    "size it with the shape symbols of the kernels' arguments and their parameters",
                )
            )
    return out
