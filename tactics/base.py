"""What a tactic is: a frozen value with typed parameters, a precondition and a rewrite.

A tactic is one decision of the search, typed and checked: set the warp count, the stage count
of a pipelined loop, a tile parameter, a cache policy; fix a shape symbol; multiply by a
reciprocal instead of dividing. It has
- parameters (`Param`), each with a domain (`Choice`, `IntRange`, `PowersOfTwo`, `Names`) and a
  default; a value outside the domain is a located `tactic.param` diagnostic, never an exception
  from deep inside the rewrite;
- `precondition(program, target)`: empty when the tactic applies, else located reasons (rule
  `tactic.not-applicable`, or `tactic.<name>.<why>` where a more specific reason is known, at
  the op, loop or clause it looked at);
- `apply(program, **params)`: a new program; the input is never changed;
- `domains(program, target)`: the values of each parameter that make sense for this program
  (the loops that carry a pipeline hint, the parameters that size tiles), finite, for a search
  to enumerate;
- `numerics`: what the rewrite does to results. "exact": bitwise equal. "reassociates": equal
  within tolerance, because floating-point sums are reordered. "approximate": changed on
  purpose (a reciprocal rounds once more than a division); offered only where the task's
  tolerance admits it (`tactics.applicable(..., numerics=...)`).

How `apply` works: it clones the program's IR (`Program.clone`, which carries every op's span
and comments to its copy) and rewrites the clone's ops and kernel properties, as the lowering
passes do (lowering/passes/*.py). Editing the IR rather than the text keeps the spans of every
op that survives pointing into the input's source, so a diagnostic about the result still
points at the line the user wrote; new ops take the span of the op they stand for. The text is
printed from the IR (`Program.text`), so the result is canonical by construction and parses
back to the same IR (tests/tactics check both for every tactic). Editing text instead would
need a reparse after every move, which renumbers every span past the first change and loses
the comments' attachment to ops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from kir.diagnostics import Diagnostic, KirError, Span
from kir.names import IDENTIFIER, suggest

if TYPE_CHECKING:
    from kir.program import Program

Numerics = Literal["exact", "reassociates", "approximate"]
NUMERICS: tuple[Numerics, ...] = ("exact", "reassociates", "approximate")
Value = int | str


# ---- domains -----------------------------------------------------------------------------------


class Domain(Protocol):
    """The values a parameter may take."""

    def admits(self, value: Value) -> bool: ...

    def describe(self) -> str: ...

    def values(self) -> tuple[Value, ...] | None:
        """Every value, when there are few enough to list; None for an open domain."""
        ...

    def parse(self, text: str) -> Value:
        """A command-line word as a value of the domain's type (ValueError when it is not one)."""
        ...


def _int(text: str) -> int:
    text = text.strip()
    return int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)


@dataclass(frozen=True)
class Choice:
    """One of a finite tuple of values (all ints or all strings)."""

    options: tuple[Value, ...]

    def admits(self, value: Value) -> bool:
        return value in self.options and type(value) in {type(o) for o in self.options}

    def describe(self) -> str:
        return "one of " + ", ".join(str(o) for o in self.options)

    def values(self) -> tuple[Value, ...]:
        return self.options

    def parse(self, text: str) -> Value:
        if all(isinstance(o, int) for o in self.options):
            return _int(text)
        return text.strip()


@dataclass(frozen=True)
class IntRange:
    """An integer in `low ..= high` with a step from `low`."""

    low: int
    high: int
    step: int = 1

    def admits(self, value: Value) -> bool:
        return isinstance(value, int) and self.low <= value <= self.high and (value - self.low) % self.step == 0

    def describe(self) -> str:
        step = f" in steps of {self.step}" if self.step != 1 else ""
        return f"an integer in {self.low}..{self.high}{step}"

    def values(self) -> tuple[int, ...] | None:
        count = (self.high - self.low) // self.step + 1
        return tuple(range(self.low, self.high + 1, self.step)) if count <= 64 else None

    def parse(self, text: str) -> Value:
        return _int(text)


@dataclass(frozen=True)
class PowersOfTwo:
    """A power of two in `low ..= high` (tile sizes, warp counts: Triton's extents are powers of two)."""

    low: int
    high: int

    def admits(self, value: Value) -> bool:
        return isinstance(value, int) and self.low <= value <= self.high and value > 0 and value & (value - 1) == 0

    def describe(self) -> str:
        return f"a power of two in {self.low}..{self.high}"

    def values(self) -> tuple[int, ...]:
        out, v = [], 1
        while v <= self.high:
            if v >= self.low:
                out.append(v)
            v *= 2
        return tuple(out)

    def parse(self, text: str) -> Value:
        return _int(text)


@dataclass(frozen=True)
class Names:
    """A name in the program (a parameter, a shape symbol); which ones, `domains()` says."""

    what: str

    def admits(self, value: Value) -> bool:
        return isinstance(value, str) and IDENTIFIER.fullmatch(value) is not None

    def describe(self) -> str:
        return f"the name of {self.what}"

    def values(self) -> None:
        return None

    def parse(self, text: str) -> Value:
        return text.strip()


# ---- parameters ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A typed parameter of a tactic: its name, its domain, its default and what it means."""

    name: str
    domain: Domain
    default: Value | None
    doc: str

    def check(self, tactic: str, value: object, span: Span | None) -> Diagnostic | None:
        """A `tactic.param` error at `span` when `value` is not in the domain."""
        if isinstance(value, bool) or not isinstance(value, int | str) or not self.domain.admits(value):
            return Diagnostic(
                "tactic.param",
                "error",
                span,
                f"tactic {tactic}: {self.name} = {value!r} is not {self.domain.describe()}",
                f"{self.name}: {self.doc}",
            )
        return None

    def parse(self, tactic: str, text: str, span: Span | None = None) -> Value:
        """A command-line word as this parameter's value, or a `tactic.param` `KirError`."""
        try:
            return self.domain.parse(text)
        except ValueError:
            raise KirError(
                Diagnostic(
                    "tactic.param",
                    "error",
                    span,
                    f"tactic {tactic}: {self.name} = {text!r} is not {self.domain.describe()}",
                    f"{self.name}: {self.doc}",
                )
            ) from None


# ---- the tactic ----------------------------------------------------------------------------------

Check = Callable[["Program", str], list[Diagnostic]]
Rewrite = Callable[..., None]
DomainsOf = Callable[["Program", str, Mapping[str, int]], dict[str, tuple[Value, ...]]]
Validate = Callable[["Program", dict[str, Value]], list[Diagnostic]]
Anchor = Callable[["Program"], Span | None]


def target_of(program: Program, target: str | None) -> str:
    """The target a tactic decides for: the one asked for, else the kernel's declared one."""
    return target or program.kernel.target.data


@dataclass(frozen=True)
class Tactic:
    """One typed move of the search (see the module docstring).

    `check(program, target)` gives the reasons it does not apply (empty: it does);
    `validate(program, values)` the reasons these parameter values do not fit this program (a
    loop index past the last loop, a tile size the `where` clauses forbid); `rewrite(program,
    **values)` edits a clone in place; `domains_of(program, target, shapes)` the values that
    make sense here (`shapes`: the shape symbols' values where known, else empty); `anchor(program)` where a bad parameter value is reported (the clause or op the
    parameter sets)."""

    name: str
    summary: str
    explain: str = field(repr=False)
    params: tuple[Param, ...]
    numerics: Numerics
    check: Check = field(repr=False)
    rewrite: Rewrite = field(repr=False)
    domains_of: DomainsOf | None = field(default=None, repr=False)
    validate: Validate | None = field(default=None, repr=False)
    anchor: Anchor | None = field(default=None, repr=False)
    examples: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if self.numerics not in NUMERICS:
            raise ValueError(f"tactic {self.name}: numerics {self.numerics!r} is not one of {', '.join(NUMERICS)}")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KirError(self._unknown_param(name, None))

    def _unknown_param(self, name: str, span: Span | None) -> Diagnostic:
        known = ", ".join(self.param_names) or "none"
        return Diagnostic(
            "tactic.param",
            "error",
            span,
            f"tactic {self.name} has no parameter {name!r}",
            suggest(name, self.param_names) or f"its parameters: {known}",
        )

    # -- the verbs ---------------------------------------------------------------------------------

    def focus(self, program: Program, target: str | None = None) -> int:
        """A program of several kernels (`kir.multi`): the index of the first kernel, in launch
        order, the tactic applies to (0 when it applies to none). A tactic rewrites that kernel
        and leaves the others as they are."""
        for i, k in enumerate(program.kernels()):
            if not any(d.is_error for d in self._precondition(k, target)):
                return i
        return 0

    def precondition(self, program: Program, target: str | None = None) -> list[Diagnostic]:
        """Empty when the tactic applies to `program` for `target` (default: the kernel's
        declared target); else the located reasons it does not. In a program of several
        kernels, to one of them (`focus`)."""
        if program.is_multi:
            return self._precondition(program.kernels()[self.focus(program, target)], target)
        return self._precondition(program, target)

    def _precondition(self, program: Program, target: str | None) -> list[Diagnostic]:
        try:
            return list(self.check(program, target_of(program, target)))
        except KirError as err:
            return list(err.diagnostics)
        except Exception as err:  # a bug of a tactic is a diagnostic of the caller's, not a crash
            return [_internal(self.name, err, program)]

    def domains(
        self, program: Program, target: str | None = None, shapes: Mapping[str, int] | None = None
    ) -> dict[str, tuple[Value, ...]]:
        """The values of each parameter that make sense for `program`: the tactic's own choice
        where it has one, else the parameter's domain when it is finite, else its default.
        `shapes` are the shape symbols' values the program will run at, where the caller knows
        them (a task's preset): a tactic that fixes a shape offers those."""
        if program.is_multi:
            program = program.kernels()[self.focus(program, target)]
        chosen = self.domains_of(program, target_of(program, target), shapes or {}) if self.domains_of else {}
        out: dict[str, tuple[Value, ...]] = {}
        for p in self.params:
            if p.name in chosen:
                out[p.name] = tuple(chosen[p.name])
            else:
                listed = p.domain.values()
                out[p.name] = listed if listed is not None else (() if p.default is None else (p.default,))
        return out

    def bind(self, program: Program, params: Mapping[str, object]) -> dict[str, Value]:
        """The parameter values of one application: `params` over the defaults, each checked
        against its domain and, together, against the program (`validate`; in a program of
        several kernels, the kernel of `focus`); a `KirError` with every problem otherwise."""
        if program.is_multi:
            program = program.kernels()[self.focus(program)]
        span = self.anchor(program) if self.anchor else program.span()
        problems = [self._unknown_param(k, span) for k in params if k not in self.param_names]
        values: dict[str, Value] = {}
        for p in self.params:
            value = params.get(p.name, p.default)
            if value is None:
                problems.append(
                    Diagnostic(
                        "tactic.param",
                        "error",
                        span,
                        f"tactic {self.name} needs a value for {p.name}",
                        f"{p.name}: {p.doc}; give --param {p.name}=VALUE",
                    )
                )
                continue
            bad = p.check(self.name, value, span)
            if bad is not None:
                problems.append(bad)
            else:
                values[p.name] = value  # type: ignore[assignment]  # checked: an int or a str
        if problems:
            raise KirError(problems)
        if self.validate is not None:
            problems = self.validate(program, values)
            if problems:
                raise KirError(problems)
        return values

    def apply(self, program: Program, /, target: str | None = None, **params: Value) -> Program:
        """A new program with the tactic applied: the input is not changed. A `KirError` with
        located reasons when the tactic does not apply (for `target`, default the kernel's) or
        a parameter value does not fit."""
        if program.is_multi:  # the kernel of `focus` rewritten, the others as they are
            index = self.focus(program, target)
            return program.with_kernel(index, self.apply(program.kernels()[index], target, **params))
        reasons = [d for d in self.precondition(program, target) if d.is_error]
        if reasons:
            raise KirError(reasons)
        values = self.bind(program, params)
        out = program.clone()
        self.rewrite(out, **values)
        return out

    def explanation(self) -> str:
        """What `kir tactics explain` prints: the summary, the explanation, the parameters with
        their domains and defaults, the examples."""
        params = [
            f"  {p.name}: {p.domain.describe()}; default {p.default if p.default is not None else '(none)'}. {p.doc}"
            for p in self.params
        ]
        parts = [
            f"{self.name} ({self.numerics}): {self.summary}",
            self.explain.strip(),
            "Parameters:\n" + ("\n".join(params) or "  none"),
        ]
        if self.examples:
            parts.append("Example:\n" + "\n".join(f"  {e}" for e in self.examples))
        return "\n\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "summary": self.summary,
            "numerics": self.numerics,
            "explain": self.explain,
            "params": [
                {"name": p.name, "domain": p.domain.describe(), "default": p.default, "doc": p.doc} for p in self.params
            ],
            "examples": list(self.examples),
        }


def not_applicable(tactic: str, why: str | None, span: Span | None, message: str, hint: str = "") -> Diagnostic:
    """A precondition's reason: rule `tactic.<name>.<why>` (or `tactic.not-applicable`)."""
    rule = f"tactic.{tactic}.{why}" if why else "tactic.not-applicable"
    return Diagnostic(rule, "error", span, f"tactic {tactic} does not apply: {message}", hint)


def _internal(tactic: str, err: Exception, program: Program) -> Diagnostic:
    return Diagnostic(
        "internal.error",
        "error",
        program.span(),
        f"internal error in tactic {tactic}: {type(err).__name__}: {err}",
        "this is a bug in the tactic; please report it with the input",
    )
