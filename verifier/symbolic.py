"""KIR index arithmetic as z3 terms, for proofs over every program id, loop iteration and lane.

A scalar is one z3 term; a tile is a term over one *lane* variable per dimension (lane i of an
`arange(0, BN)` is `i`), so broadcasting is substitution of lanes. Shape symbols are variables
constrained by `where` and by being at least 1; program ids range over the grid; a loop
variable over its bounds; `role_rank()` over its role's units. Parameters are constants (the
instance being checked). What cannot be expressed (data loaded from memory, float
computations, most bit operations) becomes a fresh unconstrained variable and marks the term
*tainted* (`Term.why` names the value), so a rule can tell "provably wrong" from "not
provable". Integer values carried by a loop are fresh variables too, but with what induction
proves of them: an induction variable (`off = off + BK`) is exact and untainted, a value that
appends a digit every trip (`k = 2 * k + bit`, a tree descent) has its range trip by trip, others
keep the bounds that every iteration preserves (see `Symbolic._carried`).

Integer semantics are KIR's: `/` truncates toward zero and `%` takes the sign of the dividend
(C), `>>` is an arithmetic shift (floor division by a power of two), `x & (2^n - 1)` is x mod
2^n, and `x ^ y` or `x | y` with 0 <= y < 2^n evident (a constant, a value mod 2^n) keeps x's
bits above the n low ones and leaves those unknown (a bank swizzle stays in its row). Integers
do not wrap here: an index that overflows i32 is out of bounds anyway.

A query (`counterexample`) asserts only the facts that share a variable with the claim (the
closure over shared variables), so that the text of a query does not depend on which other
accesses were looked at before it. Results are cached by a hash of that text with lane and
unknown variables renamed canonically, in memory and on disk (`KIR_CACHE_DIR`, default
`~/.cache/kir`; `KIR_Z3_CACHE=0` turns the cache off), since agents re-check near-identical
programs many times.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass
from math import gcd
from pathlib import Path
from typing import cast

import z3
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from z3 import z3core as zc

from kir import symexpr as sx
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import ScalarType, TileType, shape_of
from kir.dtypes import DTYPES

SOLVER_TIMEOUT_MS = 2000
MAX_CACHE_ENTRIES = 200_000


@dataclass(frozen=True)
class Term:
    """A z3 term for a value at some lanes. `tainted` when part of it is unknown to the
    verifier; `why` then says which value (`rows` (loaded from memory)), for the message."""

    expr: z3.ExprRef
    tainted: bool
    why: str = ""


# ---- the proof cache ------------------------------------------------------------------------------


class ProofCache:
    """Query results keyed by a hash of the canonical query text: None when the claim holds,
    else the counterexample (with canonical variable names). Memory first, then a JSON file.
    The environment (`KIR_Z3_CACHE`, `KIR_CACHE_DIR`) is read when the cache is first used and
    again after `reset()`.

    A query the solver gave up on (its timeout) is kept too, in memory only: asked again in this
    process it would give up again, after the same timeout, on every check of the same
    candidate; on disk it would stay undecided for ever, though another run (a quieter
    machine) might decide it."""

    def __init__(self) -> None:
        # an answer is a counterexample (a dict) or None, or a list of findings (the sync model's)
        self.memory: dict[str, dict | list | None] = {}
        self.undecided: dict[str, dict | list] = {}
        self._flushing = threading.Lock()  # one writer a process (threads of an executor share the cache)
        self._configured = False
        self.enabled = True
        self.path: Path | None = None
        self._dirty = False
        self.hits = 0
        self.misses = 0

    def _configure(self) -> None:
        if self._configured:
            return
        self._configured = True
        self.enabled = os.environ.get("KIR_Z3_CACHE", "1") != "0"
        self.path = None
        if self.enabled:
            root = os.environ.get("KIR_CACHE_DIR")
            base = Path(root) if root else Path.home() / ".cache" / "kir"
            self.path = base / "z3-proofs.json"
            self.memory.update(self._read_disk())

    def _read_disk(self) -> dict:
        if self.path is None or not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        # an entry of another shape (a file edited or written by something else) is not an answer
        return {k: v for k, v in data.items() if v is None or (isinstance(v, dict) and "unknown" not in v)}

    def reset(self) -> None:
        """Forget everything in memory and read the environment again (tests, benchmarks)."""
        self.memory = {}
        self.undecided = {}
        self._configured = False
        self._dirty = False
        self.hits = self.misses = 0

    def get(self, key: str) -> tuple[bool, dict | list | None]:
        self._configure()
        if not self.enabled:
            return False, None
        if key in self.memory:
            self.hits += 1
            return True, self.memory[key]
        if key in self.undecided:
            self.hits += 1
            return True, self.undecided[key]
        self.misses += 1
        return False, None

    def put(self, key: str, value: dict | list | None) -> None:
        self._configure()
        if not self.enabled:
            return
        if value is not None and "unknown" in value:
            self.undecided[key] = value
            return
        self.memory[key] = value
        self._dirty = True

    def flush(self) -> None:
        """Write new results to disk, merged with what other processes wrote meanwhile."""
        if not self._dirty or self.path is None:
            return
        with self._flushing:
            self._flush(self.path)

    def _flush(self, path: Path) -> None:
        try:
            merged = {**self._read_disk(), **self.memory}
            if len(merged) > MAX_CACHE_ENTRIES:  # keep the newest (dicts keep insertion order)
                merged = dict(list(merged.items())[-MAX_CACHE_ENTRIES:])
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(merged))
            tmp.replace(path)
            self._dirty = False
        except OSError:
            pass


CACHE = ProofCache()


class _TermFacts:
    """The variables and the text of z3 terms, kept from one `Symbolic` to the next. z3 shares
    structurally equal terms, so checking a program again (an agent re-checking a candidate, a
    warm `kir check`) builds the very terms it built before and finds their text here instead
    of printing them again, which was most of a warm verification's time. Every entry keeps its
    term alive, so that the term's id, and its subterms', name no other term meanwhile; the
    memo is emptied, between two verifications, once it holds `LIMIT` terms. (Terms of the
    default z3 context only: `Symbolic` makes no other.)"""

    LIMIT = 200_000

    def __init__(self) -> None:
        self.variables: dict[int, tuple[z3.ExprRef, frozenset[str]]] = {}
        self.variable_ids: dict[int, frozenset[str]] = {}  # subterms of the terms kept above
        self.sexpr: dict[int, tuple[z3.ExprRef, str]] = {}
        # terms made from terms by a pure function (C division, a range claim...), by the
        # function's name and its arguments' ids: (the arguments, kept alive; the result)
        self.made: dict[tuple, tuple[tuple, object]] = {}

    def trim(self) -> None:
        if len(self.variables) + len(self.sexpr) + len(self.made) > self.LIMIT:
            # all at once: the subterm ids are valid only while the terms above are kept
            self.variables.clear()
            self.variable_ids.clear()
            self.sexpr.clear()
            self.made.clear()

    def make(self, name: str, build, *args):
        """`build(*args)` for z3 terms `args` (and ints), made once per process."""
        key = (name, *(a.get_id() if isinstance(a, z3.AstRef) else a for a in args))
        hit = self.made.get(key)
        if hit is None:
            hit = self.made[key] = (args, build(*args))
        return hit[1]


_TERMS = _TermFacts()


def made_once(name: str, build, *args):
    """`build(*args)`, a z3 term made from z3 terms (and plain values) by a pure function
    called `name`, made once per process: a rule that builds the same claim for every access,
    or for a program checked again, gets the term it made before (see `_TermFacts`)."""
    return _TERMS.make(name, build, *args)


# ---- C integer semantics ----------------------------------------------------------------------------


def c_div(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """Integer division truncating toward zero (z3's own is Euclidean)."""
    return _TERMS.make("c_div", _c_div, _int(a), _int(b))


def _c_div(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    if z3.is_int_value(b):
        d = b.as_long()
        if z3.is_int_value(a) and d != 0:
            return z3.IntVal(sx.c_div(a.as_long(), d))
        if d > 0:
            return z3.If(a >= 0, a / d, -((-a) / d))
        if d < 0:
            return z3.If(a >= 0, -(a / -d), (-a) / -d)
    return z3.If(
        a >= 0,
        z3.If(b > 0, a / b, -(a / -b)),
        z3.If(b > 0, -((-a) / b), (-a) / (-b)),
    )


def c_rem(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """The remainder with the sign of the dividend (C's `%`)."""
    return _TERMS.make("c_rem", _c_rem, _int(a), _int(b))


def _c_rem(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    if z3.is_int_value(b) and z3.is_int_value(a) and b.as_long() != 0:
        return z3.IntVal(sx.c_rem(a.as_long(), b.as_long()))
    if z3.is_int_value(b) and b.as_long() != 0:
        d = abs(b.as_long())
        return z3.If(a >= 0, a % d, -((-a) % d))
    return a - b * c_div(a, b)


def _lane(name: str, extent: z3.ArithRef) -> tuple[z3.ArithRef, z3.BoolRef, z3.BoolRef]:
    lane = z3.Int(name)
    return lane, lane >= 0, lane < extent


def _int(x) -> z3.ArithRef:
    return z3.IntVal(x) if isinstance(x, int) else x


ZERO = z3.IntVal(0)


# ---- the evaluator ---------------------------------------------------------------------------------


class Symbolic:
    """Terms for the values of one kernel (with its parameters bound) and proofs about them."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.kernel = ctx.kernel
        self.facts: list[z3.BoolRef] = []
        self._fact_vars: list[frozenset[str]] = []
        self._facts_of: dict[str, list[int]] = {}  # owner variable -> its facts
        self._facts_mentioning: dict[str, list[int]] = {}  # variable -> the facts that mention it
        self._free_facts: list[int] = []  # facts without variables (a `where` on parameters)
        self._free_checked = -1  # how many of them `_free_facts_hold` has looked at
        self._free_true = True
        self.names: dict[str, z3.ArithRef] = {}
        self.loop_vars: dict[SSAValue, z3.ArithRef] = {}
        self.loop_names: set[str] = set()  # the names of the variables in `loop_vars`
        self._loop_taint: dict[SSAValue, str] = {}
        self._lanes: dict[tuple, tuple[z3.ArithRef, ...]] = {}
        self._lane_extents: dict[str, int | None] = {}  # lane variable -> its static extent
        self._lane_ranges: dict[str, str] = {}  # lane variable -> the extent it ranges over
        self._affine: dict[int, tuple[z3.ExprRef, _Affine | None]] = {}
        self._affine_ids: dict[int, _Affine | None] = {}  # subterms of the expressions kept above
        self.unknowns = 0
        self.memo: dict[tuple, Term] = {}
        self._carried_keys: set[tuple] = set()  # memo entries of carried values (kept by `_carried`)
        self._sym_memo: dict[sx.SymExpr, z3.ArithRef] = {}
        # what depends on a term alone (its variables, its text) is kept for the process: see
        # `_TERMS`
        _TERMS.trim()
        self._vars_memo = _TERMS.variables
        self._vars_ids = _TERMS.variable_ids
        self._sexpr_memo = _TERMS.sexpr
        self._queries: dict[str, dict | None] = {}
        # (claim, assumptions, evaluated terms, facts) by their ids -> the answer and the terms
        # (the facts are kept alive by `self.facts`)
        self._asked: dict[tuple, tuple[dict | None, tuple]] = {}
        self.solver_calls = 0
        for name in self.kernel.shape_symbols:
            self.sym_var(name)
        self._where: list[z3.BoolRef] = []
        self._congruences: dict[str, tuple[int, int]] = {}
        self._congruence_memo: dict[int, tuple[z3.ExprRef, tuple[int, int]]] = {}
        self._paths: dict[Block | None, Term] = {}
        for w in self.kernel.where.data:
            fact = self.bool_sym(w.data)
            self._where.append(fact)
            self.fact(fact)
            self._learn_congruence(w.data)
        self.pids: list[z3.ArithRef] = []
        for i, g in enumerate(self.kernel.grid.data):
            p = z3.Int(f"program_id({i})")
            self.names[f"program_id({i})"] = p
            self.pids.append(p)
            self.fact(p >= 0, p)
            self.fact(p < self.sym(g.data), p)

    # ---- facts ----------------------------------------------------------------------------------

    def fact(self, f: z3.BoolRef, owner: z3.ExprRef | None = None) -> None:
        """Assume `f` in every query that involves its owner (a variable: the lane, loop
        variable, program id... that `f` gives the range of), or, without an owner, any of its
        variables. A query takes the facts of its variables, then those of the variables these
        facts mention, and so on: the range of `k` brings in `K`'s facts, but asking about `K`
        does not assume that a loop over `k` runs."""
        index = len(self.facts)
        self.facts.append(f)
        fv = self.variables(f)
        self._fact_vars.append(fv)
        owners = (owner.decl().name(),) if owner is not None else fv
        if not owners:
            self._free_facts.append(index)
        for name in owners:
            self._facts_of.setdefault(name, []).append(index)
        for name in fv:
            self._facts_mentioning.setdefault(name, []).append(index)

    def facts_mentioning(self, names) -> list[z3.BoolRef]:
        """The facts that mention any of `names`, in the order they were assumed (an index by
        variable: a long program has many facts, and a rule may ask this once per access)."""
        chosen: set[int] = set()
        for name in names:
            chosen.update(self._facts_mentioning.get(name, ()))
        return [self.facts[i] for i in sorted(chosen)]

    def variables(self, e: z3.ExprRef) -> frozenset[str]:
        """Names of the uninterpreted constants in `e`, memoized over shared subterms. Walks
        the AST through z3's C API: the Python wrappers cost several times more."""
        key = e.get_id()
        hit = self._vars_memo.get(key)
        if hit is None:
            out = _ast_variables(e.ctx.ref(), e.as_ast(), self._vars_ids)
            hit = self._vars_memo[key] = (e, out)  # keeping `e` keeps its subterms' ids valid
        return hit[1]

    def shape_facts(self) -> list[z3.BoolRef]:
        """What is known of the shape symbols alone: each is at least 1, and the `where`s."""
        return [self.names[n] >= 1 for n in self.kernel.shape_symbols] + list(self._where)

    # ---- congruences -----------------------------------------------------------------------------

    def _learn_congruence(self, w: sx.SymExpr) -> None:
        """`where X % c == r` (X a shape symbol): X is r modulo c."""
        if not (isinstance(w, sx.Bin) and w.op == "==" and isinstance(w.lhs, sx.Bin) and w.lhs.op == "%"):
            return
        x = w.lhs.lhs
        if not isinstance(x, sx.Sym) or x.name in self.ctx.params:
            return
        c, r = self.ctx.static(w.lhs.rhs), self.ctx.static(w.rhs)
        if c is None or r is None or c <= 0:
            return
        old = self._congruences.get(x.name, (0, 1))
        self._congruences[x.name] = _meet(old, (r % c, c))

    def congruence(self, e: z3.ExprRef) -> tuple[int, int]:
        """(r, m) such that `e` is r modulo m for every admissible assignment: m == 0 means `e`
        is exactly r, m == 1 that nothing is known. Shape symbols take what `where X % c == 0`
        says, loop variables `lo` modulo their step; products of unknowns are handled
        (`program_id(0) * N` with `N % 8 == 0` is 0 modulo 8), which z3 finds hard."""
        # A variable's congruence is known when the variable is made (a shape symbol's from the
        # `where`, a loop variable's with it), so a term's does not change: it is kept.
        key = e.get_id()
        hit = self._congruence_memo.get(key)
        if hit is None:
            # ... and depends only on its variables' congruences: the same term in another
            # program with the same `where` (a program checked again) has the same congruence
            known = tuple(sorted((n, self._congruences[n]) for n in self.variables(e) if n in self._congruences))
            found = _TERMS.make("congruence", lambda e, _: self._congruence(e), e, known)
            hit = self._congruence_memo[key] = (e, found)  # `e` keeps its id valid
        return hit[1]

    def _congruence(self, e: z3.ExprRef) -> tuple[int, int]:
        if z3.is_int_value(e):
            return e.as_long(), 0
        if z3.is_const(e):
            return self._congruences.get(e.decl().name(), (0, 1))
        kind = e.decl().kind()
        kids = [self.congruence(c) for c in e.children()] if kind in _CONGRUENCE_OPS else []
        if kind == z3.Z3_OP_ADD:
            r, m = 0, 0
            for r2, m2 in kids:
                r, m = r + r2, gcd(m, m2)
        elif kind == z3.Z3_OP_SUB:
            r, m = kids[0]
            for r2, m2 in kids[1:]:
                r, m = r - r2, gcd(m, m2)
        elif kind == z3.Z3_OP_UMINUS:
            r, m = -kids[0][0], kids[0][1]
        elif kind == z3.Z3_OP_MUL:
            r, m = 1, 0
            for r2, m2 in kids:
                r, m = r * r2, gcd(gcd(r * m2, r2 * m), m * m2)
        elif kind == z3.Z3_OP_ITE:
            (r, m1), (r2, m2) = kids[1], kids[2]
            m = gcd(gcd(m1, m2), r - r2)
        else:
            return 0, 1
        return (r % m, m) if m else (r, 0)

    # ---- symbolic sizes ---------------------------------------------------------------------------

    def sym_var(self, name: str) -> z3.ArithRef:
        """The variable of a shape symbol (created with its fact `>= 1` when first met)."""
        if name not in self.names:
            v = z3.Int(name)
            self.names[name] = v
            self.fact(v >= 1, v)
        return self.names[name]

    def sym(self, e: sx.SymExpr) -> z3.ArithRef:
        hit = self._sym_memo.get(e)
        if hit is not None:
            return hit
        if isinstance(e, sx.Int):
            out = z3.IntVal(e.value)
        elif isinstance(e, sx.Sym):
            out = z3.IntVal(self.ctx.params[e.name]) if e.name in self.ctx.params else self.sym_var(e.name)
        else:
            assert isinstance(e, sx.Bin)
            out = _arith(e.op, self.sym(e.lhs), self.sym(e.rhs))
        self._sym_memo[e] = out
        return out

    def bool_sym(self, e: sx.SymExpr) -> z3.BoolRef:
        if isinstance(e, sx.Bin) and e.op in sx.COMPARISONS:
            a, b = self.sym(e.lhs), self.sym(e.rhs)
            return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[e.op]
        return self.sym(e) != 0

    # ---- SSA values -------------------------------------------------------------------------------

    def fresh(self, hint: str, boolean: bool = False, dtype: str | None = None) -> z3.ExprRef:
        """An unknown value (its name starts with `?`, so counterexamples leave it out)."""
        self.unknowns += 1
        name = f"?{hint}#{self.unknowns}"
        if boolean:
            return z3.Bool(name)
        v = z3.Int(name)
        if dtype is not None and DTYPES[dtype].kind == "uint":
            self.fact(v >= 0, v)
        return v

    def lanes(self, shape: tuple[sx.SymExpr, ...], tag: str) -> tuple[z3.ArithRef, ...]:
        """One lane variable per dimension, `0 <= lane < extent`; the same tag gives the same
        variables (so a rule may ask twice)."""
        key = (tuple(shape), tag)
        if key not in self._lanes:
            out = []
            for i, d in enumerate(shape):
                # A lane's name stands for its range: a tag asked again with another extent in
                # this dimension gets lanes of their own (sharing one would put the narrower
                # range's facts on the wider access, and hide its failures).
                name = f"lane{i}@{tag}"
                while self._lane_ranges.setdefault(name, str(d)) != str(d):
                    name += "'"
                lane, low, high = _TERMS.make("lane", _lane, name, self.sym(d))
                out.append(lane)
                self._lane_extents[lane.decl().name()] = self.ctx.static(d)
                self.fact(low, lane)
                self.fact(high, lane)
            self._lanes[key] = tuple(out)
        return self._lanes[key]

    def interval(self, e: z3.ExprRef) -> tuple[int, int] | None:
        """Bounds [lo, hi] that integer term `e` keeps for every assignment, from its constants
        and lanes (`0 <= lane < extent`, a static extent) through + - * and division or
        remainder by a constant; None when it depends on anything else (a program id, a loop
        variable, a shape symbol, an unknown). No solver runs: rules use it to pass over
        claims and pairs that cannot fail without asking z3 about each one."""
        if not self.variables(e) <= self._lane_extents.keys():
            return None  # (the variables are known already, and this is the common answer)
        form = self.affine(e)
        return form[1] if form is not None and not form[0] else None

    def affine(self, e: z3.ExprRef) -> tuple[dict[str, int], tuple[int, int]] | None:
        """`e` as sum(c * v) + r: integer coefficients of its variables other than lanes (program
        ids, loop variables, shape symbols...) and the bounds of the rest r, made of constants
        and lanes (see `interval`); None when `e` is not of that form (a product of two
        variables, a division of a variable, an unknown...)."""
        key = e.get_id()
        hit = self._affine.get(key)
        if hit is None:
            form = _ast_affine(e.ctx.ref(), e.as_ast(), self._lane_extents, self._affine_ids)
            hit = self._affine[key] = (e, form)  # keeping `e` keeps its subterms' ids valid
        return hit[1]

    def value(self, v: SSAValue, lanes: tuple = ()) -> Term:
        """The term of `v` at the given lanes (one per dimension of `v`)."""
        key = (id(v), tuple(x.get_id() for x in lanes))
        hit = self.memo.get(key)
        if hit is None:
            if _is_carried_int(v):
                loop = cast(st.ForOp, cast(BlockArgument, v).block.parent_op())  # a loop's carried value
                self._carried(loop, shape_of(v.type), tuple(lanes))
                return self.memo[key]
            # the ids stay valid: values live as long as the program, lanes in `_lanes`
            hit = self.memo[key] = self._value(v, tuple(lanes))
        return hit

    # ---- values carried by loops --------------------------------------------------------------

    def _carried(self, loop: st.ForOp, shape: tuple, lanes: tuple) -> None:
        """Terms for the integer values a loop carries (those of one shape, at some lanes): a
        fresh variable each, with what can be proved of it by induction over the iterations.

        - An *induction variable* (`off = off + BK`, the step the same in every iteration) is
          exactly `init + i * step` at iteration i: its term is untainted.
        - Otherwise the candidate bounds `c >= 0`, `c >= init`, `c <= init` and `c <= init'`
          (another carried value's initial value) that hold initially and are preserved by
          every iteration (assuming all the surviving ones, Houdini-style) become facts; the
          term stays tainted, but an index built from it may still be proved in bounds
          (the binary search of examples/bucketize.kir keeps `lo, hi >= 0`)."""
        args = [a for a in loop.body.block.args[1:] if _is_carried_int(a) and tuple(shape_of(a.type)) == tuple(shape)]
        lane_ids = tuple(x.get_id() for x in lanes)
        last = loop.body.block.last_op
        if not isinstance(last, st.YieldOp) or len(last.values) != len(loop.inits):  # malformed: op.verify says so
            for a in args:
                self.memo[(id(a), lane_ids)] = self._unknown(a, "carried by the loop", False)
            return
        yields = last.values
        k = self.value(loop.body.block.args[0]).expr
        before = set(self.memo)
        carried: dict[BlockArgument, z3.ArithRef] = {}
        for a in args:
            c = self.fresh(a.name_hint or "carried", False, _dtype(a))
            carried[a] = c
            self.memo[(id(a), lane_ids)] = Term(c, True, _describe(a, "carried by the loop"))
            self._carried_keys.add((id(a), lane_ids))
        inits = {a: self.at(loop.inits[a.index - 1], lanes) for a in args}
        nexts = {a: self.at(yields[a.index - 1], lanes) for a in args}
        exact: set[BlockArgument] = set()
        lo, step = self.value(loop.lower).expr, self.value(loop.step).expr
        for a, c in carried.items():
            delta = z3.simplify(nexts[a].expr - c)
            unknown = [n for n in self.variables(delta) if n.startswith("?") or n == str(k)]
            if unknown or inits[a].tainted:
                continue  # not the same known step in every iteration
            self.fact(c == inits[a].expr + ((k - lo) / step) * delta, c)
            exact.add(a)
        trips = _static_trips(self, loop, lo, step)
        for a, c in carried.items():
            if a not in exact:
                digits = self._appended_digits(c, inits[a], nexts[a], k, lo, trips)
                if digits is not None:
                    self.fact(digits, c)
        candidates: list[tuple[BlockArgument, z3.BoolRef, z3.BoolRef, z3.BoolRef]] = []
        for a, c in carried.items():
            if a in exact:
                continue
            bounds = [(c >= 0, nexts[a].expr >= 0, inits[a].expr >= 0)]
            bounds.append((c >= inits[a].expr, nexts[a].expr >= inits[a].expr, z3.BoolVal(True)))
            bounds.append((c <= inits[a].expr, nexts[a].expr <= inits[a].expr, z3.BoolVal(True)))
            for b in args:
                if b is not a:
                    bounds.append((c <= inits[b].expr, nexts[a].expr <= inits[b].expr, inits[a].expr <= inits[b].expr))
            candidates += [(a, now, after, initially) for now, after, initially in bounds]
        candidates = [cand for cand in candidates if self.counterexample(cand[3]) is None]
        while candidates:
            assumed = [now for _, now, _, _ in candidates]
            kept = [cand for cand in candidates if self.counterexample(cand[2], assumed) is None]
            if len(kept) == len(candidates):
                break
            candidates = kept
        for a, now, _, _ in candidates:
            self.fact(now, carried[a])
        # Forget what was evaluated on the way (it saw the carried values before their facts).
        for key in [key for key in self.memo if key not in before and key not in self._carried_keys]:
            del self.memo[key]
        for a in exact:
            self.memo[(id(a), lane_ids)] = Term(carried[a], False)

    def _appended_digits(
        self, c: z3.ArithRef, init: Term, nxt: Term, k: z3.ArithRef, lo: z3.ArithRef, trips: int | None
    ) -> z3.BoolRef | None:
        """The range of a value that appends a base-m digit every trip, `c = m * c + d` with a
        constant m >= 2 and 0 <= d < m provable, from a constant start c0, over a loop of at most
        MAX_DIGIT_TRIPS trips of step 1: at trip t, m^t * c0 <= c <= m^t * (c0 + 1) - 1 (a tree
        descent's node index, `k = 2 * k + (t[k] < v)`, stays below 2^(levels)). The bound is
        exponential in t, which no linear invariant states, so it is given trip by trip."""
        c0 = z3.simplify(init.expr) if not init.tainted else None
        if trips is None or trips > MAX_DIGIT_TRIPS or c0 is None or not z3.is_int_value(c0):
            return None
        start = c0.as_long()
        for m in (2, 4, 8, 16):
            digit = z3.simplify(nxt.expr - m * c)
            if c.decl().name() in self.variables(digit):
                continue
            if self.counterexample(z3.And(digit >= 0, digit <= m - 1)) is not None:
                continue
            t = z3.simplify(k - lo)
            return z3.And(
                *[z3.Implies(t == i, z3.And(c >= m**i * start, c <= m**i * (start + 1) - 1)) for i in range(trips)]
            )
        return None

    def at(self, v: SSAValue, lanes: tuple) -> Term:
        """`v` evaluated at the lanes of a (larger) shape it broadcasts to, numpy style: shapes
        align on the right and a dimension of extent 1 sits at lane 0."""
        vshape = shape_of(v.type)
        k = len(lanes) - len(vshape)
        mapped = []
        for i, d in enumerate(vshape):
            mapped.append(ZERO if self._extent(d) == 1 else lanes[k + i])
        return self.value(v, tuple(mapped))

    def operand(self, operand: SSAValue, result: SSAValue, lanes: tuple) -> Term:
        """`operand` at the lanes of `result` (see `at`)."""
        return self.at(operand, lanes)

    def _extent(self, d: sx.SymExpr) -> int | None:
        folded = sx.fold(d).as_int()
        return folded if folded is not None else self.ctx.static(d)

    def _value(self, v: SSAValue, lanes: tuple) -> Term:
        boolean = _is_bool(v)
        if isinstance(v, BlockArgument):
            return self._block_arg(v, boolean)
        op = v.owner
        assert isinstance(op, Operation)
        if isinstance(op, tl.ConstOp):
            n = op.number
            if boolean:
                return Term(z3.BoolVal(bool(n)), False)
            if isinstance(n, float):
                return self._unknown(v, "a float", boolean)
            return Term(z3.IntVal(int(n)), False)
        if isinstance(op, tl.SymValueOp):
            return Term(self.sym(sx.Sym(op.symbol.data)), False)
        if isinstance(op, tl.ProgramIdOp | tl.NumProgramsOp) and not 0 <= op.axis.data < len(self.pids):
            return self._unknown(v, "of an axis the grid does not have", boolean)  # `types.axis` reports it
        if isinstance(op, tl.ProgramIdOp):
            return Term(self.pids[op.axis.data], False)
        if isinstance(op, tl.NumProgramsOp):
            return Term(self.sym(self.kernel.grid.data[op.axis.data].data), False)
        if isinstance(op, st.RoleRankOp):
            return Term(self._rank(op), False)
        if isinstance(op, tl.ArangeOp):
            return Term(self.sym(op.start.data) + lanes[0], False)
        if isinstance(op, tl.ZerosOp):
            return Term(z3.BoolVal(False) if boolean else ZERO, False)
        if isinstance(op, tl.FullOp):
            return self.value(op.value)
        if isinstance(op, tl.BinaryOp | tl.CompareOp):
            if DTYPES[_dtype(op.lhs)].is_float:
                return self._unknown(v, "a float computation", boolean)
            a = self.at(op.lhs, lanes)
            b = self.at(op.rhs, lanes)
            fn = op.fn.data if isinstance(op, tl.BinaryOp) else op.predicate.data
            expr = _combine(fn, a.expr, b.expr, _is_bool(op.lhs))
            if expr is None:
                return self._unknown(v, f"a `{fn}` the verifier does not model", boolean)
            return _joined(expr, a, b)
        if isinstance(op, tl.UnaryOp):
            if DTYPES[_dtype(op.operand)].is_float:
                return self._unknown(v, "a float computation", boolean)
            a = self.at(op.operand, lanes)
            if op.fn.data == "neg" and not boolean:
                return Term(-a.expr, a.tainted, a.why)
            if op.fn.data == "not" and boolean:
                return Term(z3.Not(a.expr), a.tainted, a.why)
            if op.fn.data == "abs" and not boolean:
                return Term(z3.If(a.expr >= 0, a.expr, -a.expr), a.tainted, a.why)
            return self._unknown(v, f"`{op.fn.data}`", boolean)
        if isinstance(op, tl.WhereOp):
            c = self.at(op.cond, lanes)
            a = self.at(op.lhs, lanes)
            b = self.at(op.rhs, lanes)
            return _joined(z3.If(c.expr, a.expr, b.expr), c, a, b)
        if isinstance(op, tl.CastOp):
            src = DTYPES[_dtype(op.operand)]
            dst = DTYPES[_dtype(op.res)]
            if src.is_int and dst.is_int and src.kind != "bool" and dst.kind != "bool":
                return self.at(op.operand, lanes)
            if src.kind == "bool" and dst.is_int and dst.kind != "bool":
                a = self.at(op.operand, lanes)
                return Term(z3.If(a.expr, z3.IntVal(1), ZERO), a.tainted, a.why)
            return self._unknown(v, "a cast from float", boolean)
        if isinstance(op, tl.ExpandDimsOp):
            inner = tuple(lane for i, lane in enumerate(lanes) if i != op.axis.data)
            return self.value(op.operand, inner)
        if isinstance(op, tl.BroadcastOp):
            return self.at(op.operand, lanes)
        if isinstance(op, tl.TransOp):
            return self.value(op.operand, tuple(reversed(lanes)))
        if isinstance(op, tl.ArgReduceOp):
            # data-dependent, but always a position along the reduced axis
            extent = shape_of(op.operand.type)[op.axis.data]
            r = self.fresh("argreduce")
            self.fact(r >= 0, r)
            self.fact(r < self.sym(extent), r)
            return Term(r, False)
        if isinstance(op, tl.TopKOp) and len(op.results) > 1 and v is op.results[1]:
            extent = shape_of(op.operand.type)[-1]
            r = self.fresh("topk")
            self.fact(r >= 0, r)
            self.fact(r < self.sym(extent), r)
            return Term(r, False)
        if isinstance(op, tl.LoadOp) and op.mask is not None and not DTYPES[_dtype(v)].is_float:
            # lanes where the mask is false are not read and hold `other` (0 when absent): a
            # flag loaded under `t < L` is false past L, which proves what it guards there
            mask = self.at(op.mask, lanes)
            data = self._unknown(v, "loaded from memory", boolean)
            if op.other is not None:
                other = self.value(op.other)
                if boolean and not other.tainted and z3.is_int(other.expr):
                    other = Term(other.expr != 0, False)
            else:
                other = Term(z3.BoolVal(False) if boolean else ZERO, False)
            if mask.tainted or other.tainted or other.expr.sort() != data.expr.sort():
                return data
            return Term(z3.If(mask.expr, data.expr, other.expr), True, data.why)
        if isinstance(op, tl.LoadOp | tl.AtomicOp):
            return self._unknown(v, "loaded from memory", boolean)
        if isinstance(op, st.ForOp):
            return self._unknown(v, "the result of a loop", boolean)
        if isinstance(op, st.IfOp):
            return self._unknown(v, "chosen by an `if`", boolean)
        return self._unknown(v, f"computed by {op.name}", boolean)

    def _unknown(self, v: SSAValue, reason: str, boolean: bool) -> Term:
        dtype = _dtype(v) if isinstance(v.type, ScalarType | TileType) else None
        return Term(self.fresh(v.name_hint or "value", boolean, dtype), True, _describe(v, reason))

    def _block_arg(self, v: BlockArgument, boolean: bool) -> Term:
        owner = v.block.parent_op()
        if isinstance(owner, st.ForOp) and v.index == 0:
            if v not in self.loop_vars:
                name = v.name_hint or "k"
                if name in self.names:
                    name = f"{name}#{len(self.loop_vars)}"
                k = z3.Int(name)
                self.names[name] = k
                self.loop_vars[v] = k
                self.loop_names.add(name)
                lo = self.value(owner.lower)
                hi = self.value(owner.upper)
                step = self.value(owner.step)
                self.fact(k >= lo.expr, k)
                self.fact(k < hi.expr, k)
                if not (z3.is_int_value(step.expr) and step.expr.as_long() == 1):
                    self.fact(c_rem(k - lo.expr, step.expr) == 0, k)
                if z3.is_int_value(step.expr) and step.expr.as_long() > 0:
                    r, m = self.congruence(lo.expr)
                    self._congruences[name] = (r, gcd(m, step.expr.as_long()))
                bad = next((t for t in (lo, hi, step) if t.tainted), None)
                if bad is not None:
                    self._loop_taint[v] = bad.why
            if v in self._loop_taint:
                return Term(self.loop_vars[v], True, self._loop_taint[v])
            return Term(self.loop_vars[v], False)
        if isinstance(owner, st.KernelOp):
            return self._unknown(v, "a tensor", boolean)
        return self._unknown(v, "carried by the loop", boolean)

    def _rank(self, op: Operation) -> z3.ArithRef:
        role: Operation | None = op
        while role is not None and not isinstance(role, st.RoleOp):
            role = role.parent_op()
        name = f"role_rank({role.name_text})" if role is not None else "role_rank"
        if name not in self.names:
            r = z3.Int(name)
            self.names[name] = r
            units = len(role.id_list) if role is not None else 1
            self.fact(r >= 0, r)
            self.fact(r < units, r)
        return self.names[name]

    def path(self, op: Operation) -> Term:
        """The condition under which `op` runs: the conjunction of the enclosing `if`s (the
        negation for an `else` branch). The same for every op of a block: kept per block."""
        block = op.parent_block()
        hit = self._paths.get(block)
        if hit is None:
            hit = self._paths[block] = self._path(op)
        return hit

    def _path(self, op: Operation) -> Term:
        conds: list[z3.BoolRef] = []
        tainted, why = False, ""
        child: Operation = op
        parent = op.parent_op()
        while parent is not None and not isinstance(parent, st.KernelOp):
            if isinstance(parent, st.IfOp):
                c = self.value(parent.cond)
                in_then = child.parent_region() is parent.then_body
                conds.append(c.expr if in_then else z3.Not(c.expr))
                if c.tainted and not tainted:
                    tainted, why = True, c.why
            child, parent = parent, parent.parent_op()
        if not conds:
            return Term(z3.BoolVal(True), False)
        return Term(z3.And(*conds) if len(conds) > 1 else conds[0], tainted, why)

    # ---- proofs -----------------------------------------------------------------------------------

    def counterexample(
        self,
        claim: z3.BoolRef,
        assume: list[z3.BoolRef] | tuple = (),
        evaluate: dict[str, z3.ExprRef] | None = None,
    ) -> dict | None:
        """None when `claim` holds for every admissible assignment (under `assume`); else the
        values of the named variables that break it: shape symbols, program ids
        (`program_id(0)`), loop variables (by name), role ranks (`role_rank(mma)`) and lanes
        (`lane0@tag`), plus the value of each expression in `evaluate` under that assignment.
        `{"unknown": ...}` when the solver gives up."""
        extra = list((evaluate or {}).items())
        relevant = self._relevant([*assume, claim] + [e for _, e in extra])  # Not(c) has c's variables
        # The same terms under the same facts have the same answer: asked again in this
        # kernel (a long program's accesses repeat their claims), it is found by the terms' ids
        # before the query's text is made (the text, for the cache across programs, cost more
        # than the rest of the query).
        asked = (
            claim.get_id(),
            tuple(a.get_id() for a in assume),
            tuple((n, e.get_id()) for n, e in extra),
            tuple(id(f) for f in relevant),
        )
        hit = self._asked.get(asked)
        if hit is None:
            # the terms are kept with the answer: a freed term's id could be reused by another
            hit = self._asked[asked] = (self._counterexample(claim, assume, extra, relevant), (claim, assume, extra))
        return None if hit[0] is None else dict(hit[0])

    def _counterexample(self, claim, assume, extra, relevant) -> dict | None:
        parts = [*assume, z3.Not(claim)]
        key, rename = self._key(relevant, parts, extra)
        if key in self._queries:
            return _rename(self._queries[key], rename)
        hit, cached = CACHE.get(key)
        if hit:
            answer = cast(dict | None, cached)  # a query's key holds a counterexample or None
            self._queries[key] = answer
            return _rename(answer, rename)
        raw = self._solve(relevant, parts, extra)
        canonical = None if raw is None else {rename.get(k, k): v for k, v in raw.items()}
        CACHE.put(key, canonical)
        self._queries[key] = canonical
        return raw

    def holds(self, claim: z3.BoolRef, assume: list[z3.BoolRef] | tuple = ()) -> bool:
        return self.counterexample(claim, assume) is None

    def _relevant(self, parts: list[z3.ExprRef]) -> list[z3.BoolRef]:
        """The facts that bear on the query's variables (see `fact`): those of its variables,
        then those of the variables these facts mention, and so on."""
        todo: list[str] = []
        for p in parts:
            todo += self.variables(p)
        seen = set(todo)
        chosen = set(self._free_facts)
        while todo:
            name = todo.pop()
            for i in self._facts_of.get(name, ()):
                if i in chosen:
                    continue
                chosen.add(i)
                for other in self._fact_vars[i]:
                    if other not in seen:
                        seen.add(other)
                        todo.append(other)
        return [self.facts[i] for i in sorted(chosen)]

    def _sexpr(self, e: z3.ExprRef) -> str:
        key = e.get_id()
        hit = self._sexpr_memo.get(key)
        if hit is None:
            hit = self._sexpr_memo[key] = (e, e.sexpr())
        return hit[1]

    def _key(self, relevant, parts, extra) -> tuple[str, dict[str, str]]:
        """The cache key: the query's text with lane and unknown variables renamed in order of
        first appearance in the claim (so that the same access in another program, with other
        tags, gives the same key) and the facts sorted; and the renaming (raw -> canonical)."""
        rename: dict[str, str] = {}

        def canon(m: re.Match) -> str:
            name = m.group(1) or m.group(2)
            if name not in rename:
                lane = re.match(r"lane(\d+)@", name)
                rename[name] = f"lane{lane.group(1)}@{len(rename)}" if lane else f"?{len(rename)}"
            return f"|{rename[name]}|"

        head = [_RENAMED.sub(canon, self._sexpr(p)) for p in parts]
        head += [f"{n}: {_RENAMED.sub(canon, self._sexpr(e))}" for n, e in extra]
        facts = sorted({_RENAMED.sub(canon, t) for t in sorted(self._sexpr(f) for f in relevant)})
        text = "\n".join([*facts, "--", *head])
        return hashlib.sha256(text.encode()).hexdigest(), rename

    def _solve(self, relevant, parts, extra) -> dict | None:
        self.solver_calls += 1
        solver = z3.Solver()
        solver.set("timeout", SOLVER_TIMEOUT_MS)
        solver.add(*relevant, *parts)
        result = solver.check()
        if result == z3.unsat:
            return None
        if result != z3.sat:
            return {"unknown": f"the solver gave up ({solver.reason_unknown()})"}
        model = solver.model()
        out: dict = {}
        for d in model.decls():
            name = d.name()
            if name.startswith("?") or d.arity() != 0:
                continue
            val = model[d]
            out[name] = val.as_long() if z3.is_int_value(val) else str(val)
        for name, e in extra:
            val = model.eval(e, model_completion=True)
            out[name] = val.as_long() if z3.is_int_value(val) else str(val)
        return dict(sorted(out.items(), key=lambda kv: _order(kv[0])))

    def equal(self, a: SSAValue, b: SSAValue) -> bool:
        if not (isinstance(a.type, ScalarType) and isinstance(b.type, ScalarType)):
            return False
        # a tainted term is still one value at a time: the same computation over the same
        # unknown (a loop-carried counter, say) is provably the same value
        ta, tb = self.value(a), self.value(b)
        if ta.expr.eq(tb.expr):
            return True  # one term (two constants 3, say): `x == x` holds without a solver
        if z3.is_int_value(ta.expr) and z3.is_int_value(tb.expr) and self._free_facts_hold():
            return False  # two different constants, and no contradiction among the assumptions
        return self.counterexample(ta.expr == tb.expr) is None

    def _free_facts_hold(self) -> bool:
        """Whether the facts without variables (a `where` on parameters alone) are all true. A
        claim without variables is decided by them alone: if one were false, every claim would
        hold vacuously."""
        if self._free_checked != len(self._free_facts):
            self._free_true = all(z3.is_true(z3.simplify(self.facts[i])) for i in self._free_facts)
            self._free_checked = len(self._free_facts)
        return self._free_true


_NO_VARS: frozenset[str] = frozenset()


def _ast_variables(ctx, ast, memo: dict[int, frozenset[str]]) -> frozenset[str]:
    key = zc.Z3_get_ast_id(ctx, ast)
    hit = memo.get(key)
    if hit is not None:
        return hit
    out = _NO_VARS
    if zc.Z3_get_ast_kind(ctx, ast) == z3.Z3_APP_AST:
        app = zc.Z3_to_app(ctx, ast)
        n = zc.Z3_get_app_num_args(ctx, app)
        if n == 0:
            decl = zc.Z3_get_app_decl(ctx, app)
            if zc.Z3_get_decl_kind(ctx, decl) == z3.Z3_OP_UNINTERPRETED:
                out = frozenset((zc.Z3_get_symbol_string(ctx, zc.Z3_get_decl_name(ctx, decl)),))
        else:
            parts = [_ast_variables(ctx, zc.Z3_get_app_arg(ctx, app, i), memo) for i in range(n)]
            out = frozenset().union(*parts) if any(parts) else _NO_VARS
    memo[key] = out
    return out


_CONGRUENCE_OPS = (z3.Z3_OP_ADD, z3.Z3_OP_SUB, z3.Z3_OP_UMINUS, z3.Z3_OP_MUL, z3.Z3_OP_ITE)

_Affine = tuple[dict[str, int], tuple[int, int]]  # coefficients of variables, bounds of the rest
_LINEAR_OPS = (z3.Z3_OP_ADD, z3.Z3_OP_SUB, z3.Z3_OP_UMINUS, z3.Z3_OP_MUL)


def _ast_affine(ctx, ast, lane_extents: dict[str, int | None], memo: dict[int, _Affine | None]) -> _Affine | None:
    """`Symbolic.affine` over z3's C API (its Python wrappers cost several times more)."""
    key = zc.Z3_get_ast_id(ctx, ast)
    if key in memo:
        return memo[key]
    memo[key] = out = _affine_of(ctx, ast, lane_extents, memo)
    return out


def _affine_of(ctx, ast, lane_extents, memo) -> _Affine | None:
    if zc.Z3_get_sort_kind(ctx, zc.Z3_get_sort(ctx, ast)) != z3.Z3_INT_SORT:
        return None
    kind = zc.Z3_get_ast_kind(ctx, ast)
    if kind == z3.Z3_NUMERAL_AST:
        value = int(zc.Z3_get_numeral_string(ctx, ast))
        return {}, (value, value)
    if kind != z3.Z3_APP_AST:
        return None
    app = zc.Z3_to_app(ctx, ast)
    op = zc.Z3_get_decl_kind(ctx, zc.Z3_get_app_decl(ctx, app))
    n = zc.Z3_get_app_num_args(ctx, app)
    if n == 0:
        if op != z3.Z3_OP_UNINTERPRETED:
            return None
        name = zc.Z3_get_symbol_string(ctx, zc.Z3_get_decl_name(ctx, zc.Z3_get_app_decl(ctx, app)))
        if name.startswith("?"):
            return None  # an unknown value
        if name in lane_extents:
            extent = lane_extents[name]
            return ({}, (0, extent - 1)) if extent is not None and extent >= 1 else None
        return {name: 1}, (0, 0)

    def arg(i: int) -> _Affine | None:
        return _ast_affine(ctx, zc.Z3_get_app_arg(ctx, app, i), lane_extents, memo)

    if op == z3.Z3_OP_ITE:
        a, b = arg(1), arg(2)
        if a is None or b is None or a[0] or b[0]:
            return None
        return {}, (min(a[1][0], b[1][0]), max(a[1][1], b[1][1]))
    if op in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
        d = arg(1)
        if d is None or d[0] or d[1][0] != d[1][1] or d[1][0] == 0:
            return None  # not a constant divisor
        divisor = d[1][0]
        if op == z3.Z3_OP_MOD:  # z3's remainder is in [0, |d|)
            return {}, (0, abs(divisor) - 1)
        a = arg(0)
        if a is None or a[0] or divisor < 0:
            return None
        return {}, (a[1][0] // divisor, a[1][1] // divisor)  # z3's division by a positive d is the floor
    if op not in _LINEAR_OPS:
        return None
    found = [arg(i) for i in range(n)]
    kids = [k for k in found if k is not None]
    if len(kids) != len(found):
        return None
    if op == z3.Z3_OP_UMINUS:
        return _scaled(kids[0], -1)
    if op == z3.Z3_OP_MUL:
        # a product is affine when at most one factor is not a constant
        constant = 1
        other: _Affine | None = None
        for coeffs, (lo, hi) in kids:
            if not coeffs and lo == hi:
                constant *= lo
            elif other is None:
                other = (coeffs, (lo, hi))
            elif not coeffs and not other[0]:  # two ranges: the corners bound the product
                olo, ohi = other[1]
                corners = (lo * olo, lo * ohi, hi * olo, hi * ohi)
                other = ({}, (min(corners), max(corners)))
            else:
                return None
        return _scaled(other, constant) if other is not None else ({}, (constant, constant))
    coeffs, (lo, hi) = dict(kids[0][0]), kids[0][1]
    sign = 1 if op == z3.Z3_OP_ADD else -1
    for kid_coeffs, (klo, khi) in kids[1:]:
        for name, c in kid_coeffs.items():
            coeffs[name] = coeffs.get(name, 0) + sign * c
        lo, hi = (lo + klo, hi + khi) if sign == 1 else (lo - khi, hi - klo)
    return {n: c for n, c in coeffs.items() if c}, (lo, hi)


def _meet(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Both congruences at once, when one modulus divides the other (else keep the finer)."""
    (_, m1), (_, m2) = a, b
    if m1 and m2 and m2 % m1 == 0:
        return b
    if m1 and m2 and m1 % m2 == 0:
        return a
    return b if m2 > m1 else a


# Lane and unknown variables in z3's s-expressions, quoted (`|?rows#3|`) or not (`lane0@12m`).
_RENAMED = re.compile(r"\|(lane\d+@[^|]*|\?[^|]*)\||(?<![^\s()])(lane\d+@[^\s()|]*)")


def _rename(cex: dict | None, rename: dict[str, str]) -> dict | None:
    """A cached counterexample (canonical names) in the names of the current query."""
    if cex is None:
        return None
    back = {c: raw for raw, c in rename.items()}
    return {back.get(k, k): v for k, v in cex.items()}


def readable(cex: dict, grid_rank: int | None = None) -> dict:
    """A counterexample for people: shape symbols, `program_id` as a list, loop variables,
    `role_rank`, and `lane` as a list (lanes of one access)."""
    out: dict = {}
    pids: dict[int, int] = {}
    lanes: dict[int, int] = {}
    rest: dict = {}
    for name, v in cex.items():
        if m := re.fullmatch(r"program_id\((\d)\)", name):
            pids[int(m.group(1))] = v
        elif m := re.match(r"lane(\d+)@", name):
            lanes[int(m.group(1))] = v
        elif name.startswith("role_rank"):
            rest["role_rank"] = v
        else:
            out[name] = v
    if pids:
        n = max(max(pids) + 1, grid_rank or 0)
        out["program_id"] = [pids.get(i, 0) for i in range(n)]
    out.update(rest)
    if lanes:
        out["lane"] = [lanes.get(i, 0) for i in range(max(lanes) + 1)]
    return out


def format_counterexample(cex: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in cex.items())


def _describe(v: SSAValue, reason: str) -> str:
    return f"`{v.name_hint}` ({reason})" if v.name_hint else f"a value ({reason})"


def _scaled(form: tuple[dict[str, int], tuple[int, int]], c: int) -> tuple[dict[str, int], tuple[int, int]]:
    coeffs, (lo, hi) = form
    if c == 0:
        return {}, (0, 0)
    bounds = (lo * c, hi * c)
    return {n: k * c for n, k in coeffs.items()}, (min(bounds), max(bounds))


def _joined(expr: z3.ExprRef, *terms: Term) -> Term:
    bad = next((t for t in terms if t.tainted), None)
    return Term(expr, bad is not None, bad.why if bad is not None else "")


def _order(name: str) -> tuple:
    if name.startswith("program_id"):
        return (1, name)
    if name.startswith("lane"):
        return (4, name)
    if name.startswith("role_rank"):
        return (3, name)
    return (0 if name[:1].isupper() else 2, name)


def _arith(op: str, a, b):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return c_div(a, b)
    if op == "%":
        return c_rem(a, b)
    if op == "cdiv":
        return c_div(a + b - 1, b)
    if op == "min":
        return z3.If(a <= b, a, b)
    if op == "max":
        return z3.If(a >= b, a, b)
    if op in sx.COMPARISONS:
        cmp = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        return z3.If(cmp, z3.IntVal(1), ZERO)
    raise ValueError(op)


def _combine(fn: str, a, b, boolean: bool):
    if boolean:
        if fn in ("and", "or", "xor"):
            return {"and": z3.And, "or": z3.Or, "xor": z3.Xor}[fn](a, b)
        if fn in ("eq", "ne"):
            return a == b if fn == "eq" else a != b
        return None
    if fn == "add":
        return a + b
    if fn == "sub":
        return a - b
    if fn == "mul":
        return a * b
    if fn == "div":
        return c_div(a, b)
    if fn == "rem":
        return c_rem(a, b)
    if fn == "maximum":
        return z3.If(a >= b, a, b)
    if fn == "minimum":
        return z3.If(a <= b, a, b)
    if fn in ("lt", "le", "gt", "ge", "eq", "ne"):
        return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[fn]
    if fn == "shl" and z3.is_int_value(b) and 0 <= b.as_long() < 64:
        return a * (2 ** b.as_long())
    if fn == "shr" and z3.is_int_value(b) and 0 <= b.as_long() < 64:
        return a / (2 ** b.as_long())  # arithmetic shift: floor division (z3's `/` by a positive)
    if fn == "and":
        # x & (2^n - 1) is x mod 2^n in two's complement, also for negative x
        for mask, other in ((b, a), (a, b)):
            if z3.is_int_value(mask) and mask.as_long() > 0 and (mask.as_long() + 1) & mask.as_long() == 0:
                return other % (mask.as_long() + 1)
    if fn in ("xor", "or"):
        # x ^ y and x | y with 0 <= y < 2^n change only the low n bits of x (two's complement,
        # also for negative x): x - x mod 2^n plus an unknown value in [0, 2^n). Enough to keep
        # a swizzled index (`i ^ ((i >> 5) & 31)`) inside the 32-aligned rows of its table.
        for low, other in ((b, a), (a, b)):
            m = _low_bits(low)
            if m is not None:
                bits = z3.Function(f"kir_{fn}", z3.IntSort(), z3.IntSort(), z3.IntSort())
                return other - other % m + bits(other, low) % m
    return None


def _low_bits(v) -> int | None:
    """2^n such that 0 <= v < 2^n is evident from v's form (a constant, or a value mod a power of
    two); None when it is not."""
    if z3.is_int_value(v) and v.as_long() >= 0:
        return 1 << v.as_long().bit_length()
    if z3.is_mod(v) and z3.is_int_value(v.arg(1)):
        m = v.arg(1).as_long()
        if m > 0 and m & (m - 1) == 0:
            return m
    return None


MAX_DIGIT_TRIPS = 32  # loops short enough for `Symbolic._appended_digits`'s trip-by-trip bound


def _static_trips(sym: Symbolic, loop: st.ForOp, lo: z3.ArithRef, step: z3.ArithRef) -> int | None:
    """The trip count of a loop of step 1 whose bounds are constants (parameters bound), or None."""
    hi = z3.simplify(sym.value(loop.upper).expr)
    lo, step = z3.simplify(lo), z3.simplify(step)
    if not (z3.is_int_value(lo) and z3.is_int_value(hi) and z3.is_int_value(step)) or step.as_long() != 1:
        return None
    return max(0, hi.as_long() - lo.as_long())


def _is_carried_int(v: SSAValue) -> bool:
    if not isinstance(v, BlockArgument) or v.index == 0 or not isinstance(v.block.parent_op(), st.ForOp):
        return False
    t = v.type
    return isinstance(t, ScalarType | TileType) and DTYPES[t.dtype.data].kind in ("int", "uint")


def _dtype(v: SSAValue) -> str:
    return cast(ScalarType | TileType, v.type).dtype.data


def _is_bool(v: SSAValue) -> bool:
    return isinstance(v.type, ScalarType | TileType) and v.type.dtype.data == "i1"
