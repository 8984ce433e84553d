"""KIR text -> dialect ops, with a source span on every op.

Parsing runs in two steps: lark (LALR, grammar in `grammar.lark`) gives a syntax tree, then
`_Lowerer` walks it with a scope of names and builds ops through `kir.builder.Sema`, the same
typing layer the Python builder API uses. Every failure is a `Diagnostic` raised in a
`KirError`; no input text, however malformed, gets a Python traceback out of `parse`.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import gc
from collections.abc import Iterator
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import ContextualLexer

from kir.diagnostics import Diagnostic, KirError, Span
from kir.program import Program

GRAMMAR_PATH = Path(__file__).with_name("grammar.lark")

# What an expected terminal is called in a message.
_TERMINAL_TEXT = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "DTYPE": "a dtype (f32, bf16, i32, ...)",
    "TARGET": "a target (sm_90, sm_80, gfx942, gfx90a, mtia-sim, interp)",
    "WARP_UNIT": "warps(...) or warpgroups(...)",
    "CMP_OP": "a comparison",
    "SHIFT_OP": "'<<' or '>>'",
    "_NL": "a new line",
    "OUT": "'out'",
    "$END": "the end of the file",
}


class _NewlineFilter:
    """Drops newlines inside (...) and [...] and collapses runs, so statements end at newlines
    while calls and signatures may span lines. A newline right after `;` is dropped too: the
    statement has already ended (`x = 1;` at the end of a line)."""

    always_accept = ("_NL",)

    def process(self, stream):
        # Tokens are passed on at once (never held back): the contextual lexer picks the
        # terminals for the next token from the parser state after this one.
        depth = 0
        ended = False  # the last token passed on ends a statement (a newline or `;`)
        for tok in stream:
            if tok.type == "_NL":
                if depth > 0 or ended:
                    continue
                ended = True
                yield tok
                continue
            ended = tok.type == "SEMICOLON" and depth == 0
            if tok.type in ("LPAR", "LSQB"):
                depth += 1
            elif tok.type in ("RPAR", "RSQB"):
                depth = max(0, depth - 1)
            yield tok


class _RootFirstLexer(ContextualLexer):
    """lark's contextual lexer, which builds (and compiles) one scanner for every set of terminals a
    parser state accepts: 40 to 60 regular expressions for an ordinary program, a third of what
    `kir fmt` spends parsing it. This one asks the scanner of all terminals first and keeps its
    token when the state accepts it. Where the state does not (a name read as a TARGET, `sm_90`
    read as a NAME after `target`), it asks the scanner of all terminals but the ones refused so
    far, and so on: a handful of scanners for any program, and the same tokens.

    The same because both scanners try terminals in one order (priority, then length) and take
    the first that matches: the first of the non-refused terminals that matches, when the state
    accepts it, is the first of the state's own that matches, with the same text. A keyword that
    a name pattern absorbs is retyped alike in both. Where no terminal the state accepts
    matches, the state's own scanner reads the text, so the errors are lark's. tests/kir/
    test_parser.py compares the two lexers on every program the project has and on broken text."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._without: dict[frozenset[str], object] = {frozenset(): self.root_lexer}
        self._accepted: dict[int, frozenset[str]] = {}

    def lex(self, lexer_state, parser_state):
        try:
            while True:
                yield self._next_token(lexer_state, parser_state)
        except EOFError:
            pass
        except UnexpectedCharacters as err:
            # as lark's: a terminal that exists but is not accepted here is an unexpected token
            try:
                last_token = lexer_state.last_token
                token = self.root_lexer.next_token(lexer_state, parser_state)
                raise UnexpectedToken(
                    token,
                    err.allowed,
                    state=parser_state,
                    token_history=[last_token],
                    terminals_by_name=self.root_lexer.terminals_by_name,
                ) from None
            except UnexpectedCharacters:
                raise err from None

    def _next_token(self, lexer_state, parser_state) -> Token:
        """lark's `BasicLexer.next_token`, over the scanners of all terminals but the refused
        ones: each token is matched once when the first scanner's reading is accepted (as it
        is for nearly every token), so long programs lex no slower than with lark's lexer."""
        own = self.lexers[parser_state.position]
        accepted = self._accepted.get(id(own))
        if accepted is None:
            accepted = self._accepted[id(own)] = frozenset(t.name for t in own.terminals)
        line_ctr, text = lexer_state.line_ctr, lexer_state.text
        refused: frozenset[str] = frozenset()
        lexer = self.root_lexer
        while line_ctr.char_pos < text.end:
            found = lexer.match(text, line_ctr.char_pos)
            if not found:
                break
            value, type_ = found
            if type_ in lexer.ignore_types:  # blanks and comments: the same in every state
                line_ctr.feed(value, type_ in lexer.newline_types)
                continue
            token = Token(type_, value, line_ctr.char_pos, line_ctr.line, line_ctr.column)
            callback = lexer.callback.get(type_)
            if callback is not None:  # a keyword that the name pattern matched
                token = callback(token)
            if token.type not in accepted:
                refused |= {token.type}
                lexer = self._scanner_without(refused)
                continue
            line_ctr.feed(value, type_ in lexer.newline_types)
            token.end_line, token.end_column, token.end_pos = line_ctr.line, line_ctr.column, line_ctr.char_pos
            lexer_state.last_token = token
            return token
        # nothing the state accepts matches here, or the text has ended: lark's own answer
        return own.next_token(lexer_state, parser_state)

    def _scanner_without(self, refused: frozenset[str]):
        lexer = self._without.get(refused)
        if lexer is None:
            lexer = copy.copy(self.root_lexer)
            lexer.terminals = [t for t in self.root_lexer.terminals if t.name not in refused]
            lexer._scanner = None
            self._without[refused] = lexer
        return lexer


_LARK: Lark | None = None


def _lark() -> Lark:
    global _LARK
    if _LARK is None:
        _LARK = Lark(
            GRAMMAR_PATH.read_text(),
            parser="lalr",
            lexer="contextual",
            postlex=_NewlineFilter(),
            propagate_positions=True,
            maybe_placeholders=False,
            cache=True,
            start=["start", "expr_only"],
            _plugins={"ContextualLexer": _RootFirstLexer},
        )
    return _LARK


def _expected_text(expected) -> str:
    names = []
    for term in sorted(expected):
        if term in _TERMINAL_TEXT:
            names.append(_TERMINAL_TEXT[term])
            continue
        try:
            pattern = _lark().get_terminal(term).pattern
            names.append(f"'{pattern.value}'" if pattern.type == "str" else term.lower())
        except KeyError:
            names.append(term.lower())
    names = sorted(set(names))
    if len(names) > 8:
        names = names[:8] + ["..."]
    return ", ".join(names)


def _syntax_diagnostic(err: UnexpectedInput, text: str, file: str) -> Diagnostic:
    line = getattr(err, "line", None) or 1
    col = getattr(err, "column", None) or 1
    if line < 1:  # end of input: point just past the last character
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    if isinstance(err, UnexpectedToken) and err.token.type == "$END":
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    if isinstance(err, UnexpectedCharacters):
        ch = text[err.pos_in_stream] if 0 <= err.pos_in_stream < len(text) else "?"
        allowed = _expected_text(err.allowed or [])
        return Diagnostic(
            "syntax.unexpected-char",
            "error",
            Span(line, col, line, col + 1, file),
            f"unexpected character {ch!r}",
            f"expected {allowed}" if allowed else "remove it",
        )
    if isinstance(err, UnexpectedToken):
        tok = err.token
        what = "end of file" if tok.type == "$END" else ("end of line" if tok.type == "_NL" else f"'{tok}'")
        end = col + max(1, len(str(tok))) if tok.type not in ("$END", "_NL") else col + 1
        return Diagnostic(
            "syntax.unexpected-token",
            "error",
            Span(line, col, line, end, file),
            f"unexpected {what}",
            f"expected {_expected_text(err.expected)}",
        )
    return Diagnostic(
        "syntax.unexpected-eof",
        "error",
        Span(line, col, line, col + 1, file),
        "unexpected end of file",
        f"expected {_expected_text(getattr(err, 'expected', []))}",
    )


def parse_tree(text: str, file: str = "<input>") -> tuple[Tree, list[Token]]:
    """The lark syntax tree and the comment tokens, or a `KirError` with a syntax diagnostic."""
    comments: list[Token] = []
    try:
        tree = _lark().parse(text, start="start")
    except UnexpectedInput as err:
        raise KirError(_syntax_diagnostic(err, text, file)) from None
    except RecursionError:
        raise KirError(
            Diagnostic("syntax.too-deep", "error", Span(1, 1, 1, 2, file), "the program nests too deeply to parse")
        ) from None
    comments = _comments(text)
    return tree, comments


def _comments(text: str) -> list[Token]:
    """Comment tokens with positions (the lexer ignores them; a lexer-only pass finds them)."""
    out: list[Token] = []
    # split on "\n" only: lark counts lines that way (str.splitlines also splits at \x0c, \x85,
    # \u2028, ... which may stand inside a comment)
    for lineno, line in enumerate(text.split("\n"), start=1):
        idx = _comment_start(line)
        if idx is not None:
            out.append(Token("COMMENT", line[idx:].rstrip(), line=lineno, column=idx + 1))
    return out


def _comment_start(line: str) -> int | None:
    # KIR has no string literals, so the first '#' starts a comment.
    idx = line.find("#")
    return idx if idx >= 0 else None


# The young-generation threshold while a program is parsed or checked (CPython's default: 700).
_GC_THRESHOLD = 100_000


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often in the block. Parsing and checking a long
    program allocate millions of objects (syntax tree nodes, tokens, ops, z3 terms) that stay
    alive to the end, so the collector's default schedule keeps traversing them all again for
    nothing: on a 1 MB program that was half the parse time. Garbage made meanwhile is still
    collected, later; the caller's thresholds are restored on the way out."""
    before = gc.get_threshold()
    if before[0] == 0 or before[0] >= _GC_THRESHOLD:  # automatic collection off, or already rare
        yield
        return
    gc.set_threshold(_GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def parse(text: str, file: str = "<input>") -> Program:
    """Parse one kernel. Raises `KirError` with located diagnostics on any error."""
    with fewer_collections():
        return _parse(text, file)


def _parse(text: str, file: str) -> Program:
    from kir.sema import lower_tree

    if not isinstance(text, str):
        raise KirError(Diagnostic("syntax.not-text", "error", None, "the input is not text"))
    if "\x00" in text:
        pos = text.index("\x00")
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        raise KirError(
            Diagnostic("syntax.unexpected-char", "error", Span(line, col, line, col + 1, file), "unexpected NUL byte")
        )
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


def suggest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=3)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
