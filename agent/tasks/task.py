"""Loading a task folder (see `agent.tasks` for the format) and making its instances.

`load_task(folder)` reads `task.toml` and checks the metadata; every problem is a `TaskError`
carrying a `Diagnostic` located in the file (a key's line in task.toml, the traceback's line in
reference.py). It runs none of the task's code: `reference.py` is imported on first use of
`Task.module`, where what task.toml says of it is checked too (the variables the presets and
`vary` set exist, the comparison hooks are functions). So a caller that only plans (`kir run`,
`kir bench`: the programs, the presets) never runs the reference in its own process; the
harness's checker process does, and a reference that exits or hangs at import takes the
checker down, not the caller.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import os
import random
import re
import sys
import tomllib
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kir.diagnostics import Diagnostic, KirError, Span
from lowering import targets as lowering_targets
from tactics.replay import Step, read_entry

DTYPES = ("f16", "bf16", "f32", "f64")
MODES = ("train", "eval")
SCALE_PREFIX = "scale:"  # a preset named `scale:0.01`: every size variable of the reference scaled
# a size variable: a top-level integer literal of the reference at least this large (smaller ones,
# such as a kernel size, a stride or a group count, are kept as they are)
SIZE_FLOOR = 64
PRECISIONS = ("f32", "f64")
COMPARES = ("close", "exact")
_BIND = re.compile(r"^(inputs|outputs)\[(\d+)\]$|^model((?:\.[A-Za-z_][A-Za-z0-9_]*)+)$")
_counter = itertools.count()


class TaskError(KirError):
    """A task that cannot be loaded or instantiated: one located diagnostic."""


def _error(rule: str, message: str, file: Path, line: int = 1, hint: str = "") -> TaskError:
    return TaskError(Diagnostic(rule, "error", Span(line, 1, line, 2, str(file)), message, hint))


@dataclass(frozen=True)
class Preset:
    name: str
    variables: dict[str, int | float]  # module-level variables of reference.py to override


@dataclass(frozen=True)
class Program:
    """A KIR program of the task, with its compile-time parameters per preset."""

    name: str
    file: Path
    params: dict[str, dict[str, int]] = field(default_factory=dict)  # preset -> {param: value}
    # the backends it runs through, where not every backend of its level lowers it (empty: all)
    backends: tuple[str, ...] = ()

    def params_for(self, preset: str) -> dict[str, int]:
        return dict(self.params.get(preset, {}))


@dataclass(frozen=True)
class Replayed:
    """A program of the task made by replaying a recorded tactic sequence on another of its
    programs, `base` (tactics.replay: the format, and how its parameters are derived).
    `params`: the entry's own per preset, over the derived ones; `backends` as a `Program`'s
    (empty: the base's)."""

    name: str
    base: str
    steps: tuple[Step, ...]
    params: dict[str, dict[str, int]] = field(default_factory=dict)
    backends: tuple[str, ...] = ()


@dataclass(frozen=True)
class Binding:
    """Where one kernel argument's tensor comes from: ("inputs", i), ("outputs", i) or
    ("model", "weight.path")."""

    kind: str
    index: int | str


@dataclass
class Task:
    name: str
    folder: Path
    reference: Path  # reference.py, or the KernelBench file itself
    description: str = ""
    dtype: str | None = None  # None: inputs as get_inputs() makes them
    # the mode the models run in: "train" for a bare KernelBench file (KernelBench calls neither
    # train() nor eval(), so BatchNorm takes batch statistics and Dropout drops), else task.toml's
    mode: str = "eval"
    reference_precision: str = "f64"
    flops: str = "0"
    bytes: str | None = None  # None: the sizes of the inputs, outputs and parameters
    tolerance: dict[str, float] = field(default_factory=dict)
    presets: dict[str, Preset] = field(default_factory=dict)
    bind: dict[str, Binding] = field(default_factory=dict)
    compare: dict[str, str] = field(default_factory=dict)  # output name -> how
    programs: dict[str, Program] = field(default_factory=dict)
    # the programs made by a recorded tactic sequence from one of `programs` (agent.tasks.replay)
    replays: dict[str, Replayed] = field(default_factory=dict)
    # variable -> (lowest, highest, step): the shapes a seed of the protocol may draw instead
    # of the preset's (a kernel right only for the preset's shapes is found out)
    vary: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # preset -> the values of kernel shape symbols that are not variables of the reference (a
    # frontend seed's `M`, `N` for a file's `batch_size`, `dim`): what the cost model is given
    shapes: dict[str, dict[str, int]] = field(default_factory=dict)
    _module: ModuleType | None = field(default=None, repr=False)
    _traces: dict[str, list[Any]] = field(default_factory=dict, repr=False)  # agent.tasks.replay's
    _module_error: TaskError | None = field(default=None, repr=False)

    @property
    def reference_file(self) -> Path:
        return self.reference

    @property
    def module(self) -> ModuleType:
        """reference.py, imported now if it was not (a `TaskError` if it cannot be, or if it does
        not define what task.toml names)."""
        if self._module_error is not None:
            raise self._module_error
        if self._module is None:
            try:
                module = _import(self.reference)
                _check_module(self, module)
            except TaskError as err:
                self._module_error = err
                raise
            self._module = module
        return self._module

    def draw_shape(self, rng: random.Random, names: list[str] | None = None) -> dict[str, int]:
        """Values for the `vary` variables (all of them, or `names`), drawn from their ranges."""
        return {
            name: rng.randrange(lo, hi + 1, step)
            for name, (lo, hi, step) in self.vary.items()
            if names is None or name in names
        }

    def shape_values(self, preset: str) -> dict[str, int]:
        """The integer shape values of a preset: its variables and its `[shapes]` table."""
        values = self.preset(preset).variables if preset != "default" else {}
        ints = {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}
        return {**ints, **self.shapes.get(preset, {})}

    def preset(self, name: str) -> Preset:
        if name == "default":
            return Preset("default", {})
        if name.startswith(SCALE_PREFIX):
            return self.scaled(name)
        if name not in self.presets:
            known = ", ".join(["default", *self.presets])
            raise _error(
                "task.preset", f"task `{self.name}` has no preset `{name}`", self._toml, 1, f"presets: {known}"
            )
        return self.presets[name]

    def scaled(self, name: str) -> Preset:
        """The preset `scale:F`: every size variable of the reference (a top-level integer
        literal of at least `SIZE_FLOOR`) times F, at least 16 and a multiple of 16 where the
        size was one; the values derived from them are computed again (`_apply`)."""
        try:
            factor = float(name[len(SCALE_PREFIX) :])
        except ValueError:
            factor = -1.0
        if not 0 < factor <= 1:
            raise _error("task.preset", f"`{name}`: the scale is a number in (0, 1]", self._toml, 1, "e.g. scale:0.01")
        variables: dict[str, int | float] = {}
        for key, value in _literals(self.reference).items():
            if isinstance(value, int) and not isinstance(value, bool) and value >= SIZE_FLOOR:
                size = max(1, round(value * factor))
                if value % 16 == 0:
                    size = max(16, round(size / 16) * 16)
                variables[key] = size
        return Preset(name, variables)

    @property
    def _toml(self) -> Path:
        return self.folder / "task.toml"

    def variables(self, preset: str) -> dict[str, Any]:
        """The module-level variables of reference.py under a preset."""
        self._apply(self.preset(preset))
        return {k: v for k, v in vars(self.module).items() if isinstance(v, int | float) and not k.startswith("_")}

    def counted_flops(self, preset: str) -> float:
        env = self.variables(preset)
        try:
            return float(_evaluate(self.flops, env))
        except (ValueError, KeyError, ZeroDivisionError) as err:
            raise _error(
                "task.flops", f"cannot evaluate flops `{self.flops}`: {err}", self._toml, _line_of(self._toml, "flops")
            ) from None

    def counted_bytes(self, preset: str) -> float | None:
        """The task's own count of the bytes a kernel must move (None: count the tensors)."""
        if self.bytes is None:
            return None
        try:
            return float(_evaluate(self.bytes, self.variables(preset)))
        except (ValueError, KeyError, ZeroDivisionError) as err:
            raise _error(
                "task.bytes", f"cannot evaluate bytes `{self.bytes}`: {err}", self._toml, _line_of(self._toml, "bytes")
            ) from None

    def _apply(self, preset: Preset, shape: dict[str, int] | None = None) -> None:
        """Set the reference's module-level variables for a preset (and a drawn shape), then
        compute again the top-level values derived from them (`hidden = 4 * dim`), in order."""
        module = self.module
        given = {**preset.variables, **(shape or {})}
        for key, value in self._defaults.items():
            setattr(module, key, value)
        for key, value in given.items():
            setattr(module, key, value)
        for target, code, line in _derived(self.reference):
            if target in given:
                continue
            self.call(f"the value of `{target}` (line {line})", exec, code, vars(module))

    @property
    def _defaults(self) -> dict[str, Any]:
        if not hasattr(self, "_saved_defaults"):
            names = {k for p in self.presets.values() for k in p.variables} | set(self.vary)
            names |= set(_literals(self.reference))
            self._saved_defaults = {k: getattr(self.module, k) for k in names if hasattr(self.module, k)}
        return self._saved_defaults

    def call(self, what: str, fn, *args):
        """Call the reference's code; its exceptions become `task.reference` diagnostics at the
        reference.py line that raised."""
        try:
            return fn(*args)
        except Exception as err:  # noqa: BLE001 - any failure of user code is a diagnostic
            line = 1
            for frame in traceback.extract_tb(err.__traceback__):
                if Path(frame.filename).resolve() == self.reference_file.resolve():
                    line = frame.lineno or 1
            if _out_of_device_memory(err):
                raise _error(
                    "harness.device-memory",
                    f"{what} ran out of device memory: {type(err).__name__}: {err}",
                    self.reference_file,
                    line,
                    "the GPU is shared with the checks running beside this one (a search retries the evaluation)",
                ) from None
            raise _error(
                "task.reference", f"{what} raised {type(err).__name__}: {err}", self.reference_file, line
            ) from None


def _top_level(reference: Path) -> list[ast.Assign]:
    """The reference's top-level assignments to one plain name."""
    try:
        tree = ast.parse(reference.read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    return [
        node
        for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    ]


def _name(node: ast.Assign) -> str:
    target = node.targets[0]
    assert isinstance(target, ast.Name)  # _top_level's
    return target.id


def _literals(reference: Path) -> dict[str, Any]:
    """The top-level variables the reference sets to a number literal (`batch_size = 4096`)."""
    found: dict[str, Any] = {}
    for node in _top_level(reference):
        value = node.value
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
            value = value.operand
        if isinstance(value, ast.Constant) and isinstance(value.value, int | float):
            found[_name(node)] = ast.literal_eval(node.value)
    return found


def _derived(reference: Path) -> list[tuple[str, Any, int]]:
    """The top-level assignments computed from other top-level names (`hidden = 4 * dim`,
    `out_len = (length - k) // stride + 1`), compiled, in the file's order: what a preset
    that changes a size must compute again. Calls other than `int`, `min`, `max`, `round` and
    `abs` make an assignment not a derived size (a tensor, a model: left alone)."""
    plain = {"int", "min", "max", "round", "abs", "float"}
    found = []
    for node in _top_level(reference):
        names = [n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)]
        calls = [n for n in ast.walk(node.value) if isinstance(n, ast.Call)]
        if not names or any(not isinstance(c.func, ast.Name) or c.func.id not in plain for c in calls):
            continue
        if any(isinstance(n, ast.Attribute | ast.Lambda | ast.Subscript) for n in ast.walk(node.value)):
            continue
        code = compile(ast.Module([node], []), str(reference), "exec")
        found.append((_name(node), code, node.lineno))
    return found


def _out_of_device_memory(err: BaseException) -> bool:
    """A GPU allocation that failed (torch's OutOfMemoryError, or a CUDA error saying so): the
    device's state, not the reference's fault."""
    text = str(err)
    return type(err).__name__ in ("OutOfMemoryError", "AcceleratorError") and "out of memory" in text


def _line_of(file: Path, key: str) -> int:
    """The line of a key or a [section] in a TOML file (1 when it cannot be found)."""
    try:
        lines = file.read_text().splitlines()
    except OSError:
        return 1
    pattern = re.compile(rf"^\s*(\[+\s*)?{re.escape(key)}(\s*\]+|\s*=)")
    for n, text in enumerate(lines, 1):
        if pattern.match(text):
            return n
    return 1


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Add, ast.Sub, ast.Mult, ast.Div,
            ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd)  # fmt: skip


def _evaluate(expr: str, env: dict[str, Any]) -> float:
    """A small arithmetic expression over the preset's variables (no calls, no attributes)."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as err:
        raise ValueError(f"not an expression: {err.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ValueError(f"only arithmetic on numbers and variables is allowed, not {type(node).__name__}")
        if isinstance(node, ast.Name) and node.id not in env:
            raise ValueError(f"unknown variable `{node.id}`")
    return eval(compile(tree, "<flops>", "eval"), {"__builtins__": {}}, dict(env))  # noqa: S307 - checked above


def _import(reference: Path) -> ModuleType:
    name = f"kir_task_{next(_counter)}_{re.sub(r'[^A-Za-z0-9_]', '_', reference.parent.name)}"
    spec = importlib.util.spec_from_file_location(name, reference)
    if spec is None or spec.loader is None:
        raise _error("task.reference", "cannot import the reference", reference)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise _error("task.reference", f"syntax error: {err.msg}", reference, err.lineno or 1) from None
    except Exception as err:  # noqa: BLE001
        line = 1
        for frame in traceback.extract_tb(err.__traceback__):
            if Path(frame.filename).resolve() == reference.resolve():
                line = frame.lineno or 1
        raise _error("task.reference", f"importing raised {type(err).__name__}: {err}", reference, line) from None
    for required in ("Model", "get_inputs"):
        if not hasattr(module, required):
            raise _error(
                "task.reference",
                f"reference.py defines no `{required}`",
                reference,
                hint="the KernelBench format: class Model(nn.Module), get_inputs(), get_init_inputs()",
            )
    if not hasattr(module, "get_init_inputs"):
        vars(module)["get_init_inputs"] = list
    return module


def load_task(folder: str | Path) -> Task:
    """Load a task folder, or a lone KernelBench problem file (a `.py` file: no metadata)."""
    path = Path(folder)
    reference = path if path.suffix == ".py" else path / "reference.py"
    if not reference.is_file():
        raise _error("task.missing", f"no task at {path}: {reference.name} is missing", reference)
    task = Task(
        name=reference.stem if path.suffix == ".py" else path.name, folder=reference.parent, reference=reference
    )
    if path.suffix == ".py":
        task.mode = "train"  # as KernelBench runs a problem file
        return task
    toml = path / "task.toml"
    if not toml.exists():
        return task
    try:
        meta = tomllib.loads(toml.read_text())
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"line (\d+)", str(err))
        raise _error("task.toml", f"task.toml is not valid TOML: {err}", toml, int(m.group(1)) if m else 1) from None
    _read_meta(task, meta, toml)
    return task


def _read_meta(task: Task, meta: dict, toml: Path) -> None:
    known = {
        "description",
        "dtype",
        "reference_precision",
        "flops",
        "bytes",
        "tolerance",
        "presets",
        "bind",
        "outputs",
        "programs",
        "vary",
        "mode",
        "shapes",
    }
    for key in meta:
        if key not in known:
            raise _error(
                "task.toml", f"unknown key `{key}`", toml, _line_of(toml, key), f"keys: {', '.join(sorted(known))}"
            )

    for key in ("tolerance", "presets", "bind", "outputs", "programs", "vary", "shapes"):
        if not isinstance(meta.get(key, {}), dict):
            raise _error("task.toml", f"`{key}` must be a table", toml, _line_of(toml, key))

    def number(v) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    def text(key: str, choices: tuple[str, ...] | None = None) -> str | None:
        value = meta.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or (choices and value not in choices):
            want = f"one of {', '.join(choices)}" if choices else "a string"
            raise _error("task.toml", f"`{key}` must be {want}, not {value!r}", toml, _line_of(toml, key))
        return value

    task.description = text("description") or ""
    task.dtype = text("dtype", DTYPES)
    task.reference_precision = text("reference_precision", PRECISIONS) or "f64"
    task.mode = text("mode", MODES) or "eval"
    task.flops = text("flops") or "0"
    task.bytes = text("bytes")
    tolerance = meta.get("tolerance", {})
    if (
        not isinstance(tolerance, dict)
        or set(tolerance) - {"rtol", "atol"}
        or not all(number(v) and v >= 0 for v in tolerance.values())
    ):
        raise _error(
            "task.toml", "`tolerance` is a table of non-negative `rtol` and `atol`", toml, _line_of(toml, "tolerance")
        )
    task.tolerance = {k: float(v) for k, v in tolerance.items()}

    for name, variables in meta.get("presets", {}).items():
        if not isinstance(variables, dict) or not all(number(v) for v in variables.values()):
            raise _error(
                "task.toml", f"preset `{name}` must map variables to numbers", toml, _line_of(toml, f"presets.{name}")
            )
        task.presets[name] = Preset(name, dict(variables))

    for name, values in meta.get("shapes", {}).items():
        ints = isinstance(values, dict) and all(isinstance(v, int) and not isinstance(v, bool) for v in values.values())
        if not ints or (name not in task.presets and name != "default"):
            raise _error(
                "task.toml",
                f"shapes `{name}` must map shape symbols to integers, for a preset of the task",
                toml,
                _line_of(toml, f"shapes.{name}"),
            )
        task.shapes[name] = dict(values)

    for var, spec in meta.get("vary", {}).items():
        ints = isinstance(spec, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in spec)
        if not ints or len(spec) not in (2, 3) or not 0 <= spec[0] <= spec[1] or (len(spec) == 3 and spec[2] < 1):
            raise _error(
                "task.vary",
                f"vary `{var}` must be [lowest, highest] or [lowest, highest, step] of integers, 0 <= lowest <= highest",
                toml,
                _line_of(toml, var),
            )
        task.vary[var] = (spec[0], spec[1], spec[2] if len(spec) == 3 else 1)

    for arg, source in meta.get("bind", {}).items():
        m = _BIND.match(source) if isinstance(source, str) else None
        if m is None:
            raise _error(
                "task.bind",
                f"cannot bind `{arg}` to {source!r}",
                toml,
                _line_of(toml, arg),
                "use inputs[i], outputs[i] or model.<parameter>",
            )
        task.bind[arg] = Binding(m.group(1), int(m.group(2))) if m.group(1) else Binding("model", m.group(3)[1:])

    for out, spec in meta.get("outputs", {}).items():
        how = spec.get("compare", "close") if isinstance(spec, dict) else None
        if not isinstance(how, str) or not (how in COMPARES or how.startswith("reference.py:")):
            raise _error(
                "task.toml",
                f"output `{out}`: compare is close, exact or reference.py:<function>",
                toml,
                _line_of(toml, out),
            )
        task.compare[out] = how

    for name, spec in meta.get("programs", {}).items():
        file = spec.get("file") if isinstance(spec, dict) else None
        recorded = _recorded(name, spec, toml) if isinstance(spec, dict) and "replay" in spec else None
        if recorded is None and (not isinstance(file, str) or not (task.folder / file).is_file()):
            raise _error(
                "task.program",
                f"program `{name}`: no file {file!r} in the task folder",
                toml,
                _line_of(toml, f"programs.{name}"),
            )
        params = spec.get("params", {})
        if not isinstance(params, dict) or not all(
            isinstance(p, dict) and all(isinstance(v, int) and not isinstance(v, bool) for v in p.values())
            for p in params.values()
        ):
            raise _error(
                "task.program",
                f"program `{name}`: params.<preset> maps parameters to integers",
                toml,
                _line_of(toml, f"programs.{name}"),
            )
        for preset in params:
            if preset not in task.presets:
                raise _error(
                    "task.program",
                    f"program `{name}` has params for unknown preset `{preset}`",
                    toml,
                    _line_of(toml, f"programs.{name}"),
                )
        backends = spec.get("backends", [])
        backend_names = tuple(lowering_targets.emitting())  # the targets that lower (lowering/targets/)
        if not isinstance(backends, list) or not all(isinstance(b, str) and b in backend_names for b in backends):
            raise _error(
                "task.program",
                f"program `{name}`: backends is a list of backend names",
                toml,
                _line_of(toml, f"programs.{name}"),
                f"backends: {', '.join(backend_names)}",
            )
        if recorded is not None:
            task.replays[name] = Replayed(
                name, recorded.base, recorded.steps, {k: dict(v) for k, v in params.items()}, tuple(backends)
            )
            continue
        assert isinstance(file, str)  # checked above
        task.programs[name] = Program(
            name, task.folder / file, {k: dict(v) for k, v in params.items()}, tuple(backends)
        )
    for name, replayed in task.replays.items():
        if replayed.base not in task.programs:
            with_file = ", ".join(task.programs) or "none"
            raise _error(
                "task.replay",
                f"program `{name}` is replayed from `{replayed.base}`, which is not a program of the task with a file",
                toml,
                _line_of(toml, f"programs.{name}"),
                f"programs with a file: {with_file}",
            )


def _recorded(name: str, spec: dict, toml: Path):
    """The recorded sequence of a `[programs.NAME]` entry with a `replay` key (tactics.replay),
    each step checked against its tactic: a `TaskError` at the step's line otherwise."""
    try:
        return read_entry(name, spec, toml)
    except KirError as err:
        raise TaskError(list(err.diagnostics)) from None


def _check_module(task: Task, module: ModuleType) -> None:
    """What task.toml says of reference.py, checked once it is imported."""
    toml = task._toml
    for preset in task.presets.values():
        for var in preset.variables:
            if not hasattr(module, var):
                raise _error(
                    "task.preset",
                    f"preset `{preset.name}` sets `{var}`, which reference.py does not define",
                    toml,
                    _line_of(toml, var),
                )
    for var in task.vary:
        if not isinstance(getattr(module, var, None), int):
            raise _error(
                "task.vary", f"vary `{var}`: reference.py defines no integer `{var}`", toml, _line_of(toml, var)
            )
    for out, how in task.compare.items():
        if how.startswith("reference.py:") and not callable(getattr(module, how.split(":", 1)[1], None)):
            raise _error(
                "task.toml", f"reference.py has no function `{how.split(':', 1)[1]}`", toml, _line_of(toml, out)
            )


def load_suite(folder: str | Path, names: list[str] | None = None) -> list[Task]:
    """Every task folder under `folder` (those that hold a reference.py), by name order."""
    root = Path(folder)
    found = sorted(p for p in root.iterdir() if (p / "reference.py").is_file())
    if names:
        by_name = {p.name: p for p in found}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise _error(
                "task.missing", f"no task {', '.join(missing)} under {root}", root, hint=f"tasks: {', '.join(by_name)}"
            )
        found = [by_name[n] for n in names]
    return [load_task(p) for p in found]


SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks"
TASK_PATH = "KIR_TASK_PATH"  # more folders of task folders, os.pathsep-separated (kir seed --out's)


def task_dirs() -> list[Path]:
    """Where tasks are found by name: the suite, then each folder of $KIR_TASK_PATH."""
    extra = [Path(p) for p in os.environ.get(TASK_PATH, "").split(os.pathsep) if p]
    return [SUITE, *extra]


def find_task(name: str) -> Path | None:
    """The task folder `name` names: a folder holding task.toml, else the first folder of that
    name under `task_dirs()` that holds one."""
    folder = Path(name)
    if (folder / "task.toml").is_file():
        return folder
    for root in task_dirs():
        if (root / name / "task.toml").is_file():
            return root / name
    return None


def task_names() -> list[str]:
    """The names of every task `find_task` finds (the first of a name wins)."""
    names: dict[str, None] = {}
    for root in task_dirs():
        if root.is_dir():
            names.update((p.name, None) for p in sorted(root.iterdir()) if (p / "task.toml").is_file())
    return list(names)
