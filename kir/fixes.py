"""The typing errors found while a program is read, with their fix as edits of the source.

The parser stops at the first typing error (`types.*`), before any program exists, so the fix is
worked out here from what it has then: the syntax tree, the source text and the diagnostic (its
span names the expression that fails; its message the dtypes and shapes involved). Each rule
offers a few candidate edits, most likely first; `with_edits` keeps the first after which the
program reads without error (the caller's `holds`), with the hint saying what it does. With no
candidate that holds, the diagnostic keeps no hint: its message says what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from lark import Token, Tree

from kir.diagnostics import Diagnostic, Edit, Span
from kir.syntax import call_name

Candidate = tuple[str, tuple[Edit, ...]]  # the hint, the edits that make it
Holds = Callable[[tuple[Edit, ...]], bool]

# A typing rule whose fix depends on what the program means (which seed), not on its text: its
# diagnostics say what is wrong and give no hint.
_NO_FIX = ("types.random",)
# The float dtypes, widest first.
_FLOAT_RANK = {"f64": 0, "f32": 1, "bf16": 2, "f16": 3, "f8e4m3": 4, "f8e5m2": 5}


def with_edits(diag: Diagnostic, tree: Tree, text: str, holds: Holds) -> Diagnostic:
    """`diag` with the first of its rule's candidate fixes that `holds` as its hint and edits;
    a typing diagnostic none of whose candidates holds loses its hint."""
    fixer = _FIXERS.get(diag.rule)
    if diag.span is None or diag.edits or (fixer is None and diag.rule not in _NO_FIX):
        return diag
    if fixer is not None:
        src = _Source(text, diag.span.file, tree)
        try:
            candidates = _first(fixer(diag, src.nodes_at(diag.span), src), 4)
        except Exception:  # noqa: BLE001 - a bug here must not hide the error it was to fix
            candidates = []
        seen: set[tuple[Edit, ...]] = set()
        for hint, edits in candidates:
            if edits in seen:
                continue
            seen.add(edits)
            if holds(edits):
                return replace(diag, hint=hint, edits=edits)
    return replace(diag, hint="")


def _first(candidates: Iterator[Candidate], n: int) -> list[Candidate]:
    out: list[Candidate] = []
    for c in candidates:
        if c[1]:
            out.append(c)
        if len(out) == n:
            break
    return out


@dataclass
class _Source:
    text: str
    file: str
    tree: Tree

    def __post_init__(self) -> None:
        self.starts = [0]
        for line in self.text.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def span(self, node: Tree | Token) -> Span:
        if isinstance(node, Token):
            return Span(node.line or 0, node.column or 0, node.end_line or 0, node.end_column or 0, self.file)
        m = node.meta
        return Span(m.line, m.column, m.end_line, m.end_column, self.file)

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col - 1

    def of(self, node: Tree | Token | Span) -> str:
        s = node if isinstance(node, Span) else self.span(node)
        return self.text[self.offset(s.line, s.col) : self.offset(s.end_line, s.end_col)]

    def nodes_at(self, span: Span) -> list[Tree]:
        """The trees whose span is `span`, outermost first."""
        return [
            t
            for t in self.tree.iter_subtrees_topdown()
            if not getattr(t.meta, "empty", True)
            and (t.meta.line, t.meta.column, t.meta.end_line, t.meta.end_column)
            == (span.line, span.col, span.end_line, span.end_col)
        ]

    def set(self, node: Tree | Token | Span, new: str) -> Edit:
        return Edit(node if isinstance(node, Span) else self.span(node), new)

    def between(self, a: Tree | Token, b: Tree | Token) -> Span:
        """From the end of `a` to the end of `b` (an argument with the comma before it)."""
        sa, sb = self.span(a), self.span(b)
        return Span(sa.end_line, sa.end_col, sb.end_line, sb.end_col, self.file)

    def postfix(self, node: Tree) -> str:
        """The node's text, in parentheses where a postfix `[...]` would not bind to all of it."""
        t = self.of(node)
        return t if _is_atom(node) else f"({t})"


def _is_atom(node: Tree | Token) -> bool:
    return isinstance(node, Tree) and node.data in ("name", "index", "call", "cast", "dot", "int_lit", "float_lit")


def _kind(nodes: list[Tree], *kinds: str) -> Tree | None:
    return next((n for n in nodes if n.data in kinds), None)


def _call(nodes: list[Tree], *names: str) -> Tree | None:
    return next((n for n in nodes if n.data == "call" and (not names or call_name(n) in names)), None)


def _args(node: Tree) -> tuple[list[Tree], dict[str, Tree]]:
    """A call's (or dot's) positional arguments and its keyword arguments' kwarg trees."""
    first = 1
    pos: list[Tree] = []
    kw: dict[str, Tree] = {}
    for a in node.children[first:]:
        if isinstance(a, Tree) and a.data == "kwarg":
            kw[str(a.children[0])] = a
        elif isinstance(a, Tree):
            pos.append(a)
    return pos, kw


def _operands(node: Tree) -> list[Tree]:
    """The value operands of an elementwise expression or call."""
    if node.data in ("compare", "shift"):
        return [node.children[0], node.children[2]]
    if node.data in ("add", "sub", "mul", "div", "rem", "bin_and", "bin_or", "bin_xor"):
        return [node.children[0], node.children[1]]
    pos, _ = _args(node)
    if node.data == "call" and call_name(node) == "where":
        return pos[1:3]
    return pos[:2]


def _is_literal(node: Tree) -> bool:
    return node.data in ("int_lit", "float_lit", "inf_lit", "nan_lit", "true_lit", "false_lit", "typed_lit", "neg")


def _cast(src: _Source, node: Tree, dtype: str) -> Candidate:
    if node.data == "cast":  # a cast to another dtype becomes one to this dtype
        new = f"cast<{dtype}>({src.of(node.children[1])})"
    else:
        new = f"cast<{dtype}>({src.of(node)})"
    return f"cast `{src.of(node)}` to {dtype}: `{new}`", (src.set(node, new),)


def _without_arg(src: _Source, call: Tree, arg: Tree) -> Edit:
    """The edit that removes the argument `arg` of `call`, with its comma."""
    i = call.children.index(arg)
    if i > 1:  # from the end of the argument before it
        return Edit(src.between(call.children[i - 1], arg), "")
    sa, sb = src.span(arg), src.span(call.children[i + 1])
    return Edit(Span(sa.line, sa.col, sb.line, sb.col, src.file), "")


# ---- one fixer per rule ------------------------------------------------------------------------


def _store_dtype(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    found = re.search(r"holds (\w+)", d.message)
    call = _call(nodes)
    if found is None or call is None:
        return
    pos, _ = _args(call)
    if len(pos) >= 2 and not _is_literal(pos[1]):
        _, edits = _cast(src, pos[1], found.group(1))
        yield f"cast the stored value to {found.group(1)}: `{edits[0].text}`", edits


def _operand_dtype(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    found = re.search(r"\((\w+) and (\w+)\)", d.message)
    node = _kind(nodes, "dot") or _kind(nodes, "call", "add", "sub", "mul", "div", "rem", "compare", "shift")
    if found is None or node is None:
        return
    dtypes = list(found.groups())
    operands = _operands(node)
    if len(operands) != 2:
        return

    # Elementwise, the wider dtype keeps the precision; a dot's operands go to the matrix
    # units in the narrower one.
    def preferred(i: int) -> int:
        rank = _FLOAT_RANK.get(dtypes[i])
        if rank is None:  # an integer operand is the one cast to a float
            return len(_FLOAT_RANK)
        return -rank if node.data == "dot" else rank

    order = sorted(range(2), key=preferred)
    for keep in order:
        other = 1 - keep
        if not _is_literal(operands[other]):
            yield _cast(src, operands[other], dtypes[keep])


def _axes_only(node: Tree) -> bool:
    """Whether `node` is `x[...]` that only adds axes (`x[:, None]`)."""
    subs = node.children[1:]
    return node.data == "index" and all(isinstance(s, Tree) and s.data in ("sub_all", "sub_newaxis") for s in subs)


def _new_axis(src: _Source, node: Tree, rank: int) -> Iterator[str]:
    """`node` with one axis more, the new axis last first: `x[:, None]`, then `x[None, :]`."""
    base, subs = node, rank
    if _axes_only(node):
        base, subs = node.children[0], sum(s.data == "sub_all" for s in node.children[1:])
    for at in reversed(range(subs + 1)):
        parts = [":"] * subs
        parts.insert(at, "None")
        yield f"{src.postfix(base)}[{', '.join(parts)}]"


def _broadcast(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    found = re.search(r"shapes \[(.*?)\] and \[(.*?)\]", d.message)
    node = _kind(nodes, "add", "sub", "mul", "div", "rem", "compare", "bin_and", "bin_or", "bin_xor", "call")
    if found is None or node is None:
        return
    ranks = [len(s.split(",")) if s else 0 for s in found.groups()]
    operands = _operands(node)
    if len(operands) != 2:
        return
    for i in sorted(range(2), key=lambda i: ranks[i]):
        # one axis short of its partner, or its axis added at the wrong place (`bias[:, None]`
        # for `bias[None, :]`); two tiles of one rank are not made an outer product
        if _is_literal(operands[i]) or ranks[i] + (0 if _axes_only(operands[i]) else 1) != ranks[1 - i]:
            continue
        for new in _new_axis(src, operands[i], ranks[i]):
            if new != src.of(operands[i]):
                yield f"give the operand its axis: `{new}`", (src.set(operands[i], new),)


def _dot_shape(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    node = _kind(nodes, "dot")
    if node is None:
        return
    pos, _ = _args(node)
    if len(pos) < 2:
        return
    a, b = pos[0], pos[1]
    yield f"transpose b: `trans({src.of(b)})`", (src.set(b, f"trans({src.of(b)})"),)
    yield (
        f"swap the operands: `{src.of(b)}` by `{src.of(a)}`",
        (src.set(a, src.of(b)), src.set(b, src.of(a))),
    )
    yield f"transpose a: `trans({src.of(a)})`", (src.set(a, f"trans({src.of(a)})"),)


def _float_only(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    shift = _kind(nodes, "shift")
    if shift is not None:
        lhs, op, rhs = shift.children
        if isinstance(rhs, Tree) and rhs.data == "int_lit" and int(str(rhs.children[0]), 0) < 32:
            factor = 2 ** int(str(rhs.children[0]), 0)
            new = f"{src.of(lhs)} {'/' if str(op) == '>>' else '*'} {factor}.0"
            yield f"use float arithmetic: `{new}`", (src.set(shift, new),)
        return
    call = _call(nodes)
    if call is None or "floating-point operand" not in d.message:
        return
    pos, _ = _args(call)
    if len(pos) == 1:
        new = f"cast<f32>({src.of(pos[0])})"
        yield f"cast the operand to f32 first: `{new}`", (src.set(pos[0], new),)


def _axis(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    found = re.search(r"out of range for (?:a )?rank[- ](\d+)", d.message)
    call = _call(nodes)
    if found is None or call is None:
        return
    _, kw = _args(call)
    if "axis" not in kw:
        return
    for axis in reversed(range(int(found.group(1)))):
        yield f"reduce over axis {axis}: `axis = {axis}`", (src.set(kw["axis"].children[1], str(axis)),)


def _store_shape(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    axis = re.search(r"over axis (\d+)", d.hint)
    call = _call(nodes)
    if call is None:
        return
    pos, kw = _args(call)
    if axis is not None and "axis" in kw:  # a reduction over the wrong axis, blamed for the store
        yield (
            f"reduce over axis {axis.group(1)}: `axis = {axis.group(1)}`",
            (src.set(kw["axis"].children[1], axis.group(1)),),
        )
        return
    found = re.search(r"a \[(.*?)\] value does not fit the \[(.*?)\] destination", d.message)
    if found is None or not pos or pos[0].data != "index":
        return
    value, dest = (s.split(", ") for s in found.groups())
    subs = pos[0].children[1:]
    if len(value) != len(dest) or len(subs) != len(dest):
        return
    edits = []
    for sub, want, have in zip(subs, value, dest, strict=True):
        if want == have:
            continue
        if sub.data != "sub_slice" or not re.search(rf"\b{re.escape(have)}\b", src.of(sub.children[1])):
            return
        edits.append(src.set(sub.children[1], re.sub(rf"\b{re.escape(have)}\b", want, src.of(sub.children[1]))))
    shown = ", ".join(e.text for e in edits)
    yield f"make the access the value's shape [{', '.join(value)}]: `{shown}`", tuple(edits)


def _access_mix(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    call = _call(nodes)
    if call is None:
        return
    pos, _ = _args(call)
    if not pos or pos[0].data != "index" or len(pos[0].children) != 3:
        return
    subs = pos[0].children[1:]
    parts = []
    for i, sub in enumerate(subs):
        axes = "[:, None]" if i == 0 else "[None, :]"
        if sub.data == "sub_index":
            parts.append(f"{src.postfix(sub.children[0])}{axes}")
        elif sub.data == "sub_slice" and src.of(sub.children[0]) == "0":
            parts.append(f"arange(0, {src.of(sub.children[1])}){axes}")
        elif sub.data == "sub_slice" and sub.children[1].data == "add":
            start, end = sub.children
            if src.of(end.children[0]) != src.of(start):
                return
            parts.append(f"({src.of(start)} + arange(0, {src.of(end.children[1])})){axes}")
        else:
            return
    new = f"{src.of(pos[0].children[0])}[{', '.join(parts)}]"
    yield f"gather through index tiles only: `{new}`", (src.set(pos[0], new),)


def _carried(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    found = re.search(r"'(\w+)' is (\w+)", d.message)
    if found is None or not nodes:
        return
    node = nodes[0]
    name, dtype = found.groups()
    if node.data == "cast":
        inner = src.of(node.children[1])
        yield f"keep '{name}' {dtype} in the loop: drop the cast, `{inner}`", (src.set(node, inner),)
    edits = _cast(src, node, dtype)[1]
    yield f"keep '{name}' {dtype} in the loop: `{edits[0].text}`", edits


def _condition(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    found = re.search(r"not i1\[([^\],]*)\]$", d.message)
    if found is None or not nodes:
        return
    new = f"max({src.of(nodes[0])}, axis = 0)"
    yield f"branch where any lane holds: `{new}`", (src.set(nodes[0], new),)


def _dot_acc(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    found = re.search(r"the accumulator is (\w+)(\[.*?\])?, the product is (\w+\[.*?\])", d.message)
    node = _kind(nodes, "dot")
    if found is None or node is None:
        return
    had, _, product = found.groups()
    pos, _ = _args(node)
    if len(pos) != 3 or pos[2].data != "name":
        return
    name = str(pos[2].children[0])
    made = [
        call
        for assign in src.tree.find_data("assign")
        if [str(t) for t in assign.children[:-1]] == [name]
        and (call := assign.children[-1]).data == "call"
        and call_name(call) == "zeros"
        and src.span(assign).line < src.span(node).line
    ]
    if not made:
        return
    zeros = made[-1]
    fix = src.set(zeros, f"zeros({product})")
    hint = f"make the accumulator the product's type: `zeros({product})`"
    yield hint, (fix,)
    product_dtype = product.split("[")[0]
    stores = [
        s
        for s in src.tree.find_data("call")
        if call_name(s) == "store"
        and len(_args(s)[0]) >= 2
        and src.of(_args(s)[0][1]) == name
        and src.span(s).line > src.span(node).line
    ]
    if stores and had != product_dtype:
        casts = tuple(src.set(_args(s)[0][1], f"cast<{had}>({name})") for s in stores)
        yield f"{hint}, and store `cast<{had}>({name})`", (fix, *casts)


def _evict(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    call = _call(nodes)
    if call is not None:
        _, kw = _args(call)
        if "evict" in kw and "not cached" in d.message:
            yield "drop `evict`: shared memory has no cache policy", (_without_arg(src, call, kw["evict"]),)
        return
    word = next((n for n in nodes if n.data == "name"), None)
    if word is not None and "`first` or `last`" in d.message:
        yield "`evict = first`: lines read once, evicted before others", (src.set(word, "first"),)
        yield "`evict = last`: lines read again soon, kept", (src.set(word, "last"),)


def _index(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    found = re.search(r"(\d+) indices for a rank-(\d+)", d.message)
    call = _call(nodes)
    if found is None or call is None:
        return
    pos, _ = _args(call)
    rank = int(found.group(2))
    if not pos or pos[0].data != "index" or rank < 1:
        return
    subs = pos[0].children[1:]
    if len(subs) <= rank:
        return
    kept = ", ".join(src.of(s) for s in subs[:rank])
    yield (
        f"index its {rank} dimension{'s' if rank > 1 else ''} only: `[{kept}]`",
        (Edit(src.between(subs[rank - 1], subs[-1]), ""),),
    )


def _layout(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    call = _call(nodes, "convert_layout")
    if call is None:
        return
    pos, _ = _args(call)
    if len(pos) != 2 or pos[1].data != "call":
        return
    lists, _ = _args(pos[1])
    if "takes 4 lists" in d.message and len(lists) == 3 and lists[0].data == "list":
        rank = len(lists[0].children)
        order = f"[{', '.join(str(i) for i in reversed(range(rank)))}]"
        yield (
            f"give the order, innermost first: `{order}`",
            (Edit(Span(*_end(src, lists[-1]), *_end(src, lists[-1]), src.file), f", {order}"),),
        )
    elif "one entry per dimension" in d.message:
        inner = src.of(pos[0])
        yield f"keep the layout the tile has: `{inner}`", (src.set(call, inner),)


def _end(src: _Source, node: Tree) -> tuple[int, int]:
    s = src.span(node)
    return s.end_line, s.end_col


def _mask(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    call = _call(nodes)
    if call is None:
        return
    _, kw = _args(call)
    if "mask" not in kw:
        return
    mask = kw["mask"].children[1]
    if re.search(r"the mask is i1, not [iu]\d+", d.message):
        # a count of what is left (`rest = N - offs`) holds where it is positive
        new = f"{src.postfix(mask)} {'!=' if d.message.split('not ')[-1].startswith('u') else '>'} 0"
        yield f"a mask is a comparison: `mask = {new}`", (src.set(mask, new),)
    elif "does not broadcast" in d.message and (found := re.search(r"mask \[(.*?)\]", d.message)):
        for new in _new_axis(src, mask, len(found.group(1).split(","))):
            yield f"give the mask its axis: `mask = {new}`", (src.set(mask, new),)


def _rank(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    call = _call(nodes)
    if call is None:
        return
    pos, _ = _args(call)
    if pos and ("takes a 2-D tile" in d.message or "reduces a tile, not" in d.message):
        inner = src.of(pos[0])
        yield f"use the value as it is: `{inner}`", (src.set(call, inner),)


def _static(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    name = _kind(nodes, "name")
    if name is None or "run-time value" not in d.message:
        return
    kernel = src.tree.children[0]
    params = next((c for c in kernel.children if isinstance(c, Tree) and c.data == "param_list"), None)
    for p in params.children if params is not None else []:
        yield f"size it with the parameter `{p.children[0]}`", (src.set(name, str(p.children[0])),)


def _topk(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    call = _call(nodes, "topk")
    found = re.search(r"k = (-?\d+) must be", d.message)
    if call is None or found is None or int(found.group(1)) >= 1:
        return
    _, kw = _args(call)
    if "k" in kw and kw["k"].children[1].data in ("int_lit", "neg"):
        yield "keep the largest value: `k = 1`", (src.set(kw["k"].children[1], "1"),)


def _literal(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    lit = _kind(nodes, "float_lit")
    if lit is None or "is not an integer" not in d.message:
        return
    value = float(str(lit.children[0]))
    if value.is_integer():
        yield f"write an integer: `{int(value)}`", (src.set(lit, str(int(value))),)


def _dot_precision(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    node = _kind(nodes, "dot")
    if node is None or "is for f32 operands" not in d.message:
        return
    _, kw = _args(node)
    if "precision" in kw:
        yield (
            "drop `precision`: low-precision operands already run on the matrix units",
            (_without_arg(src, node, kw["precision"]),),
        )


def _value(d: Diagnostic, nodes: list[Tree], src: _Source) -> Iterator[Candidate]:
    """Memory in arithmetic (`buf * 2.0`): read it as the program reads or writes it elsewhere,
    or as it accesses another tensor of the same shape (`y[offs], mask = mask` for `x`)."""
    if not nodes or " not global " not in d.message and " not smem " not in d.message:
        return
    shapes = {str(a.children[0]): [src.of(e) for e in a.children if isinstance(e, Tree) and e.data != "align"]
              for a in src.tree.find_data("arg")}  # fmt: skip
    for name in [o for o in _operands(nodes[0]) if o.data == "name"]:
        memory = str(name.children[0])
        alike = [memory, *(n for n, shape in shapes.items() if n != memory and shape == shapes.get(memory))]
        for other in alike:
            for access, mask in _accesses(src, other):
                read = f"load({memory}{access[len(other) :]}{f', mask = {mask}' if mask else ''})"
                yield f"read `{memory}` first: `{read}`", (src.set(name, read),)


def _accesses(src: _Source, memory: str) -> Iterator[tuple[str, str]]:
    """The texts of the accesses of `memory` by load, store and the atomics, with their masks."""
    for call in src.tree.find_data("call"):
        if call_name(call) not in ("load", "store") and not call_name(call).startswith("atomic_"):
            continue
        pos, kw = _args(call)
        if pos and pos[0].data == "index" and src.of(pos[0].children[0]) == memory:
            yield src.of(pos[0]), src.of(kw["mask"].children[1]) if "mask" in kw else ""


_FIXERS: dict[str, Callable[[Diagnostic, list[Tree], _Source], Iterator[Candidate]]] = {
    "types.store-dtype": _store_dtype,
    "types.operand-dtype": _operand_dtype,
    "types.broadcast": _broadcast,
    "types.dot-shape": _dot_shape,
    "types.float-only": _float_only,
    "types.axis": _axis,
    "types.store-shape": _store_shape,
    "types.access-mix": _access_mix,
    "types.carried": _carried,
    "types.condition": _condition,
    "types.dot-acc": _dot_acc,
    "types.evict": _evict,
    "types.index": _index,
    "types.layout": _layout,
    "types.mask": _mask,
    "types.rank": _rank,
    "types.static": _static,
    "types.topk": _topk,
    "types.literal": _literal,
    "types.dot-precision": _dot_precision,
    "types.value": _value,
}
