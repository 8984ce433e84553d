"""The targets KIR lowers to, one folder each, and the registry that finds them.

A target folder (`lowering/targets/<name>/`, or one under a folder that `$KIR_TARGETS` names)
is a package whose `__init__.py` declares it, and nothing else names it anywhere in the tree:

    TARGET = Target(
        name="mtia-sim",                        # what `kir lower -b`, `kir compile -b` take
        levels=("tile", "explicit"),             # the program levels it takes
        archs=("mtia-sim",),                     # what it compiles for (the first is the default)
        emitter=".emit:MtiaEmitter",             # an `Emitter` class
        compiler=".compile",                     # a module with `compile_lowered(lowered, arch, ...)`
        runtimes=(Runtime("cpu", ".runtime:SimulatorRuntime"),),  # `kir run -b mtia-sim`
    )

The references are "module:object" names relative to the folder, imported on first use, so
that listing the targets (`kir --help`) imports no compiler, no torch and no emitter. Inside a
folder the modules import each other relatively, so a copy of the folder under another name is
another working target.

A runtime is one `kir run -b` backend; it is an object (of a class made without arguments) with
`prepare(lowered)`, which builds ahead of the first launch (a compile error is raised there),
and, by its device:
- "cuda": `launcher(lowered, tensors, symbols) -> Callable[[], None]`, a launch of the kernel on
  torch CUDA tensors (writing its outputs), `symbols` the shape values bound from them;
- "cpu": `run(program, params, lowered, arrays) -> (outputs, cycles)`, every argument's numpy
  array after one run, and the simulated cycles where the runtime counts them (else None).
A target without an emitter (interp) passes `lowered=None`: its runtime runs the program itself.

`cost_archs` are the archs for which the cost model (`kir cost --compile`) asks this target's
compiler for registers and shared memory, for the program levels it takes (`cost_compiler`).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, cast

from kir.diagnostics import Diagnostic, KirError
from kir.names import suggest

BUILTIN = Path(__file__).parent
ENV = "KIR_TARGETS"  # os.pathsep-separated folders, each holding target folders
DEVICES = ("cpu", "cuda")
LEVELS = ("tile", "explicit")


@dataclass(frozen=True)
class Runtime:
    """One `kir run -b` backend of a target: the device it needs ("cpu" or "cuda"), the object
    with the runtime interface ("module:object", relative to the folder), what its name adds to
    the target's (triton's `-interp`: `kir run -b triton-interp`; none: the target's own name,
    so that a copy of the folder renamed offers runtimes of its new name), and the program
    levels `kir bench` times through it when no backend is named. `name` is filled in by the
    registry."""

    device: str
    entry: str
    suffix: str = ""
    bench: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # what the candidate's process needs set (TRITON_INTERPRET)
    name: str = ""


@dataclass(frozen=True)
class Target:
    """A target as its folder declares it (see the module docstring). `aliases` maps an arch a
    user may name to the one compiled for (cuda: sm_90 compiles as sm_90a); `package` and
    `folder` are filled in by the registry."""

    name: str
    levels: tuple[str, ...] = ("tile",)
    archs: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    emitter: str | None = None
    compiler: str | None = None
    runtimes: tuple[Runtime, ...] = ()
    cost_archs: tuple[str, ...] = ()
    # the loop hints the emitter carries out itself, and those the lowering passes carry out for
    # it (lowering/passes/schedule.py); any other hint is lowered as a plain loop
    native_hints: frozenset[str] = frozenset()
    hints_through_passes: frozenset[str] = frozenset()
    layouts: bool = False  # the passes write down the register layouts the emitter chooses
    # the bytes every row of a pass's box copy must start on (a DMA engine's rule), where any
    copy_row_align: int | None = None
    # what an ok compile report holds (lowering/report.py), per arch ("*": any other)
    artefacts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    package: str = ""
    folder: str = ""

    def artefacts_for(self, arch: str) -> tuple[str, ...]:
        """The fields an ok compile report for `arch` must fill."""
        table = dict(self.artefacts)
        return table.get(arch, table.get("*", ()))

    @property
    def default_arch(self) -> str | None:
        """What a compile is for when no arch is named."""
        return self.archs[0] if self.archs else None

    def compile_arch(self, arch: str | None) -> str:
        """The arch a compile for `arch` (None: the default) is for, or a `lower.arch` error."""
        if not self.archs:
            raise KirError(Diagnostic("lower.backend", "error", None, f"the {self.name} target has no compiler"))
        chosen = self.default_arch if arch is None else arch
        if chosen not in self.archs:
            message = f"{self.name} compiles for {', '.join(self.archs)}, not {chosen}"
            raise KirError(Diagnostic("lower.arch", "error", None, message))
        return dict(self.aliases).get(chosen, chosen)

    def emitter_object(self):
        """The target's emitter (made once), named and levelled as the target declares."""
        return _emitter(self)

    def driver(self):
        """The compile driver's module (`compile_lowered(lowered, arch, **options)`)."""
        return importlib.import_module(self.compiler, self.package)

    def runtime(self, name: str):
        """The object behind the runtime `name` of this target."""
        (chosen,) = [r for r in self.runtimes if r.name == name]
        return _resolve(self.folder, self.package, chosen.entry)()


@cache
def _resolve(folder: str, package: str, entry: str) -> Any:
    """The object `entry` names in the target folder `folder`, imported as `package` (the
    folder is in the key: two $KIR_TARGETS folders may hold target folders of one name)."""
    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module, package), attr)


_EMITTERS: dict[tuple[str, str], Any] = {}


def _emitter(target: Target):
    key = (target.folder, target.name)
    if key not in _EMITTERS:
        emitter = _resolve(target.folder, target.package, target.emitter)()
        emitter.name, emitter.levels = target.name, target.levels
        _EMITTERS[key] = emitter
    return _EMITTERS[key]


# ---- discovery -----------------------------------------------------------------------------------


def _problem(message: str, hint: str = "") -> KirError:
    return KirError(Diagnostic("lower.target", "error", None, message, hint))


def _folders() -> list[tuple[str, Path]]:
    """(package name, folder) of every target folder: the built-in ones, then those under the
    folders `$KIR_TARGETS` names, each in name order."""
    found = [(f"{__name__}.{p.name}", p) for p in sorted(BUILTIN.iterdir()) if (p / "__init__.py").is_file()]
    for i, root in enumerate(filter(None, os.environ.get(ENV, "").split(os.pathsep))):
        base = Path(root).resolve()
        if not base.is_dir():
            raise _problem(f"${ENV} names {root}, which is not a folder", "a folder that holds target folders")
        for p in sorted(base.iterdir()):
            if (p / "__init__.py").is_file():  # one namespace per entry: two entries may hold one folder name
                found.append((f"kir_targets_{i}.{p.name}", p))
    return found


def _load(package: str, folder: Path):
    """Import a target folder as the package `package` (by path for those outside the tree, so
    that its relative imports work)."""
    if package.startswith(f"{__name__}."):
        return importlib.import_module(package)
    init = folder / "__init__.py"
    held = sys.modules.get(package)
    if held is not None and getattr(held, "__file__", None) == str(init):
        return held
    for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
        del sys.modules[name]  # a folder of that name under another $KIR_TARGETS (a test's tmp folder)
    parent = package.rpartition(".")[0]
    # an empty namespace for the folders of one $KIR_TARGETS entry
    holder = importlib.util.module_from_spec(importlib.machinery.ModuleSpec(parent, None, is_package=True))
    holder.__path__ = [str(folder.parent)]
    sys.modules[parent] = holder
    spec = importlib.util.spec_from_file_location(package, init, submodule_search_locations=[str(folder)])
    spec = cast(importlib.machinery.ModuleSpec, spec)  # a package's __init__.py has a spec and a loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    try:
        cast(importlib.machinery.SourceFileLoader, spec.loader).exec_module(module)
    except BaseException:
        del sys.modules[package]
        raise
    return module


def _check(target: Target, folder: Path) -> None:
    where = f" (in {folder / '__init__.py'})"
    if bad := [lv for lv in target.levels if lv not in LEVELS]:
        raise _problem(f"target '{target.name}' takes no level {bad[0]!r}{where}", f"levels: {', '.join(LEVELS)}")
    for runtime in target.runtimes:
        if bad := [lv for lv in runtime.bench if lv not in LEVELS]:
            raise _problem(
                f"runtime '{target.name}{runtime.suffix}' times no level {bad[0]!r}{where}",
                f"levels: {', '.join(LEVELS)}",
            )
        if runtime.device not in DEVICES:
            message = (
                f"runtime '{target.name}{runtime.suffix}' of target '{target.name}' runs on {runtime.device!r}{where}"
            )
            raise _problem(message, f"devices: {', '.join(DEVICES)}")
    if target.compiler and not target.archs:
        raise _problem(f"target '{target.name}' has a compiler but no archs{where}")


@cache
def _registry(env: str) -> dict[str, Target]:
    targets: dict[str, Target] = {}
    for package, folder in _folders():
        module = _load(package, folder)
        declared = getattr(module, "TARGET", None)
        if not isinstance(declared, Target):
            raise _problem(
                f"the target folder {folder} declares no TARGET in {folder / '__init__.py'}",
                "write `TARGET = Target(name=..., ...)` there (lowering.targets.Target)",
            )
        held = targets.get(declared.name)
        if held is not None:
            raise _problem(f"two targets named '{declared.name}': {held.folder} and {folder}", "rename one of them")
        _check(declared, folder)
        named = tuple(replace(r, name=declared.name + r.suffix) for r in declared.runtimes)
        targets[declared.name] = replace(declared, runtimes=named, package=package, folder=str(folder))
    runtimes: dict[str, str] = {}
    for target in targets.values():
        for runtime in target.runtimes:
            if runtime.name in runtimes:
                raise _problem(
                    f"two runtimes named '{runtime.name}': of {runtimes[runtime.name]} and of {target.folder}"
                )
            runtimes[runtime.name] = target.folder
    _cost_table(targets)  # two targets asked for one arch's costs: said here, with the other errors
    return targets


def targets() -> dict[str, Target]:
    """Every target by name: the built-in ones, then those of `$KIR_TARGETS`."""
    return _registry(os.environ.get(ENV, ""))


def target(name: str, rule: str = "lower.backend") -> Target:
    """The target `name`, or a `KirError` (with "did you mean") where there is none."""
    known = targets()
    if name not in known:
        raise _unknown("target", name, list(known), rule)
    return known[name]


def _unknown(what: str, name: str, known: list[str], rule: str) -> KirError:
    hint = suggest(name, known) or f"one of {', '.join(known)}"
    return KirError(Diagnostic(rule, "error", None, f"no {what} '{name}'", hint))


def emitting() -> list[str]:
    """The targets that lower programs (those with an emitter), by name."""
    return [t.name for t in targets().values() if t.emitter]


def compiling() -> list[str]:
    """The targets that compile (those with a compile driver), by name."""
    return [t.name for t in targets().values() if t.compiler]


def runtimes() -> dict[str, tuple[Target, Runtime]]:
    """Every `kir run -b` backend: its target and its runtime."""
    return {r.name: (t, r) for t in targets().values() for r in t.runtimes}


def runtime(name: str, rule: str = "harness.backend") -> tuple[Target, Runtime]:
    """The `kir run -b` backend `name`, or a `KirError` with a suggestion."""
    known = runtimes()
    if name not in known:
        raise _unknown("backend", name, list(known), rule)
    return known[name]


def archs() -> list[str]:
    """Every arch some target compiles for, in target order."""
    return list(dict.fromkeys(a for t in targets().values() for a in t.archs))


def cost_compilers() -> dict[str, dict[str, str]]:
    """arch -> program level -> the target whose compiler the cost model asks for registers and
    shared memory there (sm_90: triton for tile-level programs, gluon for explicit ones)."""
    return _cost_table(targets())


def _cost_table(known: dict[str, Target]) -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {}
    for t in known.values():
        for arch in t.cost_archs:
            for level in t.levels:
                held = table.setdefault(arch, {}).get(level)
                if held is not None:
                    raise _problem(f"two targets report {level}-level costs on {arch}: {held} and {t.name}")
                table[arch][level] = t.name
    return table


def cost_compiler(arch: str, level: str) -> str | None:
    """The target asked for a `level` program's registers on `arch`, or None."""
    return cost_compilers().get(arch, {}).get(level)


def lowers_on(level: str) -> list[str]:
    """The targets whose emitter takes programs of `level`."""
    return [t.name for t in targets().values() if t.emitter and level in t.levels]
