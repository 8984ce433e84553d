"""A hand-written reader of `grammar.lark` that builds the very tree lark builds, several times
faster, for the texts it is sure of; on anything else it gives up and `kir.syntax.parse_tree`
asks lark, whose answer (a tree or a syntax error) then stands.

"The very tree" means what lark's LALR parser gives with the options of `kir.syntax.lark_parser`
(contextual lexer, `NewlineFilter`, `propagate_positions=True`, `maybe_placeholders=False`):
the same `Tree`s (rule or alias names, `?rule`s and `_rule`s inlined, anonymous tokens filtered
out) holding the same `Token`s (type, value, and every position), and the same `Meta` on every
tree, `container_*` fields included: a node's span runs from the first to the last symbol of its
rule as written, the filtered ones (keywords, brackets, newlines) included, and a parenthesised
expression keeps its own span while its container widens to the parentheses.

Reading is in two steps. One regular expression splits the text into words, numbers, punctuation
and newline runs, and drops newlines as `NewlineFilter` does (inside (...) and [...], after `;`,
repeated ones). A recursive-descent parser, with precedence climbing for the binary operators,
then types each word by where it stands, as lark's contextual lexer types it by the parser state:
where the grammar takes a NAME, a word is a NAME unless that state also takes it as something
else (a dtype or `cast`, `dot`, `inf`, `nan`, `true`, `false` where an expression starts, `None`
where a subscript starts, `for`, `if`, `role` where a statement starts); a keyword is only ever
the whole word; `target` is followed by a TARGET, which may hold `-`. Any token the grammar does
not take where it stands ends the attempt with `GiveUp`, so no text lark rejects is accepted and
no error is reported from here. tests/kir/test_fastsyntax.py compares both trees, field by field,
on every program the project has and on random mutations of them.
"""

from __future__ import annotations

import re

from lark import Token, Tree
from lark.tree import Meta


class GiveUp(Exception):
    """The text holds something this parser does not read; lark reads it instead."""


# One token per match, after the blanks and the comment before it. Word, number and newline
# patterns are the grammar's NAME, FLOAT (tried before INT, as lark's lexer orders them), INT
# and _NL; punctuation is tried longest first, as lark tries its string terminals.
_TOKEN = re.compile(
    r"""(?P<s>[\t \f]*(?:\#[^\n]*)?)(?:
      (?P<n>(?:\r?\n[\t \f]*)+)
    | (?P<w>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<f>[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
    | (?P<i>0x[0-9a-fA-F]+|[0-9]+)
    | (?P<p><<|>>|==|!=|<=|>=|\.\.|[-+*/%&|^~.,:;=<>()\[\]{}])
    | (?P<e>\Z)
    )""",
    re.VERBOSE,
)
_TARGET = re.compile(r"[A-Za-z][A-Za-z0-9_]*(-[A-Za-z0-9_]+)*")

DTYPES = frozenset("i1 i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64 f8e4m3 f8e5m2".split())
# Words that lark's lexer reads as something other than a NAME where an expression starts.
_LITERAL_WORDS = {"inf": "inf_lit", "nan": "nan_lit", "true": "true_lit", "false": "false_lit"}
_EXPR_WORDS = DTYPES | {"cast", "dot"} | set(_LITERAL_WORDS)

# Binary operators: token text -> (precedence, alias, type of the operator token kept in the
# tree or None). CMP_OP (4) does not associate: `a < b < c` is not in the grammar.
_CMP = 4
_BINARY: dict[str, tuple[int, str, str | None]] = {
    "|": (1, "bin_or", None),
    "^": (2, "bin_xor", None),
    "&": (3, "bin_and", None),
    "==": (_CMP, "compare", "CMP_OP"),
    "!=": (_CMP, "compare", "CMP_OP"),
    "<=": (_CMP, "compare", "CMP_OP"),
    ">=": (_CMP, "compare", "CMP_OP"),
    "<": (_CMP, "compare", "CMP_OP"),
    ">": (_CMP, "compare", "CMP_OP"),
    "<<": (5, "shift", "SHIFT_OP"),
    ">>": (5, "shift", "SHIFT_OP"),
    "+": (6, "add", None),
    "-": (6, "sub", None),
    "*": (7, "mul", None),
    "/": (7, "div", None),
    "%": (7, "rem", None),
}

_new = object.__new__
_new_str = str.__new__


def parse_start(text: str) -> Tree:
    """The tree of a whole program (the grammar's `start`), or `GiveUp`."""
    return _Parser(text).start()


def parse_expr_only(text: str) -> Tree:
    """The tree of a lone expression (the grammar's `expr_only`), or `GiveUp`."""
    return _Parser(text).expr_only()


def _tree(data: str, children: list, sl: int, sc: int, sp: int, el: int, ec: int, ep: int) -> Tree:
    """A tree with the meta lark's `PropagatePositions` gives it (the keys in lark's order)."""
    meta = _new(Meta)
    meta.__dict__ = {
        "empty": False,
        "line": sl,
        "column": sc,
        "start_pos": sp,
        "container_line": sl,
        "container_column": sc,
        "container_start_pos": sp,
        "end_line": el,
        "end_column": ec,
        "end_pos": ep,
        "container_end_line": el,
        "container_end_column": ec,
        "container_end_pos": ep,
    }
    tree = _new(Tree)
    tree.data = data
    tree.children = children
    tree._meta = meta
    return tree


class _Parser:
    """The tokens of one text (parallel lists, newlines already filtered) and a cursor."""

    def __init__(self, text: str) -> None:
        kinds: list[str] = []  # "w" word, "i" INT, "f" FLOAT, "n" newline, "$" end, else the punctuation
        values: list[str] = []
        starts: list[int] = []
        lines: list[int] = []
        columns: list[int] = []
        nl_ends: dict[int, tuple[int, int, int]] = {}
        line, line_start, pos = 1, 0, 0
        depth, ended = 0, False
        # findall hands over the matched texts without a match object each; the positions
        # follow from their lengths, and a character no pattern takes leaves a gap that makes
        # the sum fall short of the text's length
        for blank, newline, word, float_, int_, punct, _end in _TOKEN.findall(text):
            start = pos + len(blank)
            if word:
                value = word
                kind = "w"
                ended = False
            elif punct:
                value = kind = punct
                ended = punct == ";" and depth == 0
                if punct == "(" or punct == "[":
                    depth += 1
                elif (punct == ")" or punct == "]") and depth:
                    depth -= 1
            elif newline:
                pos = start + len(newline)
                keep = not (depth or ended)
                if keep:
                    ended = True
                    kinds.append("n")
                    values.append(newline)
                    starts.append(start)
                    lines.append(line)
                    columns.append(start - line_start + 1)
                line += newline.count("\n")
                line_start = start + newline.rindex("\n") + 1
                if keep:
                    nl_ends[len(kinds) - 1] = (line, pos - line_start + 1, pos)
                continue
            elif int_:
                value = int_
                kind = "i"
                ended = False
            elif float_:
                value = float_
                kind = "f"
                ended = False
            else:  # the end of the text
                value = ""
                kind = "$"
            pos = start + len(value)
            kinds.append(kind)
            values.append(value)
            starts.append(start)
            lines.append(line)
            columns.append(start - line_start + 1)
        if pos != len(text):
            raise GiveUp
        if not kinds or kinds[-1] != "$":
            raise GiveUp
        self.text = text
        self.kinds = kinds
        self.values = values
        self.starts = starts
        self.lines = lines
        self.columns = columns
        self.nl_ends = nl_ends
        self.i = 0

    # ---- tokens ----------------------------------------------------------------------------

    def token(self, i: int, type_: str) -> Token:
        """Token `i` as lark's lexer makes it, of the type its place gives it."""
        value = self.values[i]
        tok = _new_str(Token, value)
        tok.type = type_
        tok.start_pos = start = self.starts[i]
        tok.value = value
        tok.line = line = self.lines[i]
        tok.column = column = self.columns[i]
        tok.end_line = line
        tok.end_column = column + len(value)
        tok.end_pos = start + len(value)
        return tok

    def leaf(self, data: str, i: int, type_: str) -> Tree:
        """A tree of token `i` alone, spanning it (`name`, `int_lit`, `float_lit`)."""
        tok = self.token(i, type_)
        return _tree(data, [tok], tok.line, tok.column, tok.start_pos, tok.end_line, tok.end_column, tok.end_pos)  # type: ignore[arg-type]

    def expect(self, kind: str) -> int:
        """The index of the next token, which must be of `kind`."""
        i = self.i
        if self.kinds[i] != kind:
            raise GiveUp
        self.i = i + 1
        return i

    def keyword(self, word: str) -> int:
        i = self.i
        if self.kinds[i] != "w" or self.values[i] != word:
            raise GiveUp
        self.i = i + 1
        return i

    def is_word(self, word: str) -> bool:
        i = self.i
        return self.kinds[i] == "w" and self.values[i] == word

    def name(self) -> Token:
        """A NAME where nothing else is taken: any word, keywords and dtypes included."""
        return self.token(self.expect("w"), "NAME")

    def integer(self) -> Token:
        """An INT where only an INT is taken (a FLOAT's text there is a syntax error)."""
        return self.token(self.expect("i"), "INT")

    def skip_newline(self) -> int | None:
        i = self.i
        if self.kinds[i] == "n":
            self.i = i + 1
            return i
        return None

    # ---- spans: first and last symbol of a rule, as lark's PropagatePositions takes them ----

    def tok_tok(self, data: str, children: list, first: int, last: int) -> Tree:
        end = self.tok_end(last)
        return _tree(data, children, self.lines[first], self.columns[first], self.starts[first], *end)

    def tok_node(self, data: str, children: list, first: int, last: Tree) -> Tree:
        m = last._meta.__dict__
        return _tree(
            data,
            children,
            self.lines[first],
            self.columns[first],
            self.starts[first],
            m["container_end_line"],
            m["container_end_column"],
            m["container_end_pos"],
        )

    def node_tok(self, data: str, children: list, first: Tree, last: int) -> Tree:
        m = first._meta.__dict__
        return _tree(
            data,
            children,
            m["container_line"],
            m["container_column"],
            m["container_start_pos"],
            *self.tok_end(last),
        )

    def tok_end(self, i: int) -> tuple[int, int, int]:
        if self.kinds[i] == "n":
            return self.nl_ends[i]
        n = len(self.values[i])
        return self.lines[i], self.columns[i] + n, self.starts[i] + n

    # ---- the kernel ------------------------------------------------------------------------

    def start(self) -> Tree:
        first_nl = self.skip_newline()
        kernel = self.kernel()
        last_nl = self.skip_newline()
        if self.kinds[self.i] != "$":
            raise GiveUp
        tree = _copy_span("start", [kernel], kernel, kernel)
        m = tree._meta.__dict__
        if first_nl is not None:
            m["line"] = m["container_line"] = self.lines[first_nl]
            m["column"] = m["container_column"] = self.columns[first_nl]
            m["start_pos"] = m["container_start_pos"] = self.starts[first_nl]
        if last_nl is not None:
            m["end_line"], m["end_column"], m["end_pos"] = self.nl_ends[last_nl]
            m["container_end_line"], m["container_end_column"], m["container_end_pos"] = self.nl_ends[last_nl]
        return tree

    def expr_only(self) -> Tree:
        expr = self.expr()
        if self.kinds[self.i] != "$":
            raise GiveUp
        return _copy_span("expr_only", [expr], expr, expr)

    def kernel(self) -> Tree:
        first = self.keyword("kernel")
        children: list = [self.name()]
        kinds = self.kinds
        if kinds[self.i] == "<":
            children.append(self.param_list())
        self.expect("(")
        if kinds[self.i] != ")":
            children.append(self.arg())
            while kinds[self.i] == ",":
                self.i += 1
                if kinds[self.i] == ")":  # a trailing comma
                    break
                children.append(self.arg())
        self.expect(")")
        self.skip_newline()
        if self.is_word("where"):
            children.append(self.where_clause())
        children.append(self.target_clause())
        children.append(self.grid_clause())
        children.append(self.launch_clause())
        block = self.block()
        children.append(block)
        return self.tok_node("kernel", children, first, block)

    def param_list(self) -> Tree:
        first = self.expect("<")
        params = [self.param()]
        while self.kinds[self.i] == ",":
            self.i += 1
            params.append(self.param())
        last = self.expect(">")
        return self.tok_tok("param_list", params, first, last)

    def param(self) -> Tree:
        first = self.i
        name = self.name()
        self.expect("=")
        if self.kinds[self.i] == "-":
            minus = self.i
            self.i += 1
            value = self.integer()
            signed = self.tok_tok("neg_int", [value], minus, self.i - 1)
        else:
            value = self.integer()
            signed = self.tok_tok("signed_int", [value], self.i - 1, self.i - 1)
        return self.tok_node("param", [name, signed], first, signed)

    def arg(self) -> Tree:
        first = self.i
        children: list = [self.name()]
        self.expect(":")
        if self.is_word("out"):
            children.append(self.token(self.i, "OUT"))
            self.i += 1
        self.keyword("global")
        children.append(self.dtype())
        self.expect("[")
        kinds = self.kinds
        if kinds[self.i] != "]":
            children.append(self.expr())
            while kinds[self.i] == ",":
                self.i += 1
                children.append(self.expr())
        last = self.expect("]")
        option = None
        while kinds[self.i] == "w":
            word = self.values[self.i]
            if word == "align":
                start = self.i
                self.i += 1
                self.expect("(")
                value = self.integer()
                option = self.tok_tok("align", [value], start, self.expect(")"))
            elif word == "strides":
                start = self.i
                self.i += 1
                self.expect("(")
                strides = [self.expr()]
                while kinds[self.i] == ",":
                    self.i += 1
                    strides.append(self.expr())
                option = self.tok_tok("strides", strides, start, self.expect(")"))
            else:
                raise GiveUp
            children.append(option)
        if option is None:
            return self.tok_tok("arg", children, first, last)
        return self.tok_node("arg", children, first, option)

    def dtype(self) -> Token:
        i = self.expect("w")
        if self.values[i] not in DTYPES:
            raise GiveUp
        return self.token(i, "DTYPE")

    def where_clause(self) -> Tree:
        first = self.keyword("where")
        exprs = [self.expr()]
        while self.kinds[self.i] == ",":
            self.i += 1
            exprs.append(self.expr())
        nl = self.skip_newline()
        if nl is None:
            return self.tok_node("where_clause", exprs, first, exprs[-1])
        return self.tok_tok("where_clause", exprs, first, nl)

    def target_clause(self) -> Tree:
        first = self.keyword("target")
        i = self.expect("w")
        start = self.starts[i]
        found = _TARGET.match(self.text, start)
        if found is None:
            raise GiveUp
        end = found.end()
        # the TARGET may run over several words, numbers and '-': it must end where one does
        starts, values = self.starts, self.values
        while starts[self.i] < end:
            self.i += 1
        j = self.i - 1
        if starts[j] + len(values[j]) != end or self.kinds[j] == "n":
            raise GiveUp
        value = found.group()
        tok = _new_str(Token, value)
        tok.type = "TARGET"
        tok.start_pos = start
        tok.value = value
        tok.line = self.lines[i]
        tok.column = self.columns[i]
        tok.end_line = self.lines[i]
        tok.end_column = self.columns[i] + len(value)
        tok.end_pos = end
        nl = self.skip_newline()
        return self.tok_tok("target_clause", [tok], first, j if nl is None else nl)

    def grid_clause(self) -> Tree:
        first = self.keyword("grid")
        self.expect("(")
        exprs = [self.expr()]
        while self.kinds[self.i] == ",":
            self.i += 1
            exprs.append(self.expr())
        last = self.expect(")")
        nl = self.skip_newline()
        return self.tok_tok("grid_clause", exprs, first, last if nl is None else nl)

    def warp_unit(self) -> Token:
        i = self.expect("w")
        if self.values[i] not in ("warps", "warpgroups"):
            raise GiveUp
        return self.token(i, "WARP_UNIT")

    def launch_clause(self) -> Tree:
        first = self.i
        unit = self.warp_unit()
        self.expect("(")
        count = self.integer()
        last = self.expect(")")
        nl = self.skip_newline()
        return self.tok_tok("launch_clause", [unit, count], first, last if nl is None else nl)

    # ---- statements ------------------------------------------------------------------------

    def block(self) -> Tree:
        first = self.expect("{")
        self.skip_newline()
        kinds = self.kinds
        stmts = []
        while kinds[self.i] != "}":
            stmts.append(self.stmt())
            kind = kinds[self.i]
            if kind == "n" or kind == ";":
                self.i += 1
            elif kind != "}":
                raise GiveUp
        last = self.i
        self.i += 1
        return self.tok_tok("block", stmts, first, last)

    def stmt(self) -> Tree:
        i = self.i
        if self.kinds[i] == "w":
            word = self.values[i]
            if word == "for":
                return self.for_stmt()
            if word == "if":
                return self.if_stmt()
            if word == "role":
                return self.role_stmt()
            if word not in _EXPR_WORDS:
                after = self.kinds[i + 1]
                if after == "=" or after == ",":
                    return self.assign()
        expr = self.expr()
        return _copy_span("expr_stmt", [expr], expr, expr)

    def assign(self) -> Tree:
        first = self.i
        names: list = [self.name()]
        while self.kinds[self.i] == ",":
            self.i += 1
            names.append(self.name())
        self.expect("=")
        expr = self.expr()
        names.append(expr)
        return self.tok_node("assign", names, first, expr)

    def for_stmt(self) -> Tree:
        first = self.i
        self.i += 1
        children: list = [self.name()]
        self.keyword("in")
        children.append(self.expr())
        self.expect("..")
        children.append(self.expr())
        if self.is_word("step"):
            start = self.i
            self.i += 1
            expr = self.expr()
            children.append(self.tok_node("step", [expr], start, expr))
        while self.kinds[self.i] == "w":
            start = self.i
            word = self.values[start]
            self.i += 1
            if word == "pipeline":
                self.expect("(")
                self.keyword("stages")
                self.expect("=")
                expr = self.expr()
                children.append(self.tok_tok("pipeline_hint", [expr], start, self.expect(")")))
            elif word == "warp_specialize":
                children.append(self.tok_tok("warp_specialize_hint", [], start, start))
            else:
                raise GiveUp
        block = self.block()
        children.append(block)
        return self.tok_node("for_stmt", children, first, block)

    def if_stmt(self) -> Tree:
        first = self.i
        self.i += 1
        cond = self.expr()
        block = self.block()
        children = [cond, block]
        last = block
        if self.is_word("else"):
            self.i += 1
            if self.kinds[self.i] == "{":
                last = self.block()
            elif self.is_word("if"):
                last = self.if_stmt()
            else:
                raise GiveUp
            children.append(last)
        return self.tok_node("if_stmt", children, first, last)

    def role_stmt(self) -> Tree:
        first = self.i
        self.i += 1
        children: list = [self.name(), self.warp_unit()]
        self.expect("(")
        children.append(self.integer())
        while self.kinds[self.i] == ",":
            self.i += 1
            children.append(self.integer())
        self.expect(")")
        if self.is_word("regs"):
            start = self.i
            self.i += 1
            self.expect("(")
            value = self.integer()
            children.append(self.tok_tok("role_regs", [value], start, self.expect(")")))
        block = self.block()
        children.append(block)
        return self.tok_node("role_stmt", children, first, block)

    # ---- expressions -----------------------------------------------------------------------

    def expr(self, lowest: int = 1) -> Tree:
        """Precedence climbing over `_BINARY`: operators of precedence `lowest` and above."""
        lhs = self.unary()
        kinds = self.kinds
        while True:
            op = _BINARY.get(kinds[self.i])
            if op is None or op[0] < lowest:
                return lhs
            prec, alias, kept = op
            at = self.i
            self.i = at + 1
            rhs = self.expr(prec + 1)
            children = [lhs, rhs] if kept is None else [lhs, self.token(at, kept), rhs]
            lm = lhs._meta.__dict__
            rm = rhs._meta.__dict__
            lhs = _tree(
                alias,
                children,
                lm["container_line"],
                lm["container_column"],
                lm["container_start_pos"],
                rm["container_end_line"],
                rm["container_end_column"],
                rm["container_end_pos"],
            )
            if prec == _CMP:
                follow = _BINARY.get(kinds[self.i])
                if follow is not None and follow[0] == _CMP:
                    raise GiveUp

    def unary(self) -> Tree:
        kind = self.kinds[self.i]
        if kind == "-" or kind == "~":
            first = self.i
            self.i += 1
            operand = self.unary()
            return self.tok_node("neg" if kind == "-" else "invert", [operand], first, operand)
        node = self.atom()
        kinds = self.kinds
        while kinds[self.i] == "[":
            self.i += 1
            children = [node, self.subscript()]
            while kinds[self.i] == ",":
                self.i += 1
                children.append(self.subscript())
            node = self.node_tok("index", children, node, self.expect("]"))
        return node

    def subscript(self) -> Tree:
        i = self.i
        kind = self.kinds[i]
        if kind == ":":
            self.i += 1
            return self.tok_tok("sub_all", [], i, i)
        if kind == "w" and self.values[i] == "None":
            self.i += 1
            return self.tok_tok("sub_newaxis", [], i, i)
        lo = self.expr()
        if self.kinds[self.i] == ":":
            self.i += 1
            hi = self.expr()
            return _copy_span("sub_slice", [lo, hi], lo, hi)
        return _copy_span("sub_index", [lo], lo, lo)

    def atom(self) -> Tree:
        i = self.i
        kind = self.kinds[i]
        if kind == "w":
            word = self.values[i]
            if word not in _EXPR_WORDS:
                self.i = i + 1
                after = self.kinds[i + 1]
                if after == "(" or after == ".":
                    return self.call(i)
                return self.leaf("name", i, "NAME")
            if word in DTYPES:
                self.i = i + 1
                dtype = self.token(i, "DTYPE")
                self.expect("(")
                if self.kinds[self.i] == "-":
                    minus = self.i
                    self.i += 1
                    lit = self.literal()
                    value = self.tok_node("neg_value", [lit], minus, lit)
                else:
                    value = self.literal()
                return self.tok_tok("typed_lit", [dtype, value], i, self.expect(")"))
            if word == "cast":
                self.i = i + 1
                self.expect("<")
                dtype = self.dtype()
                self.expect(">")
                self.expect("(")
                expr = self.expr()
                return self.tok_tok("cast", [dtype, expr], i, self.expect(")"))
            if word == "dot":
                self.i = i + 1
                self.expect("<")
                dtype = self.dtype()
                self.expect(">")
                self.expect("(")
                children = [dtype, self.call_arg()]
                while self.kinds[self.i] == ",":
                    self.i += 1
                    children.append(self.call_arg())
                return self.tok_tok("dot", children, i, self.expect(")"))
            return self.literal()
        if kind == "i" or kind == "f":
            return self.literal()
        if kind == "(":
            self.i = i + 1
            expr = self.expr()
            last = self.expect(")")
            # `?atom: "(" expr ")"` is the inner tree itself; its container takes the brackets
            m = expr._meta.__dict__
            m["container_line"] = self.lines[i]
            m["container_column"] = self.columns[i]
            m["container_start_pos"] = self.starts[i]
            m["container_end_line"], m["container_end_column"], m["container_end_pos"] = self.tok_end(last)
            return expr
        if kind == "[":
            self.i = i + 1
            items = []
            if self.kinds[self.i] != "]":
                items.append(self.expr())
                while self.kinds[self.i] == ",":
                    self.i += 1
                    items.append(self.expr())
            return self.tok_tok("list", items, i, self.expect("]"))
        raise GiveUp

    def literal(self) -> Tree:
        i = self.i
        kind = self.kinds[i]
        self.i = i + 1
        if kind == "i":
            return self.leaf("int_lit", i, "INT")
        if kind == "f":
            return self.leaf("float_lit", i, "FLOAT")
        if kind == "w":
            alias = _LITERAL_WORDS.get(self.values[i])
            if alias is not None:
                return self.tok_tok(alias, [], i, i)
        raise GiveUp

    def call(self, first: int) -> Tree:
        """`dotted_name "(" [call_arg ("," call_arg)*] ")"`, from the name at `first`."""
        names = [self.token(first, "NAME")]
        kinds = self.kinds
        while kinds[self.i] == ".":
            self.i += 1
            names.append(self.name())
        dotted = self.tok_tok("dotted_name", names, first, self.i - 1)
        self.expect("(")
        children: list = [dotted]
        if kinds[self.i] != ")":
            children.append(self.call_arg())
            while kinds[self.i] == ",":
                self.i += 1
                children.append(self.call_arg())
        return self.tok_tok("call", children, first, self.expect(")"))

    def call_arg(self) -> Tree:
        i = self.i
        if self.kinds[i] == "w":
            word = self.values[i]
            after = self.kinds[i + 1]
            if word in DTYPES and after == "[":
                dtype = self.token(i, "DTYPE")
                self.i = i + 2
                dims: list = [dtype]
                if self.kinds[self.i] != "]":
                    dims.append(self.expr())
                    while self.kinds[self.i] == ",":
                        self.i += 1
                        dims.append(self.expr())
                return self.tok_tok("tile_type", dims, i, self.expect("]"))
            if after == "=" and word not in _EXPR_WORDS:
                name = self.token(i, "NAME")
                self.i = i + 2
                expr = self.expr()
                return self.tok_node("kwarg", [name, expr], i, expr)
        return self.expr()


def _copy_span(data: str, children: list, first: Tree, last: Tree) -> Tree:
    """A tree spanning from `first`'s container to `last`'s (the two may be one node)."""
    f = first._meta.__dict__
    e = last._meta.__dict__
    return _tree(
        data,
        children,
        f["container_line"],
        f["container_column"],
        f["container_start_pos"],
        e["container_end_line"],
        e["container_end_column"],
        e["container_end_pos"],
    )
