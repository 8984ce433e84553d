"""Random programs made with the builder API, for the round-trip property.

The builder can make IR that no parse would: unnamed values, literals built before their
partners, values used several times or not at all, names that are no KIR identifiers,
results and carried values in any order. The printer must still find text for it.
"""

from __future__ import annotations

from tests.property.kirgen import Draw

BUILDER_NAMES = ("x", "acc", "t", "_v0", "x_1", "é", "a-b", "sum", "tma", "w2", "load", "_", "i")


class BuilderGen:
    """Builds one program with `kir.builder.Builder`; ops that do not type-check are skipped
    (the builder raises `KirError` and adds nothing)."""

    def __init__(self, draw: Draw, max_ops: int = 40):
        self._draw = draw
        self.max_ops = max_ops
        self.pools: list[list] = []  # values visible in each open block, innermost last
        self.in_role = False

    def int(self, lo: int, hi: int) -> int:
        return self._draw(lo, hi)

    def pick(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def chance(self, percent: int) -> bool:
        return self.int(0, 99) >= 100 - percent

    def values(self, pred=lambda v: True) -> list:
        return [v for pool in self.pools for v in pool if pred(v)]

    def program(self):
        from kir.builder import Builder

        b = Builder(
            "built",
            params={"BM": 32, "BN": 64, "BK": 16, "S": 2},
            target=self.pick(("sm_90", "interp")),
            grid=[self.pick(("cdiv(M, BM)", "M / BM", 1))],
            warps=4,
            where=["M % BM == 0"] if self.chance(50) else [],
        )
        b.arg("x", "f32", ["M", "N"])
        b.arg("y", "bf16", ["M", "K"], out=True)
        b.arg("z", "i32", ["N"])
        b.begin()
        self.b = b
        self.pools = [[]]
        self.mem = {"x": b.value("x"), "y": b.value("y"), "z": b.value("z")}
        self.block(0, self.int(1, self.max_ops))
        if self.chance(30):
            self.role()
        return b.finish()

    def try_op(self, make) -> None:
        from kir.diagnostics import KirError

        try:
            v = make()
        except KirError:
            return
        for r in getattr(v, "results", None) or ([v] if v is not None and hasattr(v, "type") else []):
            self.pools[-1].append(r)
            if self.chance(35):
                self.name(r)

    def name(self, v) -> None:
        from kir.diagnostics import KirError

        try:
            self.b.assign(self.pick(BUILDER_NAMES), v)
        except KirError:
            pass

    def value(self, scalar: bool | None = None, dtype: str | None = None):
        from kir.dialect.types import ScalarType, TileType, dtype_of

        def ok(v):
            if not isinstance(v.type, ScalarType | TileType):
                return False
            if scalar is not None and isinstance(v.type, ScalarType) != scalar:
                return False
            return dtype is None or dtype_of(v.type) == dtype

        pool = self.values(ok)
        if pool and self.chance(75):
            return self.pick(pool)
        return self.fresh_value(scalar, dtype)

    def fresh_value(self, scalar, dtype):
        from kir.dialect import tile as tl
        from kir.dialect.types import tile_type

        b = self.b
        dtype = dtype or self.pick(("f32", "i32", "bf16", "i1", "i64"))
        if scalar is False or (scalar is None and self.chance(40)):
            shape = self.pick((["BM"], ["BN"], ["BM", "BN"], ["BM", 1]))
            return b.make(tl.ZerosOp, tile_type(dtype, shape)).res
        if self.chance(50):
            text = {
                "i1": self.pick((True, False)),
                "f32": self.pick((0.5, -2.0, float("inf"), -0.0, 1e-320, 3.0)),
                "bf16": self.pick((1.5, -1.0)),
                "i64": self.pick((-1, 2**40)),
                "i32": self.pick((0, -7, 5)),
            }[dtype]
            return b.const(text, dtype)
        if dtype == "i32":
            return self.pick((lambda: b.program_id(self.int(0, 2)), lambda: b.value(self.pick(("BM", "M", "N")))))()
        return b.make(tl.CastOp, b.program_id(0), dtype).res

    def block(self, depth: int, n: int) -> None:
        for _ in range(n):
            self.op(depth)

    def op(self, depth: int) -> None:
        from kir.dialect import tile as tl
        from kir.dialect.types import Access

        b = self.b
        kind = self.pick(
            (
                "binary",
                "binary",
                "compare",
                "unary",
                "where",
                "cast",
                "reduce",
                "const",
                "load",
                "store",
                "name",
                "for",
                "if",
                "expand",
                "dot",
                "full",
                "sym",
                "arange",
                "topk",
                "scan",
            )
        )
        if kind == "binary":
            fn = self.pick(("add", "sub", "mul", "div", "rem", "and", "or", "xor", "shl", "maximum", "pow"))
            first_const = self.chance(30)
            # a literal built before its partner: the parser would build it after
            rhs = self.value(scalar=True) if first_const else None
            lhs = self.value()
            self.try_op(lambda: b.binary(fn, lhs, rhs if rhs is not None else self.value(dtype=_dtype(lhs))))
        elif kind == "compare":
            lhs = self.value()
            self.try_op(lambda: b.compare(self.pick(tl.CMP_PREDICATES), lhs, self.value(dtype=_dtype(lhs))))
        elif kind == "unary":
            self.try_op(lambda: b.unary(self.pick(("neg", "not", "exp", "abs", "sqrt")), self.value()))
        elif kind == "where":
            c = self.value(dtype="i1")
            x = self.value()
            self.try_op(lambda: b.make(tl.WhereOp, c, x, self.value(dtype=_dtype(x))))
        elif kind == "cast":
            self.try_op(lambda: b.make(tl.CastOp, self.value(), self.pick(("f32", "bf16", "i32", "i1"))))
        elif kind == "reduce":
            self.try_op(lambda: b.make(tl.ReduceOp, self.pick(tl.REDUCE_FNS), self.value(scalar=False), self.int(0, 1)))
        elif kind == "scan":
            self.try_op(lambda: b.make(tl.ScanOp, "cumsum", self.value(scalar=False), 0, self.chance(50)))
        elif kind == "topk":
            self.try_op(lambda: b.make(tl.TopKOp, self.value(scalar=False), 2, self.chance(50)))
        elif kind == "expand":
            self.try_op(lambda: b.make(tl.ExpandDimsOp, self.value(), self.int(0, 1)))
        elif kind == "dot":
            self.try_op(lambda: b.make(tl.DotOp, self.value(scalar=False), self.value(scalar=False), "f32"))
        elif kind == "full":
            from kir.dialect.types import tile_type

            v = self.value(scalar=True)
            self.try_op(lambda: b.make(tl.FullOp, tile_type(_dtype(v), ["BN"]), v))
        elif kind == "const":
            self.try_op(lambda: self.fresh_value(True, None))
        elif kind == "sym":
            self.try_op(lambda: b.value(self.pick(("BM", "BN", "M", "N", "K", "S"))))
        elif kind == "arange":
            self.try_op(lambda: b.arange(0, self.pick(("BM", "BN"))))
        elif kind == "load":
            mem = self.pick(("x", "z"))
            if mem == "x":
                idx = [self.value(scalar=True, dtype="i32"), self.value(scalar=True, dtype="i32")]
                access = Access((sx_sym("BM"), None)) if self.chance(50) else None
                mask = self.value(dtype="i1") if self.chance(30) else None
                self.try_op(lambda: b.load(self.mem["x"], idx, access, mask=mask))
            else:
                self.try_op(lambda: b.load(self.mem["z"], [self.value(dtype="i32")]))
        elif kind == "store":
            v = self.value(dtype="bf16")
            idx = [self.value(scalar=True, dtype="i32"), self.value(scalar=True, dtype="i32")]
            self.try_op(lambda: b.store(self.mem["y"], idx, v))
        elif kind == "name":
            pool = self.values()
            if pool:
                self.name(self.pick(pool))
        elif kind == "for" and depth < 2:
            self.for_op(depth)
        elif kind == "if" and depth < 2:
            self.if_op(depth)

    def visible_names(self) -> list[str]:
        from kir.builder import _is_value

        names = []
        for scope in self.b._scopes:
            names += [n for n, v in scope.names.items() if _is_value(v) and n not in names]
        return names

    def for_op(self, depth: int) -> None:
        from kir.diagnostics import KirError

        b = self.b
        names = self.visible_names()
        carried = [n for n in names if self.chance(30)]
        if self.chance(30):
            carried.reverse()
        lo = self.value(scalar=True, dtype="i32")
        hi = self.value(scalar=True, dtype="i32")
        step = self.value(scalar=True, dtype="i32")
        inits = {n: b.lookup(n) for n in carried}
        try:
            b.begin_for(self.pick(("k", "i", "_v1", "x")), lo, hi, step, carried)
        except KirError:
            return
        self.pools.append([])
        self.block(depth + 1, self.int(0, 6))
        for n in carried:
            if self.chance(50):
                pool = [v for v in self.values() if v.type == inits[n].type]
                if pool:
                    b.assign(n, self.pick(pool))
        self.pools.pop()
        try:
            results = b.end_for()
        except KirError:
            # a carried name was rebound to another type: give it its type back
            for n in carried:
                if b.lookup(n).type != inits[n].type:
                    b.assign(n, _first_of_type(b, n, inits[n]))
            results = b.end_for()
        self.pools[-1] += results

    def if_op(self, depth: int) -> None:
        b = self.b
        b.begin_if(self.value(scalar=True, dtype="i1"))
        self.pools.append([])
        self.block(depth + 1, self.int(0, 4))
        self.pools.pop()
        if self.chance(60):
            b.begin_else()
            self.pools.append([])
            self.block(depth + 1, self.int(0, 4))
            self.pools.pop()
        from kir.diagnostics import KirError

        results = None
        if self.chance(30):
            results = [n for n in self.visible_names() if self.chance(30)]
        try:
            values = b.end_if(results)
        except KirError:
            values = b.end_if([])  # no results always closes it
        self.pools[-1] += values

    def role(self) -> None:
        from kir.dialect import structure as st

        b = self.b
        b.begin_role(self.pick(("load", "mma")), "warps", [0, 1], self.pick((0, 40)))
        self.pools.append([])
        self.try_op(lambda: b.make(st.RoleRankOp).res)
        self.block(1, self.int(0, 5))
        self.pools.pop()
        b.end_role()


def _first_of_type(b, name: str, init):
    """The loop's own block argument for `name` (its type is the init's)."""
    frame = b._frames[-1]
    return b._blocks[-1].args[1 + frame.carried.index(name)]


def _dtype(v) -> str:
    from kir.dialect.types import dtype_of

    return dtype_of(v.type)


def sx_sym(name: str):
    from kir import symexpr as sx

    return sx.Sym(name)
