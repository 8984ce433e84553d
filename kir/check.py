"""Checking a program: reading its file, op-level verification, and the verifier when present.

Everything here reports through `Diagnostic`. Reading a file that cannot be opened is `io.read`;
text that is not UTF-8 is `syntax.encoding`, located at the first bad byte; an op whose
`verify_` rejects it is `op.verify` at the op's span. The rule verifier (the `verifier` package,
built on top of `kir`) is looked up at run time, so `kir` never imports it statically and works
before it exists.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from xdsl.ir import Operation
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from kir.diagnostics import Diagnostic, KirError, Span
from kir.dialect.structure import TARGETS, KernelOp, YieldOp
from kir.names import suggest
from kir.program import Program, span_of

# A KIR program is text: 16 MiB is three times the largest program the parse benchmark reads
# (#18: up to 5 MB). The cap keeps a mistaken argument (a disk image, a log) from being read whole.
MAX_SOURCE_BYTES = 16 * 2**20


def read_source(path: str | Path) -> str:
    """The text of a KIR file, or a `KirError`: `io.read` when it cannot be opened, is not a
    regular file or is over `MAX_SOURCE_BYTES`, `syntax.encoding` (with the position of the
    first bad byte) when it is not UTF-8."""
    data = read_bytes(path, limit=MAX_SOURCE_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise KirError(_encoding_diagnostic(data, err, str(path))) from None


def read_bytes(path: str | Path, limit: int | None = None) -> bytes:
    """A regular file's bytes (at most `limit` of them), or a `KirError` with an `io.read`
    diagnostic. A FIFO, a device (/dev/zero) or a directory is refused before anything is
    read: reading one would block for ever or never end. The file is opened without blocking
    and judged by `fstat` of what was opened, so it cannot be swapped for a FIFO in between."""

    def refuse(reason: str) -> KirError:
        return KirError(Diagnostic("io.read", "error", None, f"cannot read {path}: {reason}"))

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as err:  # ValueError: a NUL byte in the path
        raise refuse(getattr(err, "strerror", None) or str(err)) from None
    try:
        mode = os.fstat(fd)
        if not stat.S_ISREG(mode.st_mode):
            raise refuse(f"it is {_kind_of(mode.st_mode)}, not a regular file")
        if limit is not None and mode.st_size > limit:
            raise refuse(f"it is {mode.st_size:,} bytes, over the limit of {limit:,}")
        chunks, size = [], 0
        while limit is None or size <= limit:  # a file that grows while it is read stops at the limit
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if limit is not None and size > limit:
            raise refuse(f"it is over the limit of {limit:,} bytes")
        return b"".join(chunks)
    except OSError as err:
        raise refuse(err.strerror or str(err)) from None
    finally:
        os.close(fd)


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _encoding_diagnostic(data: bytes, err: UnicodeDecodeError, file: str) -> Diagnostic:
    before = data[: err.start]
    line = before.count(b"\n") + 1
    line_start = before.rfind(b"\n") + 1
    col = len(before[line_start:].decode("utf-8", errors="replace")) + 1
    return Diagnostic(
        "syntax.encoding",
        "error",
        Span(line, col, line, col + 1, file),
        f"the file is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})",
        "KIR source files are UTF-8 text",
    )


def load_program(path: str | Path) -> Program:
    """Read and parse one KIR file; raises `KirError` with located diagnostics."""
    from kir.parser import parse

    return parse(read_source(path), file=str(path))


def target_diagnostics(target: str | None) -> list[Diagnostic]:
    """An unknown target named on the command line (or by a caller) is an error."""
    if target is None or target in TARGETS:
        return []
    from kir.parser import suggest

    hint = suggest(target, TARGETS) or f"known targets: {', '.join(TARGETS)}"
    return [Diagnostic("cli.target", "error", None, f"unknown target '{target}'", hint)]


def verify_ops(program: Program) -> list[Diagnostic]:
    """Run each op's xdsl verification (`verify_` plus the structural checks) on its own, so
    that every failing op is reported at its own span rather than the first one only."""
    kernel = program.kernel
    diags: list[Diagnostic] = []
    for op in kernel.walk():
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as err:
            root = _root(err)
            diags.append(
                Diagnostic(
                    getattr(root, "rule", "op.verify"),
                    "error",
                    _nearest_span(op, program),
                    _verify_message(err),
                    getattr(root, "hint", ""),
                )
            )
        except Exception as err:
            diag = internal_error(err, program.file, f"verifying {op.name}")
            diags.append(Diagnostic(diag.rule, diag.severity, _nearest_span(op, program), diag.message, diag.hint))
    if not diags:
        # What no single op's verification sees: the nesting (each block's and op's parent) and
        # the blocks that are empty where a terminator is due. (xdsl's whole-kernel verify checks
        # the same, but verifies every op a second time on the way: half of the check of a long
        # program.)
        problem = _structure_problem(kernel)
        if problem is not None:
            op, message = problem
            diags.append(Diagnostic("op.verify", "error", _nearest_span(op, program), message))
    return diags


def _structure_problem(kernel: Operation) -> tuple[Operation, str] | None:
    """The first op whose regions are not nested as they claim, with what is wrong; None when
    every region, block and op points at the one that holds it."""
    for op in kernel.walk():
        for region in op.regions:
            if region.parent is not op:
                return op, f"a region of {op.name} does not refer to it as its parent"
            for block in region.blocks:
                if block.parent is not region:
                    return op, f"a block in {op.name} does not refer to its region as its parent"
                if block.first_op is None and len(region.blocks) == 1 and not op.has_trait(NoTerminator):
                    return op, f"{op.name} contains an empty block in a region that expects at least a terminator"
                for inner in block.ops:
                    if inner.parent is not block:
                        return inner, f"{inner.name} does not refer to the block that holds it as its parent"
    return None


def _nearest_span(op: Operation | None, program: Program) -> Span | None:
    while op is not None:
        span = span_of(op)
        if span is not None:
            return span
        op = op.parent_op()
    return program.span()


def _root(err: VerifyException) -> BaseException:
    """xdsl wraps a `verify_` failure in a second exception whose text embeds the printed op."""
    root: BaseException = err
    while isinstance(root.__cause__, VerifyException):
        root = root.__cause__
    return root


def _verify_message(err: VerifyException) -> str:
    """The innermost verifier message."""
    root = _root(err)
    text = str(root).strip().splitlines()
    message = text[0] if text else "the op does not verify"
    return message.removeprefix("Operation does not verify: ")


def internal_error(err: BaseException, file: str | None, during: str) -> Diagnostic:
    return Diagnostic(
        "internal.error",
        "error",
        Span(1, 1, 1, 2, file) if file else None,
        f"internal error while {during}: {type(err).__name__}: {err}",
        "this is a bug in KIR; please report it with the input",
    )


def unique_sorted(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for d in sorted(diags, key=Diagnostic.sort_key):
        if d not in out:
            out.append(d)
    return out


def op_count(program: Program) -> int:
    """Ops in the kernel body (in every kernel's, for several), without the kernel itself and
    the implicit yields."""
    return sum(1 for k in program.kernels() for op in k.kernel.walk() if not isinstance(op, KernelOp | YieldOp))


def unknown_params(program: Program, names) -> list[Diagnostic]:
    """A `cli.param` error for each of `names` that is not a parameter of the program."""
    known = ", ".join(program.params) or "none"
    return [
        Diagnostic(
            "cli.param",
            "error",
            None,
            f"no parameter {name} in kernel {program.name}",
            suggest(name, program.params) or f"parameters: {known}",
        )
        for name in names
        if name not in program.params
    ]
