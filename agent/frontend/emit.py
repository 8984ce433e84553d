"""From a traced forward to a seed KIR program (one kernel, or two where a reduction is split).

The forms, chosen by the graph:

- **flat**: elementwise ops on tensors of one shape (and Python scalars): the tensors as one
  flat vector, a program per `BLOCK` elements;
- **rows**: elementwise ops and reductions along the last dimension (sum, mean, max, min, prod,
  arg-reductions, softmax, log-softmax, log-sum-exp, variance, norms, LayerNorm, scans), with
  vectors along it (weights, biases) and per-row values: one program per row, the whole row in
  one tile (`N <= BLOCK`), or `BLOCK` columns of it when nothing reduces; a loss (a reduction of
  everything): a program per row writes its share, a second kernel sums the shares;
- **transposed-conv**: `nn.ConvTranspose1d/2d/3d` (one group) as a direct gather: a program per
  `BLOCK` outputs, each tap reading the input position it comes from where the stride divides;
- **stats**: a normalization by statistics over several dimensions, `nn.GroupNorm` (a program
  per sample and group) and `nn.BatchNorm2d/3d` (a program per channel, over the batch and the
  spatial dimensions: the batch's statistics in training mode, the running ones in eval mode),
  with the elementwise ops after it: the group's elements walked `BLOCK` at a time, in three
  passes (the mean, the centred variance, the normalized result); with few groups, two kernels
  (`kir.multi`), each group split over `SPLIT` programs;
- **gemm**: a matrix product (`matmul`, `mm`, `bmm`, `@`, `nn.Linear`, `F.linear`; an operand
  may be transposed) with the elementwise ops after it fused into the epilogue: a tile-level
  GEMM, a program per `BM x BN` tile (and per batch), masked on every edge.

Values are f32 in registers whatever the tensors hold. An op or a shape none of these take is a
`FrontendError` at the line of the module's source that calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.frontend.ops import BINARY, canonical, literal, unary
from agent.frontend.trace import FrontendError, Traced, error, meta

KIR_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
              "int32": "i32", "bool": "i1", "int8": "i8", "uint8": "u8"}  # fmt: skip
REDUCTIONS = ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "logsumexp", "var", "std", "norm",
              "cosine_similarity")  # fmt: skip
ROW_TO_ROW = ("softmax", "log_softmax", "cumsum", "cumprod", "layer_norm", "normalize", "batch_norm")
MATMULS = ("matmul", "linear")
CONVS = ("nn.Conv1d", "nn.Conv2d", "nn.Conv3d")
TRANSPOSED = ("nn.ConvTranspose1d", "nn.ConvTranspose2d", "nn.ConvTranspose3d")
STATS = ("nn.GroupNorm", "nn.BatchNorm2d", "nn.BatchNorm3d")
POOLS = ("nn.MaxPool1d", "nn.MaxPool2d", "nn.MaxPool3d", "nn.AvgPool1d", "nn.AvgPool2d", "nn.AvgPool3d")
NOT_YET = {
    "conv1d": "convolution", "conv2d": "convolution", "conv3d": "convolution",
    "conv_transpose1d": "convolution", "conv_transpose2d": "convolution", "conv_transpose3d": "convolution",
    "nn.AdaptiveAvgPool2d": "pooling", "max_pool2d": "pooling", "avg_pool2d": "pooling",
    "group_norm": "group statistics",
    "nn.InstanceNorm2d": "instance statistics", "instance_norm": "instance statistics",
    "nll_loss": "a scalar output",
}  # fmt: skip
# losses to a scalar: the elementwise term of two tensors a, b of one shape (written in {a}, {b})
LOSSES = {
    "mse_loss": "({a} - {b}) * ({a} - {b})",
    "l1_loss": "abs({a} - {b})",
    "smooth_l1_loss": "where(abs({a} - {b}) < {beta}, 0.5 * ({a} - {b}) * ({a} - {b}) / {beta}, abs({a} - {b}) - 0.5 * {beta})",
    "huber_loss": "where(abs({a} - {b}) <= {delta}, 0.5 * ({a} - {b}) * ({a} - {b}), {delta} * (abs({a} - {b}) - 0.5 * {delta}))",
    "kl_div": "where({b} > 0.0, {b} * (log({b}) - {a}), 0.0)",
}


@dataclass
class Arg:
    """A kernel argument and the tensor of the task it is bound to."""

    name: str
    dtype: str
    dims: list[str]
    source: str  # "inputs[i]", "outputs[i]" or "model.<path>"
    out: bool = False

    def decl(self) -> str:
        return f"{self.name}: {'out ' if self.out else ''}global {self.dtype}[{', '.join(self.dims)}]"


@dataclass
class Seed:
    """A seed program: its KIR text, the bindings of its arguments, its parameters per preset."""

    name: str
    form: str
    text: str
    args: list[Arg]
    params: dict[str, dict[str, int]] = field(default_factory=dict)  # preset -> parameters
    notes: list[str] = field(default_factory=list)
    # parameters that are a module's setting (param -> (module path, attribute)): a preset's
    # value is that of the model made under it (GroupNorm's groups, scaled with the channels)
    preset_params: dict[str, tuple[str, str]] = field(default_factory=dict)


def kernel_text(
    name: str, params: dict[str, int], args: list[str], where: str, grid: str, lines: list[str], warps: int = 4
) -> str:
    """One seed kernel's text: its parameters, the argument declarations, `where`, the grid and
    the body's lines."""
    return (
        f"kernel {name}<{', '.join(f'{k} = {v}' for k, v in params.items())}>(\n"
        + "".join(f"    {a},\n" for a in args)
        + ")"
        + (f"\n  where {where}" if where else "")
        + f"\n  target sm_90 grid({grid}) warps({warps})\n{{\n"
        + "\n".join(lines)
        + "\n}\n"
    )


def _split(groups: int, programs: int = 528) -> int:
    """How many programs share a group of the stats form so that about `programs` (four per SM
    of an H200) run: a power of two, at most 64; 1 when the groups are that many already."""
    if groups >= programs:
        return 1
    return min(64, _next_pow2(-(-programs // max(1, groups)), lo=1))


def _next_pow2(n: int, lo: int = 16) -> int:
    p = lo
    while p < n:
        p *= 2
    return p


class _Graph:
    """The traced graph's nodes by kind, and what each is bound to."""

    def __init__(self, traced: Traced) -> None:
        self.traced = traced
        self.file: Path = traced.task.reference
        nodes = list(traced.graph.nodes)
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        self.outputs = [n for n in nodes if n.op == "output"]
        self.compute = [n for n in nodes if n.op in ("call_function", "call_method", "call_module")]
        self.inputs: dict[str, Any] = {}
        for i, node in enumerate(self.placeholders):
            self.inputs[node.name] = traced.inputs[i] if i < len(traced.inputs) else None
        self.index = {node.name: i for i, node in enumerate(self.placeholders)}

    def fail(self, node, rule: str, message: str, hint: str = "") -> FrontendError:
        return error(rule, message, self.file, self.traced.line(node) if node is not None else 1, hint)

    def results(self) -> list:
        (out,) = self.outputs
        value = out.args[0]
        return list(value) if isinstance(value, tuple | list) else [value]


def make_seed(traced: Traced, name: str) -> Seed:
    """The seed kernel of the traced forward (a `FrontendError` at the first op it cannot take)."""
    g = _Graph(traced)
    for node in g.compute:
        op, args = canonical(node, traced)
        if op in STATS and node is not g.compute[0]:
            raise g.fail(
                node, "frontend.op",
                f"`{op}` after other ops is not translated yet: its statistics are of their result, which needs the "
                "result in memory and a kernel after it (the frontend does not write that program yet)",
                "write the kernel by hand in KIR, or leave this op to PyTorch",
            )  # fmt: skip
        if op in NOT_YET:
            raise g.fail(
                node, "frontend.op", f"`{op}` is not translated yet: it needs {NOT_YET[op]}",
                "write the kernel by hand in KIR, or leave this op to PyTorch",
            )  # fmt: skip
        if op == "dropout" and args.get("training", True) and _p(args) > 0:
            raise g.fail(
                node, "frontend.op",
                "`dropout` in training mode draws its random numbers from PyTorch's generator, which no kernel "
                "reproduces, so its outputs cannot be compared",
                "run the task in eval mode (task.toml: mode = \"eval\") where dropout is the identity, or write the "
                "reference with kir.random, which draws what KIR's rand(seed, offsets) draws (examples/dropout.kir)",
            )  # fmt: skip
    results = g.results()
    for r in results:
        if not hasattr(r, "op"):
            raise g.fail(None, "frontend.output", f"forward returns {r!r}, not a tensor")
        if meta(r) is None:
            raise g.fail(r, "frontend.output", "forward returns something that is not one tensor")
    skip = ("identity", "dropout", "contiguous", "getattr", "t", "transpose")
    first = next((n for n in g.compute if canonical(n, traced)[0] not in skip), None)
    if first is not None and canonical(first, traced)[0] in MATMULS:
        return _Gemm(g, name).emit()
    if first is not None and canonical(first, traced)[0] in CONVS:
        return _Conv(g, name).emit()
    if first is not None and canonical(first, traced)[0] in POOLS:
        return _Pool(g, name).emit()
    if first is not None and canonical(first, traced)[0] in TRANSPOSED:
        return _Transposed(g, name).emit()
    if first is not None and canonical(first, traced)[0] in STATS:
        return _Stats(g, name).emit()
    p = _middle(g)
    if p is not None:
        return _Cols(g, name, p).emit()
    return _Rows(g, name).emit()


def _p(args: dict) -> float:
    p = args.get("p", 0.5)
    return float(p) if isinstance(p, int | float) else 0.5


class _Emitter:
    """Shared by the forms: arguments, statements, the elementwise walk."""

    def __init__(self, g: _Graph, name: str) -> None:
        self.g = g
        self.name = name
        self.args: list[Arg] = []
        self.by_source: dict[str, Arg] = {}
        self.lines: list[str] = []
        self.values: dict[str, tuple[str, str]] = {}  # node name -> (kind, KIR expression or variable)
        self.flipped: set[str] = set()  # rows held in reversed order (`flip` of the last dimension)
        self.notes: list[str] = []
        self.preset_params: dict[str, tuple[str, str]] = {}
        self._n = 0

    def var(self, expr: str, prefix: str = "t") -> str:
        self._n += 1
        v = f"{prefix}{self._n}"
        self.lines.append(f"  {v} = {expr}")
        return v

    def arg(self, source: str, dtype: str, dims: list[str], base: str, out: bool = False) -> Arg:
        key = f"{source}{dims}"  # one tensor read in two shapes (x as a [M, K] operand and an [M, N] residual): two arguments
        if key in self.by_source:
            return self.by_source[key]
        names = {a.name for a in self.args}
        name = base
        i = 1
        while name in names or name in ("M", "N", "K", "T", "BLOCK", "BM", "BN", "BK"):
            i += 1
            name = f"{base}{i}"
        a = Arg(name, dtype, dims, source, out)
        self.args.append(a)
        self.by_source[key] = a
        return a

    def tensor_source(self, node) -> tuple[str, str] | None:
        """(binding, a name for the argument) of a node that is a tensor of the task: an input
        or a parameter (a `get_attr`)."""
        if node.op == "placeholder":
            return f"inputs[{self.g.index[node.name]}]", _ident(node.name)
        if node.op == "get_attr":
            return f"model.{node.target}", _ident(str(node.target).split(".")[-1])
        return None

    def seed(self, form: str, params: dict[str, int], where: str, grid: str, lines: list[str], warps: int = 4,
             what: str = "") -> Seed:  # fmt: skip
        """The kernel's text (inputs first, then outputs) and the Seed around it."""
        args = [a for a in self.args if not a.out] + [a for a in self.args if a.out]
        text = f"# {form} seed of {self.g.file.name}{what}, written by the frontend (agent/frontend)\n" + kernel_text(
            self.name, params, [a.decl() for a in args], where, grid, lines, warps
        )
        return Seed(self.name, form, text, args, {"bench": dict(params)}, self.notes, dict(self.preset_params))

    def _operand(self, x) -> str | None:
        """The expression of a value: a Python number (or a scalar input), a value computed
        already, or a tensor of the task read the way the form reads it (`_read`)."""
        s = self.scalar(x)
        if s is not None:
            return s
        if not hasattr(x, "op"):
            return None
        if x.name in self.values:
            return self.values[x.name][1]
        src, m = self.tensor_source(x), meta(x)
        if src is None or m is None or m[1] not in KIR_DTYPES:
            return None
        read = self._read(src[0], src[1], m[0], KIR_DTYPES[m[1]])
        if read is None:
            return None
        self.values[x.name] = read
        return read[1]

    def _read(self, source: str, base: str, shape: tuple[int, ...], kdt: str) -> tuple[str, str] | None:
        """(kind, variable) of a tensor of the task bound to `source` as this form reads it, or
        None for a shape it does not read (the pool forms read only their input)."""
        return None

    def _load(self, a: Arg, access: str, kdt: str, prefix: str, after: str = "") -> str:
        """A variable holding a load of argument `a` (`access`: its index and mask; `after`:
        the axes it is expanded by), in f32."""
        expr = f"load({a.name}[{access}){after}"
        return self.var(expr if kdt == "f32" else f"cast<f32>({expr})", prefix)

    def scalar(self, x) -> str | None:
        """A Python number, or a placeholder holding one (a scalar input of get_inputs(), taken
        as the constant it is in the problem)."""
        if isinstance(x, int | float) and not isinstance(x, bool):
            return literal(x)
        if hasattr(x, "op") and x.op == "placeholder":
            value = self.g.inputs.get(x.name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.notes.append(f"the scalar input `{x.name}` is the constant {value!r} of get_inputs()")
                return literal(value)
        return None

    def elementwise(self, node, op: str, args: dict, operand) -> str | None:
        """The expression of an elementwise node, with `operand(x)` giving each input's
        expression (None if an input is not one this form can read)."""
        x = args.get("input")
        if op in BINARY or op == "rsub":
            a, b = operand(x), operand(args.get("other", args.get("exponent")))
            if a is None or b is None:
                return None
            alpha = args.get("alpha")
            if alpha not in (None, 1) and isinstance(alpha, int | float):
                b = f"({b} * {literal(alpha)})"
            if op == "rsub":
                return f"({b} - {a})"
            if op == "pow" and b in ("2.0", "2"):
                return f"({a} * {a})"
            return BINARY[op].format(a=a, b=b)
        v = operand(x)
        if v is None:
            return None
        settings = {
            k: (float(lit) if (lit := self.scalar(a)) is not None else a) for k, a in args.items() if k != "input"
        }
        return unary(op, v, settings)


def _ident(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else f"a_{out}"


class _Reducing(_Emitter):
    """Reductions and row ops of a tile along one of its axes (the rows form's 0, the gemm
    form's 1 for whole rows of the product, the cols form's 0 with the result kept 2-D)."""

    main: tuple[int, ...] = ()
    merge = 1
    form = "rows"

    e = ""  # after a reduction: nothing (a scalar per row); the cols form's `[None, :]`
    count = "N"  # the reduced extent's symbol
    ax = 0  # the tile's axis that is reduced

    def _vector(self, name: str) -> str:
        """A load of a vector along the reduced dimension, shaped to the tile."""
        return f"load({name}[cols], mask = mask)"

    def _across(self, name: str) -> str:  # pragma: no cover - the cols form's
        """A load of a vector across the reduced dimension (one value per column)."""
        raise NotImplementedError

    def _expected(self, rank: int) -> tuple[int, ...]:
        """The dimensions this form reduces (of a tensor of `rank` dimensions)."""
        return tuple(range(rank - self.merge, rank)) if rank == len(self.main) else (rank - 1,)

    def _reduction(self, node, op: str, args: dict) -> None:
        g = self.g
        x = args.get("input")
        v = self._operand(x)
        m = meta(x) if hasattr(x, "op") else None
        if v is None or m is None or self.values.get(getattr(x, "name", ""), ("", ""))[0] != "full":
            raise g.fail(node, "frontend.operand", f"`{op}` of a value that is not a row of the main shape")
        rank = len(m[0])
        dims = _dims(op, args, rank)
        trailing = self._expected(rank)
        dim: Any = args.get("dim") if op != "layer_norm" else args.get("normalized_shape")
        if dims != trailing or self.form != "rows":
            raise g.fail(
                node, "frontend.op", f"`{op}` over dim {dim!r}: the seed reduces along the last dimension(s) only",
                "reductions over other dimensions (or all of them) are not translated yet",
            )  # fmt: skip
        n = f"cast<f32>({self.count})"
        neutral = {"sum": "0.0", "mean": "0.0", "max": "-inf", "min": "inf", "prod": "1.0", "argmax": "-inf",
                   "argmin": "inf", "logsumexp": "-inf", "softmax": "-inf", "log_softmax": "-inf", "cumsum": "0.0",
                   "cumprod": "1.0"}.get(op, "0.0")  # fmt: skip
        flipped = getattr(x, "name", "") in self.flipped
        if flipped and op not in REDUCTIONS + ("cumsum", "cumprod"):
            raise g.fail(node, "frontend.op", f"`{op}` of a flipped row is not translated yet")
        masked = self.var(f"where(mask, {v}, {neutral})")
        if op in ("sum", "prod"):
            out = ("row", self.var(f"{op}({masked}, axis = {self.ax}){self.e}"))
        elif op == "mean":
            out = ("row", self.var(f"sum({masked}, axis = {self.ax}){self.e} / {n}"))
        elif op in ("max", "min"):
            val = self.var(f"{op}({masked}, axis = {self.ax}){self.e}")
            if node.op == "call_function" and "dim" in args or node.op == "call_method" and "dim" in args:
                idx = self.var(f"cast<f32>(arg{op}({masked}, axis = {self.ax}){self.e})")
                users = list(node.users)
                if users and all(canonical(u, g.traced)[0] == "getitem" for u in users):
                    self.values[node.name] = ("pair", f"{val}|{idx}")
                    return
            out = ("row", val)
        elif op in ("argmax", "argmin"):
            out = ("row", self.var(f"{op}({masked}, axis = {self.ax}){self.e}"))
        elif op == "logsumexp":
            mx = self.var(f"max({masked}, axis = {self.ax}){self.e}")
            out = ("row", self.var(f"{mx} + log(sum(exp({masked} - {mx}), axis = {self.ax}){self.e})"))
        elif op in ("var", "std"):
            mean = self.var(f"sum({masked}, axis = {self.ax}){self.e} / {n}")
            d = self.var(f"where(mask, {v} - {mean}, 0.0)")
            unbiased = args.get("unbiased", True)
            correction = args.get("correction", 1 if unbiased else 0)
            den = f"({n} - {literal(correction)})" if correction else n
            var = self.var(f"sum({d} * {d}, axis = {self.ax}){self.e} / {den}")
            out = ("row", var if op == "var" else self.var(f"sqrt({var})"))
        elif op == "cosine_similarity":
            other = self._operand(args.get("other"))
            if other is None:
                raise g.fail(node, "frontend.operand", "`cosine_similarity` of a tensor this seed does not read")
            eps = literal(args.get("eps", 1e-8))
            o = self.var(f"where(mask, {other}, 0.0)")
            n1 = self.var(f"maximum(sqrt(sum({masked} * {masked}, axis = {self.ax}){self.e}), {eps})")
            n2 = self.var(f"maximum(sqrt(sum({o} * {o}, axis = {self.ax}){self.e}), {eps})")
            out = ("row", self.var(f"sum({masked} * {o}, axis = {self.ax}){self.e} / ({n1} * {n2})"))
        elif op == "norm":
            p = args.get("p", 2)
            if p not in (2, 2.0, "fro", None):
                raise g.fail(node, "frontend.op", f"`norm` with p = {p!r}: only the 2-norm is translated")
            out = ("row", self.var(f"sqrt(sum({masked} * {masked}, axis = {self.ax}){self.e})"))
        elif op == "softmax":
            e = self.var(f"exp({masked} - max({masked}, axis = {self.ax}){self.e})")
            out = ("full", self.var(f"{e} / sum({e}, axis = {self.ax}){self.e}"))
        elif op == "log_softmax":
            mx = self.var(f"max({masked}, axis = {self.ax}){self.e}")
            out = ("full", self.var(f"{v} - {mx} - log(sum(exp({masked} - {mx}), axis = {self.ax}){self.e})"))
        elif op in ("cumsum", "cumprod"):
            out = ("full", self.var(f"{op}({masked}, axis = {self.ax}{', reverse = 1' if flipped else ''})"))
            if flipped:
                self.flipped.add(node.name)
        elif op == "normalize":
            p, eps = args.get("p", 2.0), args.get("eps", 1e-12)
            if p not in (2, 2.0):
                raise g.fail(node, "frontend.op", f"`normalize` with p = {p!r}: only p = 2 is translated")
            nrm = self.var(f"sqrt(sum({masked} * {masked}, axis = {self.ax}){self.e})")
            out = ("full", self.var(f"{v} / maximum({nrm}, {literal(eps)})"))
        elif op == "batch_norm":  # training mode: the batch's statistics of each feature (the cols form)
            mean = self.var(f"sum({masked}, axis = {self.ax}){self.e} / {n}")
            d = self.var(f"where(mask, {v} - {mean}, 0.0)")
            rstd = self.var(f"rsqrt(sum({d} * {d}, axis = {self.ax}){self.e} / {n} + {literal(args.get('eps', 1e-5))})")
            y = f"{d} * {rstd}"
            for key in ("weight", "bias"):
                p = args.get(key)
                if isinstance(p, str):
                    a = self.arg(f"model.{p}", "f32", ["B"], key[0])
                    w = self.var(self._across(a.name), "w")
                    y = f"({y}) * {w}" if key == "weight" else f"({y}) + {w}"
            out = ("full", self.var(y))
        else:  # layer_norm
            mean = self.var(f"sum({masked}, axis = {self.ax}){self.e} / {n}")
            d = self.var(f"where(mask, {v} - {mean}, 0.0)")
            rstd = self.var(f"rsqrt(sum({d} * {d}, axis = {self.ax}){self.e} / {n} + {literal(args.get('eps', 1e-5))})")
            y = f"{d} * {rstd}"
            for key in ("weight", "bias"):
                p = args.get(key)
                if p is None:
                    continue
                if isinstance(p, str):  # an nn.LayerNorm's own parameter
                    a = self.arg(f"model.{p}", "f32", ["N"], key[0])
                    w = self.var(self._vector(a.name), "w")
                else:
                    read = self._operand(p)
                    if read is None:
                        raise g.fail(node, "frontend.operand", f"`layer_norm`'s {key} is not a vector this seed reads")
                    w = read
                y = f"({y}) * {w}" if key == "weight" else f"({y}) + {w}"
            out = ("full", self.var(y))
        if op in REDUCTIONS and args.get("keepdim"):
            pass  # one value per row either way: the output's trailing 1 is merged by the binding
        self.values[node.name] = out


class _Rows(_Reducing):
    """The flat and rows forms."""

    def emit(self) -> Seed:
        g = self.g
        main = self._main_shape()
        self.main = main
        # reductions over the last j dimensions together (an instance norm over H and W): the
        # tensors as views with those dimensions merged into one, which the binding makes
        self.merge = self._trailing(len(main))
        self.shape = self._merged(main)
        self.rank = len(self.shape)
        reduces = any(self._reduces(n) or self._all(n) for n in g.compute)
        vectors = any(self._broadcasts(n) for n in g.compute)
        self.form = "rows" if (reduces or vectors) else "flat"
        if self.form == "rows" and self.rank < 2:
            raise g.fail(
                next(n for n in g.compute if self._reduces(n)), "frontend.output",
                "a reduction of a 1-dimensional tensor gives a scalar: KIR kernels write tensors only",
            )  # fmt: skip
        lead = ["M"] if self.rank == 2 else [f"R{i}" for i in range(self.rank - 1)]
        self.full_dims = ["T"] if self.form == "flat" else [*lead, "N"]
        self.row_dims = lead
        body: list[str] = []
        if self.form == "flat":
            body += ["  offs = program_id(0) * BLOCK + arange(0, BLOCK)", "  mask = offs < T"]
            self.full_index = "offs"
            grid = "cdiv(T, BLOCK)"
        else:
            if reduces:
                body.append("  cols = arange(0, BLOCK)")
                grid = " * ".join(lead)
                row = "program_id(0)"
            else:
                body.append("  cols = program_id(1) * BLOCK + arange(0, BLOCK)")
                grid = f"{' * '.join(lead)}, cdiv(N, BLOCK)"
                row = "program_id(0)"
            body.append("  mask = cols < N")
            if len(lead) == 1:
                body.append(f"  row = {row}")
                self.row_index = ["row"]
            else:  # the row's coordinates from the program's index, the last one fastest
                body.append(f"  p = {row}")
                index: list[str] = []
                rest = "p"
                for i in range(len(lead) - 1, -1, -1):
                    if i == 0:
                        body.append(f"  row{i} = {rest}")
                    else:
                        body.append(f"  row{i} = {rest} % {lead[i]}")
                        body.append(f"  rest{i} = {rest} / {lead[i]}")
                        rest = f"rest{i}"
                    index.insert(0, f"row{i}")
                self.row_index = index
            self.full_index = ", ".join([*self.row_index, "cols"])
        self.lines = body
        self.totals: list[tuple[str, str, str]] = []
        if self.form == "rows" and any(self._all(n) for n in g.compute):  # a loss: a program a row, then a sum
            self.lines = ["  row = program_id(0)", "  cols = arange(0, BLOCK)", "  mask = cols < N"]
            self.row_index = ["row"]
            self.full_index = "row, cols"
        for node in g.compute:
            self._node(node)
        stores = []
        finals: list[tuple[Arg, str, str, str]] = []  # a loss's output, its total, the row's part, the count
        for i, r in enumerate(g.results()):
            kind, expr = self.values[r.name]
            if kind == "total":
                _, part, count = next(x for x in self.totals if x[0] == expr)
                out = self.arg(f"outputs[{i}]", "f32", ["1"], "y" if i == 0 else f"y{i}", out=True)
                finals.append((out, expr, part, count))
                continue
            if self.totals:
                raise g.fail(r, "frontend.output", "a loss's seed writes the loss alone")
            shape, dtype = meta(r)  # type: ignore[misc]
            kdt = KIR_DTYPES.get(dtype, "f32")
            value = expr if kdt == "f32" or kind == "const" else f"cast<{kdt}>({expr})"
            if kind == "full":
                out = self.arg(f"outputs[{i}]", kdt, self.full_dims, "y" if i == 0 else f"y{i}", out=True)
                at = self.full_index
                if r.name in self.flipped:  # a reversed row goes back in memory order
                    at = at.removesuffix("cols") + "N - 1 - cols"
                stores.append(f"  store({out.name}[{at}], {value}, mask = mask)")
            elif kind == "row":
                out = self.arg(f"outputs[{i}]", kdt, self.row_dims, "y" if i == 0 else f"y{i}", out=True)
                stores.append(f"  store({out.name}[{', '.join(self.row_index)}], {value})")
            else:
                raise g.fail(r, "frontend.output", "forward returns a value that does not depend on its inputs")
        n_bench = self.shape[-1]
        block = 1024 if self.form == "flat" else (_next_pow2(n_bench) if reduces else 1024)
        where = "N <= BLOCK" if self.form == "rows" and reduces else ""
        if self.form == "rows" and reduces and n_bench > 65536:
            raise g.fail(
                next(n for n in g.compute if self._reduces(n)), "frontend.shape",
                f"a reduction over rows of {n_bench} elements: the seed holds a row in one tile, at most 65536",
            )  # fmt: skip
        if finals:
            return self._loss_seed(block, where, finals)
        return self.seed(self.form, {"BLOCK": block}, where, grid, self.lines + stores)

    def _loss_seed(self, block: int, where: str, finals: list[tuple[Arg, str, str, str]]) -> Seed:
        """A reduction of everything (a loss) as two kernels: a program a row writes the row's
        share of each total to a scratch buffer (`grid(M)`, the reads spread over the GPU), then
        one program sums the shares (`kir.multi`)."""
        names = {a.name for a in self.args}
        parts = []
        for i in range(len(finals)):
            name = f"partial{i}"
            while name in names:
                name += "_"
            parts.append(name)
        ins = [a for a in self.args if not a.out]
        rows = self.lines + [
            f"  store({p}[row], ({part}) / ({count}))" for p, (_, _, part, count) in zip(parts, finals, strict=True)
        ]
        total = [
            "  rows = arange(0, RB)",
            *[f"  {t} = 0.0" for _, t, _, _ in finals],
            "  for start in 0 .. M step RB {",
            "    idx = start + rows",
            *[
                f"    {t} = {t} + sum(where(idx < M, load({p}[idx], mask = idx < M), 0.0), axis = 0)"
                for p, (_, t, _, _) in zip(parts, finals, strict=True)
            ],
            "  }",
            *[f"  store({out.name}[0], {t})" for out, t, _, _ in finals],
        ]
        text = (
            f"# rows seed of {self.g.file.name} in two kernels, written by the frontend (agent/frontend)\n"
            + "".join(f"scratch {p}: f32[M]\n" for p in parts)
            + "\n"
            + kernel_text(
                self.name, {"BLOCK": block}, [a.decl() for a in ins] + [f"{p}: out global f32[M]" for p in parts],
                where, "M", rows,
            )
            + "\n"
            + kernel_text(
                f"{self.name}_total", {"RB": 1024},
                [f"{p}: global f32[M]" for p in parts] + [out.decl() for out, _, _, _ in finals], "", "1", total,
            )
        )  # fmt: skip
        args = ins + [out for out, _, _, _ in finals]
        params = {"BLOCK": block, "RB": 1024}
        return Seed(self.name, "rows", text, args, {"bench": params}, self.notes, dict(self.preset_params))

    # -- shapes -------------------------------------------------------------------------------------

    def _main_shape(self) -> tuple[int, ...]:
        """The shape the kernel walks: the largest tensor the graph reads or makes."""
        best: tuple[int, ...] = ()
        for node in [*self.g.placeholders, *self.g.compute]:
            m = meta(node)
            if m is not None and _numel(m[0]) > _numel(best):
                best = m[0]
        return best

    def _reduces(self, node) -> bool:
        op, _ = canonical(node, self.g.traced)
        return op in REDUCTIONS + ROW_TO_ROW

    def _all(self, node) -> bool:
        """A reduction of everything: a loss, or `sum`/`mean` without a dimension."""
        op, args = canonical(node, self.g.traced)
        return op in LOSSES or op == "cross_entropy" or (op in ("sum", "mean") and args.get("dim") is None)

    def _trailing(self, rank: int) -> int:
        """How many trailing dimensions the graph's reductions take together (1 when they take
        the last one, or when they disagree: then `_reduction` says which one it cannot take)."""
        found = set()
        for node in self.g.compute:
            op, args = canonical(node, self.g.traced)
            dims = _dims(op, args, rank)
            if dims is not None and len(dims) > 1 and dims == tuple(range(rank - len(dims), rank)):
                found.add(len(dims))
        return found.pop() if len(found) == 1 else 1

    def _merged(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A tensor of the main rank as the kernel reads it: its last `merge` dimensions as one."""
        j = self.merge
        if j == 1 or len(shape) != len(self.main):
            return shape
        return (*shape[:-j], _numel(shape[-j:]))

    def _broadcasts(self, node) -> bool:
        for x in node.all_input_nodes:
            m = meta(x)
            if m is not None and self._merged(m[0]) != self.shape and _numel(m[0]) > 1:
                return True
        return False

    # -- operands -----------------------------------------------------------------------------------

    def _read(self, source: str, base: str, shape: tuple[int, ...], kdt: str) -> tuple[str, str] | None:
        shape = self._merged(shape)
        if shape == self.shape:
            a = self.arg(source, kdt, self.full_dims, base)
            return "full", self._load(a, f"{self.full_index}], mask = mask", kdt, "x")
        if self.form == "rows" and _numel(shape) == self.shape[-1] and shape[-1] == self.shape[-1]:
            a = self.arg(source, kdt, ["N"], base)
            return "full", self._load(a, "cols], mask = mask", kdt, "w")
        if self.form == "rows" and shape == (*self.shape[:-1], 1):  # keepdim: one value a row
            a = self.arg(source, kdt, self.row_dims, base)
            return "row", self._load(a, f"{', '.join(self.row_index)}]", kdt, "r")
        if _numel(shape) == 1:
            a = self.arg(source, kdt, ["1"], base)
            return "row", self._load(a, "0]", kdt, "s")
        return None

    def _node(self, node) -> None:
        g = self.g
        op, args = canonical(node, g.traced)
        x = args.get("input")
        if op in ("identity", "contiguous") or (op == "dropout" and (not args.get("training", True) or _p(args) == 0)):
            v = self._operand(x)
            if v is None:
                raise g.fail(node, "frontend.operand", f"`{op}` of a value this seed cannot read")
            self.values[node.name] = self.values.get(getattr(x, "name", ""), ("full", v))
            return
        if op in LOSSES or op == "cross_entropy" or (op in ("sum", "mean") and args.get("dim") is None):
            self._total(node, op, args)
            return
        if op == "flip":  # the last dimension reversed: the same registers, read in the other order
            dims = args.get("dims")
            dims = tuple(dims) if isinstance(dims, tuple | list) else (dims,)
            m = meta(x) if hasattr(x, "op") else None
            v = self._operand(x)
            if v is None or m is None or [d % len(m[0]) for d in dims] != [len(m[0]) - 1] or self.form != "rows":
                raise g.fail(node, "frontend.op", "`flip` of a value this seed reads, along the last dimension only")
            self.values[node.name] = self.values[getattr(x, "name", "")]
            if getattr(x, "name", "") not in self.flipped:
                self.flipped.add(node.name)
            return
        if op in REDUCTIONS + ROW_TO_ROW:
            self._reduction(node, op, args)
            return
        if op == "getitem":
            src = self.values.get(getattr(x, "name", ""))
            if src is not None and src[0] == "pair":
                a, b = src[1].split("|")
                self.values[node.name] = ("row", a if args.get("index") == 0 else b)
                return
            raise g.fail(
                node, "frontend.op", "indexing (`[...]`) is not translated, except max/min's (values, indices)"
            )
        expr = self.elementwise(node, op, args, self._operand)
        if expr is None:
            raise self._unknown(node, op, args)
        kinds = {self.values[a.name][0] for a in node.all_input_nodes if a.name in self.values}
        kind = "full" if "full" in kinds else ("row" if "row" in kinds else "full")
        full = [a.name for a in node.all_input_nodes if self.values.get(a.name, ("",))[0] == "full"]
        if len({n in self.flipped for n in full}) > 1:
            raise g.fail(node, "frontend.op", f"`{op}` of a flipped and an unflipped row: not translated yet")
        if full and full[0] in self.flipped:
            self.flipped.add(node.name)
        self.values[node.name] = (kind, self.var(expr))

    def _total(self, node, op: str, args: dict) -> None:
        """A reduction of everything to one value (a loss, `mean()`): the kernel becomes one
        program looping over the rows, the value a sum carried by the loop (`self.totals`)."""
        g = self.g
        if self.rank != 2 or self.merge != 1:
            raise g.fail(
                node, "frontend.shape", f"`{op}` over a {len(self.main)}-D tensor: the loss seed takes matrices"
            )
        reduction = args.get("reduction", "mean") if op != "sum" else "sum"
        if op in LOSSES:
            a, b = (
                self._operand(args.get("input")),
                self._operand(args.get("target", args.get("other", args.get("arg1")))),
            )
            if a is None or b is None:
                raise g.fail(node, "frontend.operand", f"`{op}` of tensors this seed does not read")
            term = LOSSES[op].format(
                a=a, b=b, beta=literal(args.get("beta", 1.0)), delta=literal(args.get("delta", 1.0))
            )
            if op == "kl_div" and args.get("log_target"):
                term = f"exp({b}) * ({b} - {a})"
            part = f"sum(where(mask, {term}, 0.0), axis = 0)"
            count = {"mean": "cast<f32>(M) * cast<f32>(N)", "sum": "1.0", "batchmean": "cast<f32>(M)"}.get(reduction)
        elif op == "cross_entropy":
            logits, target = args.get("input"), args.get("target", args.get("arg1"))
            v = self._operand(logits)
            tm = meta(target) if hasattr(target, "op") else None
            src = self.tensor_source(target) if hasattr(target, "op") else None
            if v is None or tm is None or src is None or tm[1] != "int64" or args.get("weight") is not None:
                raise g.fail(
                    node, "frontend.operand", "`cross_entropy` of logits and int64 class indices (no weights) only"
                )
            if args.get("label_smoothing", 0.0) or args.get("ignore_index", -100) != -100:
                raise g.fail(
                    node, "frontend.op", "`cross_entropy` with label smoothing or ignore_index is not translated"
                )
            t = self.arg(src[0], "i64", ["M"], src[1])
            lg = self.by_source[f"{self.tensor_source(logits)[0]}{self.full_dims}"]  # type: ignore[index]
            masked = self.var(f"where(mask, {v}, -inf)")
            mx = self.var(f"max({masked}, axis = 0)")
            picked = self.var(f"load({lg.name}[row, cast<i32>(load({t.name}[row]))])")
            part = f"{mx} + log(sum(exp({masked} - {mx}), axis = 0)) - {picked}"
            count = {"mean": "cast<f32>(M)", "sum": "1.0"}.get(reduction)
        else:  # mean or sum of everything
            x = args.get("input")
            v = self._operand(x)
            kind = self.values.get(getattr(x, "name", ""), ("", ""))[0]
            if v is None or kind not in ("full", "row"):
                raise g.fail(node, "frontend.operand", f"`{op}` of a value this seed does not compute")
            part = f"sum(where(mask, {v}, 0.0), axis = 0)" if kind == "full" else v
            n = "cast<f32>(M) * cast<f32>(N)" if kind == "full" else "cast<f32>(M)"
            count = n if op == "mean" else "1.0"
        if count is None:
            raise g.fail(node, "frontend.op", f"`{op}` with reduction = {reduction!r} is not translated")
        total = f"total{len(self.totals)}"
        self.totals.append((total, part, count))
        self.values[node.name] = ("total", total)

    def _unknown(self, node, op: str, args: dict) -> FrontendError:
        for x in node.all_input_nodes:
            m = meta(x)
            if m is not None and self._operand(x) is None:
                return self.g.fail(
                    node, "frontend.shape",
                    f"`{op}` reads a tensor of shape {list(m[0])} against {list(self.shape)}: a broadcast this seed does not make",
                    "the seed reads tensors of the main shape, vectors along the last dimension and one value per row",
                )  # fmt: skip
        return self.g.fail(
            node, "frontend.op", f"`{op}` is not translated yet", "the ops the frontend takes: docs/frontend.md"
        )


class _Gemm(_Reducing):
    """The gemm form: a (batched) matrix product and its elementwise epilogue; where the ops
    after the product reduce along its rows (a LayerNorm, a softmax, a sum), a program holds
    whole rows (`BN >= N`) and reduces them in the epilogue."""

    e = "[:, None]"
    count = "N"
    ax = 1

    def _expected(self, rank: int) -> tuple[int, ...]:
        return (rank - 1,)

    def _vector(self, name: str) -> str:
        return f"load({name}[cols], mask = cmask)[None, :]"

    def emit(self) -> Seed:
        g = self.g
        first = next(n for n in g.compute if canonical(n, g.traced)[0] in MATMULS)
        op, args = canonical(first, g.traced)
        for node in g.compute:
            if node is first:
                break
            if canonical(node, g.traced)[0] not in ("identity", "contiguous", "transpose", "t", "getattr"):
                raise g.fail(node, "frontend.op", "ops before the matrix product are not fused into its prologue yet")
        out_meta = meta(first)
        assert out_meta is not None
        out_shape = out_meta[0]
        batched = len(out_shape) == 3
        if len(out_shape) not in (2, 3):
            raise g.fail(
                first, "frontend.shape", f"a matrix product giving shape {list(out_shape)}: 2-D and batched 3-D only"
            )
        self.shape = out_shape
        self.main = out_shape
        self.whole_rows = any(canonical(n, g.traced)[0] in REDUCTIONS + ROW_TO_ROW for n in g.compute if n is not first)
        if self.whole_rows and batched:
            raise g.fail(first, "frontend.op", "a reduction after a batched matrix product is not fused yet")
        a_node = args.get("input")
        b_node = args.get("other") if op == "matmul" else args.get("weight")
        a_src, a_t = self._operand_of(a_node)
        if op == "linear":
            if isinstance(b_node, str):
                b_src: tuple[str, str] | None = (f"model.{b_node}", "w")
            else:
                b_src = self.tensor_source(b_node) if hasattr(b_node, "op") else None
            b_t = True
        else:
            b_src, b_t = self._operand_of(b_node)
        if a_src is None or b_src is None:
            raise g.fail(
                first, "frontend.operand", f"`{op}`'s operands must be inputs or parameters (or their transposes)"
            )
        if a_t:
            raise g.fail(first, "frontend.operand", "a transposed left operand is not translated yet")
        lead = ["BT"] if batched else []
        ix = ["bt"] if batched else []
        a = self.arg(a_src[0], "f32", [*lead, "M", "K"], "a")
        b = self.arg(b_src[0], "f32", [*lead, *(["N", "K"] if b_t else ["K", "N"])], "b")
        for node in (a_node, b_node):
            m = meta(node) if hasattr(node, "op") else None
            if m is not None and KIR_DTYPES.get(m[1]) != "f32":
                raise g.fail(first, "frontend.operand", f"`{op}` of {m[1]} tensors: the seed takes float32 operands")
        b_index = "cols[None, :], ks[:, None]" if b_t else "ks[:, None], cols[None, :]"
        self.full_index = ", ".join([*ix, "rows[:, None]", "cols[None, :]"])
        body = []
        if batched:
            body.append("  bt = program_id(2)")
        body += [
            "  rows = program_id(0) * BM + arange(0, BM)",
            "  cols = program_id(1) * BN + arange(0, BN)",
            "  rmask = rows < M",
            "  cmask = cols < N",
            "  mask = rmask[:, None] & cmask[None, :]",
            "  acc = zeros(f32[BM, BN])",
            "  for k in 0 .. (K + BK - 1) / BK {",
            "    ks = k * BK + arange(0, BK)",
            "    kmask = ks < K",
            f"    at = load({a.name}[{', '.join([*ix, 'rows[:, None]', 'ks[None, :]'])}], mask = rmask[:, None] & kmask[None, :])",
            f"    bt_ = load({b.name}[{', '.join([*ix, b_index])}], mask = kmask[:, None] & cmask[None, :])"
            if not b_t
            else f"    bt_ = load({b.name}[{', '.join([*ix, b_index])}], mask = kmask[:, None] & cmask[None, :])",
            "    acc = dot<f32>(at, bt_, acc)",
            "  }",
        ]
        self.lines = body
        self.values[first.name] = ("full", "acc")
        if op == "linear" and args.get("bias") is not None:
            bias = args["bias"]
            src = (f"model.{bias}", "bias") if isinstance(bias, str) else self.tensor_source(bias)
            if src is None:
                raise g.fail(first, "frontend.operand", "`linear`'s bias must be an input or a parameter")
            ba = self.arg(src[0], "f32", ["N"], "bias")
            self.values[first.name] = ("full", self.var(f"acc + load({ba.name}[cols], mask = cmask)[None, :]"))
        started = False
        for node in g.compute:
            if node is first:
                started = True
                continue
            if not started:
                continue
            self._epilogue(node)
        results = g.results()
        if len(results) != 1:
            raise g.fail(results[-1], "frontend.output", "a matrix product's seed writes one output")
        (r,) = results
        kind, expr = self.values.get(r.name, ("", ""))
        shape, dtype = meta(r)  # type: ignore[misc]
        kdt = KIR_DTYPES.get(dtype, "f32")
        value = expr if kdt == "f32" else f"cast<{kdt}>({expr})"
        if kind == "row" and self.whole_rows:
            out = self.arg("outputs[0]", kdt, ["M"], "c", out=True)
            self.lines.append(f"  store({out.name}[rows[:, None]], {value}, mask = rmask[:, None])")
        elif kind == "full" and shape == out_shape:
            out = self.arg("outputs[0]", kdt, [*lead, "M", "N"], "c", out=True)
            self.lines.append(f"  store({out.name}[{self.full_index}], {value}, mask = mask)")
        else:
            raise g.fail(r, "frontend.output", "the output is not the matrix product's shape, nor one value per row")
        grid = "cdiv(M, BM), cdiv(N, BN)" + (", BT" if batched else "")
        params = {"BM": 64, "BN": 64, "BK": 32}
        where = ""
        if self.whole_rows:  # whole rows in a program: the row reductions in the epilogue
            if out_shape[-1] > 4096:
                raise g.fail(
                    first, "frontend.shape", f"rows of {out_shape[-1]} after a matrix product: at most 4096 are fused"
                )
            params = {"BM": 16, "BN": _next_pow2(out_shape[-1]), "BK": 32}
            where = "N <= BN"
        return self.seed("gemm", params, where, grid, self.lines, warps=8 if self.whole_rows else 4)

    def _operand_of(self, node) -> tuple[tuple[str, str] | None, bool]:
        """(binding, transposed) of a matrix product's operand: an input or a parameter, or its
        transpose (`.t()`, `.T`, `.transpose(-2, -1)`)."""
        if not hasattr(node, "op"):
            return None, False
        src = self.tensor_source(node)
        if src is not None:
            return src, False
        op, args = canonical(node, self.g.traced)
        if op in ("t", "transpose", "permute", "getattr") and node.all_input_nodes:
            inner = node.all_input_nodes[0]
            m = meta(inner)
            rank = len(m[0]) if m else 2
            if op == "transpose" and {args.get("dim0", 0) % rank, args.get("dim1", 1) % rank} != {rank - 2, rank - 1}:
                return None, False
            if op == "getattr" and node.args[1:] != ("T",) and node.args[1:] != ("mT",):
                return None, False
            if op == "permute":
                return None, False
            src = self.tensor_source(inner)
            return src, src is not None
        return None, False

    def _read(self, source: str, base: str, shape: tuple[int, ...], kdt: str) -> tuple[str, str] | None:
        batched = len(self.shape) == 3
        if shape == self.shape:
            a = self.arg(source, kdt, [*(["BT"] if batched else []), "M", "N"], base)
            return "full", self._load(a, f"{self.full_index}], mask = mask", kdt, "x")
        if _numel(shape) == self.shape[-1] and shape[-1] == self.shape[-1]:
            a = self.arg(source, kdt, ["N"], base)
            return "full", self._load(a, "cols], mask = cmask", kdt, "w", "[None, :]")
        if not batched and shape == (self.shape[0], 1):
            a = self.arg(source, kdt, ["M"], base)
            return "full", self._load(a, "rows], mask = rmask", kdt, "r", "[:, None]")
        return None

    def _epilogue(self, node) -> None:
        g = self.g
        op, args = canonical(node, g.traced)
        x = args.get("input")
        if op in ("identity", "contiguous") or (op == "dropout" and (not args.get("training", True) or _p(args) == 0)):
            self.values[node.name] = self.values[getattr(x, "name", "")]
            return
        if op in REDUCTIONS + ROW_TO_ROW:
            self._reduction(node, op, args)
            return
        expr = self.elementwise(node, op, args, self._operand)
        if expr is None:
            raise g.fail(node, "frontend.op", f"`{op}` in a matrix product's epilogue is not translated yet")
        kinds = {self.values[a.name][0] for a in node.all_input_nodes if a.name in self.values}
        self.values[node.name] = ("full" if "full" in kinds or not kinds else "row", self.var(expr))


class _Conv(_Emitter):
    """The conv form: a convolution (1-3 spatial dimensions, any stride, zero padding and
    dilation, one group) as an implicit GEMM: rows are the output positions of every batch
    element, columns the output channels, the reduction runs over input channels x taps; the
    elementwise ops after it (its bias, a per-channel vector, activations) in the epilogue."""

    def emit(self) -> Seed:
        g = self.g
        first = next(n for n in g.compute if canonical(n, g.traced)[0] in CONVS)
        if first is not g.compute[0]:
            raise g.fail(g.compute[0], "frontend.op", "ops before the convolution are not fused into it yet")
        conv = g.traced.module(first)
        x_node = first.args[0]
        src = self.tensor_source(x_node) if hasattr(x_node, "op") else None
        xm = meta(x_node) if hasattr(x_node, "op") else None
        ym = meta(first)
        if src is None or xm is None or ym is None:
            raise g.fail(first, "frontend.operand", "the convolution's input must be an input of forward")
        if conv.groups != 1:
            return _Grouped(g, self.name).emit()
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise g.fail(first, "frontend.op", "only zero padding given as numbers is translated")
        if xm[1] != "float32":
            raise g.fail(first, "frontend.operand", f"a convolution of {xm[1]} tensors: the seed takes float32")
        sp = len(conv.kernel_size)
        ks, st, pd, dl = (
            tuple(int(v) for v in t) for t in (conv.kernel_size, conv.stride, conv.padding, conv.dilation)
        )
        self.shape = ym[0]
        taps = 1
        for k in ks:
            taps *= k
        spatial = [f"S{i}" for i in range(sp)]
        outs = [f"(({spatial[i]} + {2 * pd[i] - dl[i] * (ks[i] - 1) - 1}) / {st[i]} + 1)" for i in range(sp)]
        x = self.arg(src[0], "f32", ["NB", "CI", *spatial], "x")
        w = self.arg(f"model.{first.target}.weight", "f32", ["CO", "K"], "w")
        # the GEMM's rows are the NB * P output positions, which may pass 2^31: the row index is
        # i64 (bounds.index-overflow), its batch and position, each below an i32 extent, are i32
        body = [
            "  rows = cast<i64>(program_id(0)) * cast<i64>(BM) + cast<i64>(arange(0, BM))",
            "  cols = program_id(1) * BN + arange(0, BN)",
            "  rmask = rows < cast<i64>(NB) * cast<i64>(P)",
            "  cmask = cols < CO",
            "  mask = rmask[:, None] & cmask[None, :]",
            "  nb = cast<i32>(rows / cast<i64>(P))",
            "  pix = cast<i32>(rows % cast<i64>(P))",
        ]
        rest = "pix"
        for i in range(sp - 1, -1, -1):  # the output position's coordinates, the last fastest
            if i == 0:
                body.append(f"  o{i} = {rest}")
            else:
                body.append(f"  od{i} = {outs[i]}")
                body.append(f"  o{i} = {rest} % od{i}")
                body.append(f"  q{i} = {rest} / od{i}")
                rest = f"q{i}"
        body += [
            "  acc = zeros(f32[BM, BN])",
            "  for k in 0 .. (K + BK - 1) / BK {",
            "    ks = k * BK + arange(0, BK)",
            "    kmask = ks < K",
            f"    ci = ks / {taps}",
        ]
        inner = 1
        for i in range(sp - 1, -1, -1):
            body.append(f"    tap{i} = (ks / {inner}) % {ks[i]}" if inner > 1 else f"    tap{i} = ks % {ks[i]}")
            inner *= ks[i]
        masks = ["rmask[:, None] & kmask[None, :]"]
        for i in range(sp):
            body.append(f"    pos{i} = o{i}[:, None] * {st[i]} - {pd[i]} + tap{i}[None, :] * {dl[i]}")
            if pd[i]:
                masks.append(f"pos{i} >= 0 & pos{i} < {spatial[i]}")
        coords = ", ".join(["nb[:, None]", "ci[None, :]", *[f"pos{i}" for i in range(sp)]])
        body += [
            f"    xt = load({x.name}[{coords}], mask = {' & '.join(masks)})",
            f"    wt = load({w.name}[cols[None, :], ks[:, None]], mask = kmask[:, None] & cmask[None, :])",
            "    acc = dot<f32>(xt, wt, acc)",
            "  }",
        ]
        self.lines = body
        self.full_index = "nb[:, None], cols[None, :], pix[:, None]"
        self.values[first.name] = ("full", "acc")
        if conv.bias is not None:
            b = self.arg(f"model.{first.target}.bias", "f32", ["CO"], "bias")
            self.values[first.name] = ("full", self.var(f"acc + load({b.name}[cols], mask = cmask)[None, :]"))
        for node in g.compute[1:]:
            op, args = canonical(node, g.traced)
            if op in ("identity", "contiguous") or (op == "dropout" and not args.get("training", True)):
                self.values[node.name] = self.values[getattr(args.get("input"), "name", "")]
                continue
            expr = self.elementwise(node, op, args, self._operand)
            if expr is None:
                if op in NOT_YET:
                    raise g.fail(
                        node, "frontend.op", f"`{op}` after a convolution is not translated yet: it needs {NOT_YET[op]}"
                    )
                raise g.fail(node, "frontend.op", f"`{op}` in a convolution's epilogue is not translated yet")
            self.values[node.name] = ("full", self.var(expr))
        (r,) = g.results()
        kind, expr = self.values.get(r.name, ("", ""))
        rm = meta(r)
        if kind != "full" or rm is None or rm[0] != self.shape:
            raise g.fail(r, "frontend.output", "the output is not the convolution's shape")
        y = self.arg("outputs[0]", "f32", ["NB", "CO", "P"], "y", out=True)
        self.lines.append(f"  store({y.name}[{self.full_index}], {expr}, mask = mask)")
        # every input at least as large as the dilated kernel: at least one output position
        fits = [f"{spatial[i]} >= {dl[i] * (ks[i] - 1) + 1 - 2 * pd[i]}" for i in range(sp)]
        where = ", ".join([f"K == CI * {taps}", "P == " + " * ".join(outs), *fits])
        params = {"BM": 64, "BN": 64, "BK": 32}
        return self.seed(
            "conv", params, where, "cdiv(NB * P, BM), cdiv(CO, BN)", self.lines, what=" (an implicit GEMM)"
        )

    def _read(self, source: str, base: str, shape: tuple[int, ...], kdt: str) -> tuple[str, str] | None:
        if kdt != "f32":
            return None
        if shape == self.shape:
            a = self.arg(source, "f32", ["NB", "CO", "P"], base)
            return "full", self._load(a, f"{self.full_index}], mask = mask", kdt, "x")
        if _along(shape, len(self.shape), 1, self.shape[1]):  # (C, 1, 1): one value a channel
            a = self.arg(source, "f32", ["CO"], base)
            return "full", self._load(a, "cols], mask = cmask", kdt, "w", "[None, :]")
        return None


class _Pool(_Emitter):
    """The pool form: max or average pooling (1-3 spatial dimensions, any window, stride,
    padding and dilation for max), one program per `BLOCK` output elements, the window walked
    by static loops; elementwise ops after it in the epilogue."""

    def emit(self) -> Seed:
        g = self.g
        first = g.compute[0]
        op, _ = canonical(first, g.traced)
        if op not in POOLS:
            raise g.fail(first, "frontend.op", "ops before the pooling are not fused into it yet")
        pool = g.traced.module(first)
        src, xm, ym = self._input(first, "the pooling's")
        sp = int(op[-2])
        if len(xm[0]) != sp + 2 or getattr(pool, "ceil_mode", False) or getattr(pool, "return_indices", False):
            raise g.fail(
                first,
                "frontend.op",
                f"`{op}` on a {len(xm[0])}-D input, or with ceil_mode or indices: not translated yet",
            )
        avg = op.startswith("nn.Avg")

        def per(v) -> tuple[int, ...]:
            return tuple(int(t) for t in v) if isinstance(v, tuple | list) else (int(v),) * sp

        ks = per(pool.kernel_size)
        st = per(pool.stride if pool.stride is not None else pool.kernel_size)
        pd = per(pool.padding)
        dl = per(getattr(pool, "dilation", 1))
        if avg and (not pool.count_include_pad and any(pd) or getattr(pool, "divisor_override", None)):
            raise g.fail(first, "frontend.op", "average pooling without the padding counted is not translated yet")
        self.shape = ym[0]
        spatial = [f"S{i}" for i in range(sp)]
        outs = [f"(({spatial[i]} + {2 * pd[i] - dl[i] * (ks[i] - 1) - 1}) / {st[i]} + 1)" for i in range(sp)]
        x = self.arg(src[0], "f32", ["NB", "C", *spatial], "x")
        body = _outputs(outs, "ch", "C")
        body.append(f"  acc = full(f32[BLOCK], {'0.0' if avg else '-inf'})")
        indent = "  "
        for i in range(sp):
            body.append(f"{indent}for tap{i} in 0 .. {ks[i]} {{")
            indent += "  "
        masks = ["mask"]
        for i in range(sp):
            body.append(f"{indent}pos{i} = o{i} * {st[i]} - {pd[i]} + tap{i} * {dl[i]}")
            masks.append(f"pos{i} >= 0 & pos{i} < {spatial[i]}")
        coords = ", ".join(["nb", "ch", *[f"pos{i}" for i in range(sp)]])
        load = f"load({x.name}[{coords}], mask = {' & '.join(masks)}, other = {'0.0' if avg else '-inf'})"
        body.append(f"{indent}acc = {'acc + ' + load if avg else 'maximum(acc, ' + load + ')'}")
        for _ in range(sp):
            indent = indent[:-2]
            body.append(f"{indent}}}")
        taps = 1
        for k in ks:
            taps *= k
        self.lines = body
        self.values[first.name] = ("full", self.var(f"acc / {taps}.0") if avg else "acc")
        self.full_index = "offs"
        self._epilogue("a pooling", "the pooling's")
        fits = [f"{spatial[i]} >= {dl[i] * (ks[i] - 1) + 1 - 2 * pd[i]}" for i in range(sp)]
        where = ", ".join(["T == NB * C * " + " * ".join(outs), *fits])
        return self.seed("pool", {"BLOCK": 256}, where, "cdiv(T, BLOCK)", self.lines)

    def _input(self, first, whose: str) -> tuple[tuple[str, str], tuple, tuple]:
        """(binding and name, (shape, dtype), the result's (shape, dtype)) of the first op's input,
        which these forms read: a float32 input of forward (a located error otherwise)."""
        x = first.args[0] if first.args else None
        src = self.tensor_source(x) if hasattr(x, "op") else None
        xm, ym = (meta(x) if hasattr(x, "op") else None), meta(first)
        if src is None or xm is None or ym is None or xm[1] != "float32":
            raise self.g.fail(first, "frontend.operand", f"{whose} input must be a float32 input of forward")
        return src, xm, ym

    def _epilogue(self, after: str, whose: str, dims: tuple[str, ...] = ("T",), index: str = "offs") -> None:
        """The elementwise ops after the first (the pooling or the convolution, `acc`), each
        element at `index` of the result viewed as `dims`, and the store of the result, which
        has the first op's shape."""
        g = self.g
        for node in g.compute[1:]:
            nop, args = canonical(node, g.traced)
            expr = self.elementwise(node, nop, args, self._operand)
            if expr is None:
                raise g.fail(node, "frontend.op", f"`{nop}` after {after} is not translated yet")
            self.values[node.name] = ("full", self.var(expr))
        (r,) = g.results()
        kind, expr = self.values.get(r.name, ("", ""))
        rm = meta(r)
        if kind != "full" or rm is None or rm[0] != self.shape:
            raise g.fail(r, "frontend.output", f"the output is not {whose} shape")
        y = self.arg("outputs[0]", "f32", list(dims), "y", out=True)
        self.lines.append(f"  store({y.name}[{index}], {expr}, mask = mask)")


class _Stats(_Pool):
    """The stats form (module docstring): x viewed as [NB, C, S] (the spatial dimensions merged
    by the binding), the statistics of one group in f32, three loops over it."""

    def emit(self) -> Seed:
        g = self.g
        first = g.compute[0]
        op, _ = canonical(first, g.traced)
        norm = g.traced.module(first)
        src, xm, ym = self._input(first, f"`{op}`'s")
        if len(xm[0]) < 3:
            raise g.fail(first, "frontend.operand", f"`{op}`'s input must be [N, C, ...]")
        self.shape = ym[0]
        x = self.arg(src[0], "f32", ["NB", "C", "S"], "x")  # (the flat index f stays in i32: `where`)
        grouped = op == "nn.GroupNorm"
        stats = grouped or norm.training or not norm.track_running_stats
        body = ["  pid = program_id(0)", "  lane = arange(0, BLOCK)"]
        params: dict[str, int] = {"BLOCK": 1024}
        if grouped:  # a program per (sample, group): the group's channels are consecutive
            params["G"] = int(norm.num_groups)
            self.preset_params["G"] = (str(first.target), "num_groups")
            body += ["  nb = pid / G", "  grp = pid % G", "  CG = C / G", "  L = CG * S"]
            index = "nb, ch, sp"
            where, grid = "C % G == 0, NB * C * S < 2147483648", "NB * G"
            chan = ["    ch = grp * CG + f / S", "    sp = f % S"]
        else:  # a program per channel, over the batch and the spatial dimensions
            body += ["  ch = pid", "  L = NB * S"]
            index = "nn, ch, sp"
            where, grid = "NB * C * S < 2147483648", "C"
            chan = ["    nn = f / S", "    sp = f % S"]
        eps = literal(norm.eps)
        groups = (int(ym[0][0]) * int(norm.num_groups)) if grouped else int(ym[0][1])
        split = _split(groups) if stats else 1
        if split > 1:  # too few groups to fill the GPU: each group split over SPLIT programs
            params["SPLIT"] = split
            body += ["  part = program_id(1)", "  CL = (L + SPLIT - 1) / SPLIT", "  lo = part * CL",
                     "  hi = where(lo + CL < L, lo + CL, L)"]  # fmt: skip
        first_f, extent = ("lo + k * BLOCK + lane", "CL") if split > 1 else ("k * BLOCK + lane", "L")
        bound = "hi" if split > 1 else "L"

        def walk(lines: list[str]) -> list[str]:
            return [
                f"  for k in 0 .. ({extent} + BLOCK - 1) / BLOCK {{", f"    f = {first_f}", f"    m = f < {bound}", *chan,
                f"    v = load({x.name}[{index}], mask = m)", *lines, "  }",
            ]  # fmt: skip

        if split > 1:
            prelude = list(body)
            body += self._split_stats(grid, eps)
            grid = f"{grid}, SPLIT"
            k1 = prelude + ["  acc = zeros(f32[BLOCK])", *walk(["    acc = acc + where(m, v, 0.0)"])]
            k1 += [
                "  cnt = cast<f32>(where(hi > lo, hi - lo, 0))",
                "  cmean = sum(acc, axis = 0) / where(cnt > 0.0, cnt, 1.0)",
            ]
            k1 += ["  acc2 = zeros(f32[BLOCK])", *walk(["    d = where(m, v - cmean, 0.0)", "    acc2 = acc2 + d * d"])]
            k1 += ["  store(pmean[pid * SPLIT + part], cmean)", "  store(pm2[pid * SPLIT + part], sum(acc2, axis = 0))"]
            self.first_kernel = (k1, grid)
        elif stats:
            body += ["  acc = zeros(f32[BLOCK])", *walk(["    acc = acc + where(m, v, 0.0)"])]
            body += ["  mean = sum(acc, axis = 0) / cast<f32>(L)", "  acc2 = zeros(f32[BLOCK])"]
            body += walk(["    d = where(m, v - mean, 0.0)", "    acc2 = acc2 + d * d"])
            body += [f"  rstd = rsqrt(sum(acc2, axis = 0) / cast<f32>(L) + {eps})"]
        else:  # eval mode: the running statistics
            rm = self.arg(f"model.{first.target}.running_mean", "f32", ["C"], "rmean")
            rv = self.arg(f"model.{first.target}.running_var", "f32", ["C"], "rvar")
            body += [f"  mean = load({rm.name}[ch])", f"  rstd = rsqrt(load({rv.name}[ch]) + {eps})"]
        self.lines = body
        self.lines += walk([])[:-1]  # the last loop, open: the result and the ops after it inside
        inside = len(self.lines)
        self.lines.append("  mask = m")
        y = "(v - mean) * rstd"
        if getattr(norm, "affine", False):
            w = self.arg(f"model.{first.target}.weight", "f32", ["C"], "w")
            b = self.arg(f"model.{first.target}.bias", "f32", ["C"], "b")
            mask = ", mask = m" if grouped else ""
            y = f"{y} * load({w.name}[ch]{mask}) + load({b.name}[ch]{mask})"
        self.values[first.name] = ("full", self.var(y))
        self._epilogue(f"`{op}`", f"`{op}`'s", ("NB", "C", "S"), index)
        self.lines[inside:] = ["  " + line for line in self.lines[inside:]]
        self.lines.append("  }")
        what = "group statistics" if grouped else "batch statistics" if stats else "running statistics"
        if split > 1:
            return self._two_kernels(params, where, grid, what, x, groups_expr="NB * G" if grouped else "C")
        return self.seed("stats", params, where, grid, self.lines, what=f" ({what})")

    def _split_stats(self, grid: str, eps: str) -> list[str]:
        """The group's mean and 1/std from the SPLIT parts' means and centred sums of squares
        (`pmean`, `pm2`, written by the first kernel), combined as Chan et al. do: the mean of
        the parts' means weighted by their counts; the sum of the parts' sums plus each part's
        count times its mean's squared distance from the mean."""
        return [
            "  q = arange(0, SPLIT)",
            "  qlo = q * CL",
            "  qhi = where(qlo + CL < L, qlo + CL, L)",
            "  qn = cast<f32>(where(qhi > qlo, qhi - qlo, 0))",
            "  pms = load(pmean[pid * SPLIT + q])",
            "  mean = sum(qn * pms, axis = 0) / cast<f32>(L)",
            "  dm = pms - mean",
            "  m2 = sum(load(pm2[pid * SPLIT + q]), axis = 0) + sum(qn * dm * dm, axis = 0)",
            f"  rstd = rsqrt(m2 / cast<f32>(L) + {eps})",
        ]

    def _two_kernels(self, params: dict[str, int], where: str, grid: str, what: str, x: Arg, groups_expr: str) -> Seed:
        """The split stats form (`kir.multi`): the first kernel writes each part's mean and centred
        sum of squares, the second combines its group's parts and writes the normalized part."""
        k1, _ = self.first_kernel
        names = {a.name for a in self.args}
        for scratch in ("pmean", "pm2"):
            if scratch in names:
                raise self.g.fail(self.g.compute[0], "frontend.operand", f"an argument is named `{scratch}`")
        ins = [a for a in self.args if not a.out]
        outs = [a for a in self.args if a.out]
        k1_params = {k: v for k, v in params.items() if k != "G" or "G" in "\n".join(k1)}
        scratch = f"f32[{groups_expr} * SPLIT]"
        text = (
            f"# stats seed of {self.g.file.name} ({what}) in two kernels, written by the frontend (agent/frontend)\n"
            f"scratch pmean: {scratch}\nscratch pm2: {scratch}\n\n"
            + kernel_text(f"{self.name}_parts", k1_params, [x.decl(), f"pmean: out global {scratch}",
                                                            f"pm2: out global {scratch}"], where, grid, k1)
            + "\n"
            + kernel_text(self.name, params, [*(a.decl() for a in ins), f"pmean: global {scratch}",
                                              f"pm2: global {scratch}", *(a.decl() for a in outs)], where, grid,
                          self.lines)
        )  # fmt: skip
        return Seed(self.name, "stats", text, ins + outs, {"bench": dict(params)}, self.notes, dict(self.preset_params))


class _Cols(_Rows):
    """The cols form: reductions along one dimension that is not the last (a softmax over the
    channels of [B, C, L], a sum over the rows of a matrix). The tensors as views [lead..., R,
    B] (the dimensions after the reduced one merged by the binding); a program per `BB` columns
    of one lead position, the whole reduced extent in one tile of `BLOCK x BB`."""

    e = "[None, :]"
    count = "R"

    def __init__(self, g: _Graph, name: str, p: int) -> None:
        super().__init__(g, name)
        self.p = p

    def _expected(self, rank: int) -> tuple[int, ...]:
        return (self.p,) if rank == len(self.main) else (-1,)

    def _across(self, name: str) -> str:
        return f"load({name}[bc], mask = bmask)[None, :]"

    def _merged(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) != len(self.main) or self.p + 1 >= len(shape):
            return shape
        return (*shape[: self.p + 1], _numel(shape[self.p + 1 :]))

    def emit(self) -> Seed:
        g = self.g
        main = self.main = self._main_shape()
        p = self.p
        self.merge = 1
        self.shape = self._merged(main)
        self.rank = len(self.shape)
        self.form = "rows"
        lead = [f"L{i}" for i in range(p)]
        self.full_dims = [*lead, "R", "B"]
        self.row_dims = [*lead, "B"]
        body = ["  rr = arange(0, BLOCK)", "  bc = program_id(0) * BB + arange(0, BB)", "  rmask = rr < R",
                "  bmask = bc < B", "  mask = rmask[:, None] & bmask[None, :]"]  # fmt: skip
        index: list[str] = []
        rest = "program_id(1)"
        for i in range(len(lead) - 1, -1, -1):
            if i == 0:
                body.append(f"  lead{i} = {rest}")
            else:
                body.append(f"  lead{i} = {rest} % {lead[i]}")
                body.append(f"  rest{i} = {rest} / {lead[i]}")
                rest = f"rest{i}"
            index.insert(0, f"lead{i}")
        self.row_index = [*index, "bc[None, :]"]
        self.full_index = ", ".join([*index, "rr[:, None]", "bc[None, :]"])
        self.lines = body
        self.totals = []
        for node in g.compute:
            self._node(node)
        stores = []
        for i, r in enumerate(g.results()):
            kind, expr = self.values[r.name]
            _, dtype = meta(r)  # type: ignore[misc]
            kdt = KIR_DTYPES.get(dtype, "f32")
            value = expr if kdt == "f32" else f"cast<{kdt}>({expr})"
            if kind == "full":
                out = self.arg(f"outputs[{i}]", kdt, self.full_dims, "y" if i == 0 else f"y{i}", out=True)
                stores.append(f"  store({out.name}[{self.full_index}], {value}, mask = mask)")
            elif kind == "row":
                out = self.arg(f"outputs[{i}]", kdt, self.row_dims, "y" if i == 0 else f"y{i}", out=True)
                stores.append(f"  store({out.name}[{', '.join(self.row_index)}], {value}, mask = bmask[None, :])")
            else:
                raise g.fail(r, "frontend.output", "forward returns a value that does not depend on its inputs")
        extent = self.shape[p]
        if extent > 16384:
            raise g.fail(
                next(n for n in g.compute if self._reduces(n)), "frontend.shape",
                f"a reduction over {extent} elements of a middle dimension: the seed holds them in one tile, at most 16384",
            )  # fmt: skip
        block = _next_pow2(extent)
        bb = max(1, min(64, 8192 // block))
        grid = "cdiv(B, BB)" + (f", {' * '.join(lead)}" if lead else "")
        return self.seed("cols", {"BLOCK": block, "BB": bb}, "R <= BLOCK", grid, self.lines + stores)

    def _read(self, source: str, base: str, shape: tuple[int, ...], kdt: str) -> tuple[str, str] | None:
        if self._merged(shape) == self.shape:
            a = self.arg(source, kdt, self.full_dims, base)
            return "full", self._load(a, f"{self.full_index}], mask = mask", kdt, "x")
        if _along(shape, len(self.main), self.p, self.main[self.p]):  # (C, 1): one value along the reduced dimension
            a = self.arg(source, kdt, ["R"], base)
            return "full", self._load(a, "rr], mask = rmask", kdt, "w", "[:, None]")
        return None


def _middle(g: _Graph) -> int | None:
    """The one dimension, not the last, that every reduction of the graph takes, if there is one."""
    found = set()
    for node in g.compute:
        op, args = canonical(node, g.traced)
        x = args.get("input")
        m = meta(x) if hasattr(x, "op") else None
        if m is None or op not in REDUCTIONS + ROW_TO_ROW:
            continue
        dims = _dims(op, args, len(m[0]))
        if dims is None or len(dims) != 1 or dims[0] == len(m[0]) - 1:
            return None
        found.add(dims[0])
    return found.pop() if len(found) == 1 else None


class _Grouped(_Pool):
    """A grouped convolution (a depthwise one: one input channel a group) as a direct one: a
    program per `BLOCK` outputs, the group's input channels and the taps walked by static
    loops, its bias and the elementwise ops after it in the epilogue (the pool form's frame)."""

    def emit(self) -> Seed:
        g = self.g
        first = g.compute[0]
        conv = g.traced.module(first)
        src, xm, ym = self._input(first, "the convolution's")
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise g.fail(first, "frontend.op", "only zero padding given as numbers is translated")
        sp = len(conv.kernel_size)
        ks, st, pd, dl = (
            tuple(int(v) for v in t) for t in (conv.kernel_size, conv.stride, conv.padding, conv.dilation)
        )
        per_in = conv.in_channels // conv.groups  # input channels of a group
        per_out = conv.out_channels // conv.groups
        taps = 1
        for k in ks:
            taps *= k
        self.shape = ym[0]
        spatial = [f"S{i}" for i in range(sp)]
        outs = [f"(({spatial[i]} + {2 * pd[i] - dl[i] * (ks[i] - 1) - 1}) / {st[i]} + 1)" for i in range(sp)]
        x = self.arg(src[0], "f32", ["NB", "CI", *spatial], "x")
        w = self.arg(f"model.{first.target}.weight", "f32", ["CO", "K"], "w")
        body = [*_outputs(outs, "co", "CO"), f"  first = (co / {per_out}) * {per_in}"]
        body.append("  acc = zeros(f32[BLOCK])")
        body.append(f"  for c in 0 .. {per_in} {{")
        indent = "    "
        for i in range(sp):
            body.append(f"{indent}for tap{i} in 0 .. {ks[i]} {{")
            indent += "  "
        masks = ["mask"]
        for i in range(sp):
            body.append(f"{indent}pos{i} = o{i} * {st[i]} - {pd[i]} + tap{i} * {dl[i]}")
            masks.append(f"pos{i} >= 0 & pos{i} < {spatial[i]}")
        tap = "c"
        for i in range(sp):
            tap = f"({tap}) * {ks[i]} + tap{i}"
        coords = ", ".join(["nb", "first + c", *[f"pos{i}" for i in range(sp)]])
        body.append(f"{indent}xv = load({x.name}[{coords}], mask = {' & '.join(masks)})")
        body.append(f"{indent}wv = load({w.name}[co, {tap}], mask = mask)")
        body.append(f"{indent}acc = acc + xv * wv")
        for _ in range(sp + 1):
            indent = indent[:-2]
            body.append(f"{indent}}}")
        self.lines = body
        self.full_index = "offs"
        self.values[first.name] = ("full", "acc")
        if conv.bias is not None:
            b = self.arg(f"model.{first.target}.bias", "f32", ["CO"], "bias")
            self.values[first.name] = ("full", self.var(f"acc + load({b.name}[co], mask = mask)"))
        self._epilogue("a grouped convolution", "the convolution's")
        fits = [f"{spatial[i]} >= {dl[i] * (ks[i] - 1) + 1 - 2 * pd[i]}" for i in range(sp)]
        where = ", ".join(
            [f"CI * {per_out} == CO * {per_in}", f"K == {per_in * taps}",
             "T == NB * CO * " + " * ".join(outs), *fits]
        )  # fmt: skip
        what = f" ({conv.groups} groups, direct)"
        return self.seed("grouped-conv", {"BLOCK": 256}, where, "cdiv(T, BLOCK)", self.lines, what=what)


class _Transposed(_Pool):
    """A transposed convolution as a direct gather: output position o of a spatial dimension
    takes tap t from input position (o + padding - t x dilation) / stride, where that is a
    whole number inside the input; a program per `BLOCK` outputs, the input channels walked by
    a loop and the taps by static ones (without dilation, only the taps of o's phase, t = (o +
    padding) % stride + j x stride: a stride-2 2-D convolution visits a quarter of them), its
    bias and the elementwise ops after it in the epilogue (the pool form's frame)."""

    def emit(self) -> Seed:
        g = self.g
        first = g.compute[0]
        conv = g.traced.module(first)
        src, xm, ym = self._input(first, "the convolution's")
        sp = len(conv.kernel_size)
        if conv.groups != 1 or conv.padding_mode != "zeros" or len(xm[0]) != sp + 2:
            raise g.fail(
                first, "frontend.op", "a transposed convolution with groups, non-zero padding or no batch dimension "
                "is not translated yet",
            )  # fmt: skip
        ks, st, pd, dl, op = (
            tuple(int(v) for v in t)
            for t in (conv.kernel_size, conv.stride, conv.padding, conv.dilation, conv.output_padding)
        )
        taps = 1
        for k in ks:
            taps *= k
        self.shape = ym[0]
        spatial = [f"S{i}" for i in range(sp)]
        # (S - 1) x stride - 2 x padding + dilation x (kernel - 1) + output_padding + 1
        outs = [f"({spatial[i]} * {st[i]} + {dl[i] * (ks[i] - 1) + op[i] + 1 - st[i] - 2 * pd[i]})" for i in range(sp)]
        x = self.arg(src[0], "f32", ["NB", "CI", *spatial], "x")
        w = self.arg(f"model.{first.target}.weight", "f32", ["CI", "CO", "KT"], "w")  # [CI, CO, taps...], taps merged
        body = [*_outputs(outs, "co", "CO"), "  acc = zeros(f32[BLOCK])", "  for c in 0 .. CI {"]
        indent = "    "
        for i in range(sp):  # with no dilation, only every stride-th tap lands: those of o's phase
            phased = dl[i] == 1 and st[i] > 1
            body.append(f"{indent}for j{i} in 0 .. {-(-ks[i] // st[i]) if phased else ks[i]} {{")
            indent += "  "
        masks = ["mask"]
        for i in range(sp):
            if dl[i] == 1 and st[i] > 1:
                body.append(f"{indent}tap{i} = (o{i} + {pd[i]}) % {st[i]} + j{i} * {st[i]}")
                body.append(f"{indent}num{i} = o{i} + {pd[i]} - tap{i}")
                masks.append(f"tap{i} < {ks[i]} & num{i} >= 0 & num{i} / {st[i]} < {spatial[i]}")
            else:
                body.append(f"{indent}tap{i} = j{i}")
                body.append(f"{indent}num{i} = o{i} + {pd[i]} - tap{i} * {dl[i]}")
                masks.append(f"num{i} >= 0 & num{i} % {st[i]} == 0 & num{i} / {st[i]} < {spatial[i]}")
            body.append(f"{indent}pos{i} = num{i} / {st[i]}")
        tap = "tap0"
        for i in range(1, sp):
            tap = f"({tap}) * {ks[i]} + tap{i}"
        coords = ", ".join(["nb", "c", *[f"pos{i}" for i in range(sp)]])
        body.append(f"{indent}xv = load({x.name}[{coords}], mask = {' & '.join(masks)})")
        body.append(f"{indent}wv = load({w.name}[c, co, {tap}], mask = {' & '.join(masks)})")
        body.append(f"{indent}acc = acc + xv * wv")
        for _ in range(sp + 1):
            indent = indent[:-2]
            body.append(f"{indent}}}")
        self.lines = body
        self.values[first.name] = ("full", "acc")
        if conv.bias is not None:
            b = self.arg(f"model.{first.target}.bias", "f32", ["CO"], "bias")
            self.values[first.name] = ("full", self.var(f"acc + load({b.name}[co], mask = mask)"))
        self._epilogue("a transposed convolution", "the convolution's")
        where = ", ".join([f"KT == {taps}", "T == NB * CO * " + " * ".join(outs)])
        what = " (transposed, direct)"
        return self.seed("transposed-conv", {"BLOCK": 256}, where, "cdiv(T, BLOCK)", self.lines, what=what)


def _outputs(outs: list[str], channel: str, channels: str) -> list[str]:
    """The statements that take a program's `BLOCK` flat output positions (`offs`, `mask`) apart
    into the spatial positions `o0, o1, ...` (extents `outs`), the channel and the batch `nb`:
    the frame of the direct forms (pool, grouped and transposed convolutions)."""
    body = ["  offs = program_id(0) * BLOCK + arange(0, BLOCK)", "  mask = offs < T"]
    rest = "offs"
    for i in range(len(outs) - 1, -1, -1):
        body += [f"  od{i} = {outs[i]}", f"  o{i} = {rest} % od{i}", f"  q{i} = {rest} / od{i}"]
        rest = f"q{i}"
    return [*body, f"  {channel} = {rest} % {channels}", f"  nb = {rest} / {channels}"]


def _along(shape: tuple[int, ...], rank: int, dim: int, size: int) -> bool:
    """Whether a tensor of `shape`, broadcast against one of `rank` dimensions (aligned on the
    right, as PyTorch does), holds `size` values along `dim` and one along every other."""
    if len(shape) > rank:
        return False
    padded = (1,) * (rank - len(shape)) + tuple(shape)
    return padded[dim] == size and all(d == 1 for i, d in enumerate(padded) if i != dim)


def _dims(op: str, args: dict, rank: int) -> tuple[int, ...] | None:
    """The dimensions a reduction (or a row op) takes, each in 0 .. rank - 1; None for an op
    that is not one, or for "all of them"."""
    if op == "layer_norm":
        shape = tuple(args.get("normalized_shape") or ())
        return tuple(range(rank - len(shape), rank)) if shape else None
    if op not in REDUCTIONS + ROW_TO_ROW:
        return None
    dim = args.get("dim", 1 if op == "cosine_similarity" else None if op in REDUCTIONS else -1)
    if dim is None:
        return None
    dims = tuple(dim) if isinstance(dim, tuple | list) else (dim,)
    if not all(isinstance(d, int) for d in dims) or rank == 0:
        return None
    return tuple(sorted(d % rank for d in dims))


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n if shape else 0
