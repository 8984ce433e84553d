"""KIR text -> dialect ops, with a source span on every op.

Parsing runs in two steps: lark (LALR, grammar in `grammar.lark`, lexer in `kir.syntax`) gives a
syntax tree, then `kir.sema` walks it with a scope of names and builds ops through
`kir.builder.Builder`, the same typing layer the Python builder API uses. Every failure is a
`Diagnostic` raised in a `KirError`; no input text, however malformed, gets a Python traceback
out of `parse`.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path

from lark.exceptions import VisitError

from kir.diagnostics import Diagnostic, KirError, Span
from kir.multi import Layout, chunk, split
from kir.names import suggest
from kir.program import Program
from kir.sema import lower_tree
from kir.syntax import GRAMMAR_PATH, parse_tree

# tests/kir/test_lexer.py reaches the lexer and the grammar through this module.
from kir.syntax import NewlineFilter as _NewlineFilter  # noqa: F401
from kir.syntax import lark_parser as _lark  # noqa: F401

__all__ = ["GRAMMAR_PATH", "collections_paused", "parse", "parse_file", "parse_tree", "suggest"]


@contextlib.contextmanager
def collections_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector in the block. Parsing and checking a long program
    allocate millions of objects (syntax tree nodes, tokens, ops, z3 terms) that stay alive to
    the end, and almost none of them is garbage, so every collection meanwhile traverses them
    all again for nothing: on a 1 MB program that was a fifth of parse and check even with a
    young-generation threshold of 100,000. Garbage made meanwhile is collected later, once the
    caller's collector runs again; a caller that paused it already keeps it paused."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def parse(text: str, file: str = "<input>") -> Program:
    """Parse one kernel. Raises `KirError` with located diagnostics on any error."""
    with collections_paused():
        return _parse(text, file)


def _parse(text: str, file: str) -> Program:
    if not isinstance(text, str):
        raise KirError(Diagnostic("syntax.not-text", "error", None, "the input is not text"))
    if "\x00" in text:
        pos = text.index("\x00")
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        raise KirError(
            Diagnostic("syntax.unexpected-char", "error", Span(line, col, line, col + 1, file), "unexpected NUL byte")
        )
    try:
        layout = split(text, file)
    except KirError:
        raise
    except Exception as err:  # noqa: BLE001 - a bug in KIR; the caller still gets a diagnostic
        raise KirError(_internal(file, err)) from err
    if layout.multi:
        return _parse_multi(text, file, layout)
    return _parse_one(text, file)


def _parse_multi(text: str, file: str, layout: Layout) -> Program:
    """A program of several kernels (`kir.multi`): each kernel parsed in place; the errors of
    every kernel are reported together."""
    programs: list[Program] = []
    errors: list[Diagnostic] = []
    for index in range(len(layout.kernels)):
        try:
            programs.append(_parse_one(chunk(text, layout, index), file))
        except KirError as err:
            errors += err.diagnostics
    if errors:
        raise KirError(errors)
    first = programs[0]
    first.source = text
    first.stages = programs[1:]
    first.scratch = layout.scratch
    return first


def _parse_one(text: str, file: str) -> Program:
    tree, comments = parse_tree(text, file)
    try:
        program = lower_tree(tree, comments, text, file)
    except KirError:
        raise
    except VisitError as err:  # pragma: no cover - lark wraps errors raised in visitors
        raise KirError(_internal(file, err.orig_exc)) from None
    except RecursionError:
        raise KirError(
            Diagnostic("syntax.too-deep", "error", Span(1, 1, 1, 2, file), "the program nests too deeply")
        ) from None
    except Exception as err:  # noqa: BLE001 - a bug in KIR; the caller still gets a diagnostic
        raise KirError(_internal(file, err)) from err
    return program


def _internal(file: str, exc: BaseException) -> Diagnostic:
    return Diagnostic(
        "internal.error",
        "error",
        Span(1, 1, 1, 2, file),
        f"internal error while reading the program: {type(exc).__name__}: {exc}",
        "this is a bug in KIR; please report it with the input",
    )


def parse_file(path: str | Path) -> Program:
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise KirError(Diagnostic("io.read", "error", None, f"cannot read {p}: {err}")) from None
    return parse(text, file=str(path))
