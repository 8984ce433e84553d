"""The syntax of KIR: the lark grammar (`grammar.lark`) and its lexer, the syntax tree of a text
with its comments, syntax errors as diagnostics, and the reading of tree nodes that needs no names
in scope: spans, integer literals and static (symbolic) expressions.

It sits below the builder, which reads the static expressions it is given as text
(`parse_static_text`: `"cdiv(N, BLOCK)"`), and below `kir.sema`, whose walk of a whole kernel
builds on `TreeReader`; `kir.parser` puts the two steps together.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import NoReturn, cast

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import AbstractBasicLexer, BasicLexer, ContextualLexer

from kir import fastsyntax
from kir import symexpr as sx
from kir.diagnostics import Diagnostic, KirError, Span

Node = Tree | Token

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


class NewlineFilter:
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


def _basic(lexer: AbstractBasicLexer) -> BasicLexer:
    """lark's contextual lexer types its scanners as the abstract lexer; they are `BasicLexer`s,
    whose terminals, callbacks and scanner `RootFirstLexer` reads."""
    return cast(BasicLexer, lexer)


class RootFirstLexer(ContextualLexer):
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
    test_lexer.py compares the two lexers on every program the project has and on broken text."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._without: dict[frozenset[str], BasicLexer] = {frozenset(): _basic(self.root_lexer)}
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
        own = _basic(self.lexers[parser_state.position])
        accepted = self._accepted.get(id(own))
        if accepted is None:
            accepted = self._accepted[id(own)] = frozenset(t.name for t in own.terminals)
        line_ctr, text = lexer_state.line_ctr, lexer_state.text
        refused: frozenset[str] = frozenset()
        lexer = _basic(self.root_lexer)
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

    def _scanner_without(self, refused: frozenset[str]) -> BasicLexer:
        lexer = self._without.get(refused)
        if lexer is None:
            root = _basic(self.root_lexer)
            lexer = copy.copy(root)
            lexer.terminals = [t for t in root.terminals if t.name not in refused]
            lexer._scanner = None
            self._without[refused] = lexer
        return lexer


_LARK: Lark | None = None


def lark_parser() -> Lark:
    global _LARK
    if _LARK is None:
        _LARK = Lark(
            GRAMMAR_PATH.read_text(),
            parser="lalr",
            lexer="contextual",
            postlex=NewlineFilter(),
            propagate_positions=True,
            maybe_placeholders=False,
            cache=True,
            start=["start", "expr_only"],
            _plugins={"ContextualLexer": RootFirstLexer},
        )
    return _LARK


def _expected_text(expected) -> str:
    names = []
    for term in sorted(expected):
        if term in _TERMINAL_TEXT:
            names.append(_TERMINAL_TEXT[term])
            continue
        try:
            pattern = lark_parser().get_terminal(term).pattern
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
        pos = err.pos_in_stream
        ch = text[pos] if pos is not None and 0 <= pos < len(text) else "?"
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
    """The lark syntax tree and the comment tokens, or a `KirError` with a syntax diagnostic.

    `kir.fastsyntax` reads the text first and gives lark's very tree, several times faster and
    without building the lark parser; on a text it is not sure of it gives up, and lark's
    parse (its tree, or its syntax error) is the answer."""
    try:
        tree = fastsyntax.parse_start(text)
    except (fastsyntax.GiveUp, RecursionError):
        tree = _lark_tree(text, file)
    return tree, _comments(text)


def _lark_tree(text: str, file: str) -> Tree:
    try:
        return lark_parser().parse(text, start="start")
    except UnexpectedInput as err:
        raise KirError(_syntax_diagnostic(err, text, file)) from None
    except RecursionError:
        raise KirError(
            Diagnostic("syntax.too-deep", "error", Span(1, 1, 1, 2, file), "the program nests too deeply to parse")
        ) from None


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


def parse_static_text(text: str) -> sx.SymExpr:
    """A symbolic expression from KIR text, for the builder API (`"cdiv(N, BLOCK)"`)."""
    try:
        tree = fastsyntax.parse_expr_only(text)
    except (fastsyntax.GiveUp, RecursionError):
        tree = _lark_static_tree(text)
    return TreeReader(text, "<builder>").static(tree.children[0], allow_any_name=True)


def _lark_static_tree(text: str) -> Tree:
    try:
        return lark_parser().parse(text, start="expr_only")
    except UnexpectedInput as err:
        raise KirError(
            Diagnostic("syntax.static", "error", None, f"not a symbolic expression: {text!r} ({err})")
        ) from None


class TreeReader:
    """Reads nodes of the syntax tree of `text`: their spans, integer literals and static
    expressions, failing with located diagnostics. Any name in a static expression is a symbol
    here; `kir.sema` checks the names against the kernel's scope (`static_name`)."""

    def __init__(self, text: str, file: str):
        self.text = text
        self.file = file

    # ---- spans and errors ------------------------------------------------------------------

    def span(self, node: Node) -> Span | None:
        if isinstance(node, Token):
            if node.line is None:
                return None
            column = cast(int, node.column)  # a token with a line has a column
            return Span(node.line, column, node.end_line or node.line, node.end_column or column + 1, self.file)
        meta = node.meta
        if getattr(meta, "empty", True):
            return None
        return Span(meta.line, meta.column, meta.end_line, meta.end_column, self.file)

    def fail(self, rule: str, message: str, node: Node | Span | None, hint: str = "") -> NoReturn:
        span = node if isinstance(node, Span) or node is None else self.span(node)
        raise KirError(Diagnostic(rule, "error", span, message, hint))

    def integer(self, tok: Node) -> int:
        """The value of an INT token (`42`, `0x2a`); a leading zero (`007`, octal in C) or a
        number too long to be any KIR integer is an error."""
        text = str(tok)
        if len(text) > MAX_INT_DIGITS:
            self.fail("syntax.literal", f"an integer of {len(text)} digits is too long", tok)
        try:
            return int(text, 0)
        except ValueError:
            self.fail(
                "syntax.literal",
                f"'{text}' is not an integer",
                tok,
                "a decimal integer does not start with 0; hex is 0x...",
            )
            raise AssertionError from None

    # ---- static expressions ---------------------------------------------------------------

    def static(self, node: Node, params: set[str] | None = None, allow_any_name: bool = False) -> sx.SymExpr:
        """A symbolic integer expression: integers, parameters, shape symbols, + - * / %,
        comparisons (in `where`), cdiv/min/max."""
        if isinstance(node, Token):
            if node.type == "INT":
                return sx.Int(self.integer(node))
            return self.static_name(node, allow_any_name)
        kind = node.data
        if kind == "int_lit":
            return sx.Int(self.integer(node.children[0]))
        if kind == "name":
            return self.static_name(cast(Token, node.children[0]), allow_any_name)
        if kind in ("add", "sub", "mul", "div", "rem"):
            op = {"add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%"}[kind]
            return sx.Bin(
                op,
                self.static(node.children[0], params, allow_any_name),
                self.static(node.children[1], params, allow_any_name),
            )
        if kind == "compare":
            lhs, cmp, rhs = node.children
            return sx.Bin(str(cmp), self.static(lhs, params, allow_any_name), self.static(rhs, params, allow_any_name))
        if kind == "neg":
            inner = self.static(node.children[0], params, allow_any_name)
            return sx.Int(-inner.value) if isinstance(inner, sx.Int) else sx.Bin("-", sx.Int(0), inner)
        if kind == "call":
            fname = call_name(node)
            args = node.children[1:]
            if (
                fname in sx.FUNCS
                and len(args) == 2
                and all(not (isinstance(a, Tree) and a.data == "kwarg") for a in args)
            ):
                return sx.Bin(
                    fname, self.static(args[0], params, allow_any_name), self.static(args[1], params, allow_any_name)
                )
        self.fail(
            "types.static",
            "this must be a static size: integers, parameters and shape symbols with + - * / % and cdiv/min/max",
            node,
        )
        raise AssertionError

    def static_name(self, tok: Token, allow_any_name: bool) -> sx.SymExpr:
        return sx.Sym(str(tok))


# u64's largest value has 20 digits; a few more leave room for sizes written with leading
# hex digits, and the limit keeps Python's str-to-int conversion limit (4300 digits) away.
MAX_INT_DIGITS = 40


def call_name(node: Tree) -> str:
    dotted = node.children[0]
    return ".".join(str(t) for t in dotted.children)
