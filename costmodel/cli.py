"""What `kir cost` needs of the cost model: the shapes of a task's preset, and the estimate in words.

Shapes come from `--shape NAME=VALUE`, else from the task the file belongs to (a
`benchmarks/tasks/<task>/` folder: the preset's shape values and the program's parameters for
that preset), so `kir cost benchmarks/tasks/gemm/tuned.kir --target sm_90` needs nothing more.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from kir.diagnostics import Diagnostic, KirError, Span


def task_bindings(file: str | Path, preset: str = "bench") -> tuple[dict[str, int], dict[str, int]]:
    """(parameters, shape values) of a task program's preset; empty when the file is not one.
    The `default` preset (the reference's own shapes, which only running reference.py tells) is
    the parameters' defaults and no shapes; a preset the task does not have is `cli.preset`."""
    path = Path(file).resolve()
    toml = Path(file).parent / "task.toml"  # as the command line named it, for the messages
    if not toml.exists():
        return {}, {}
    meta = _task_meta(toml)
    presets = meta.get("presets", {})
    if preset != "default" and preset not in presets:
        # the words of `kir cost`'s own check of --preset (kir/cli.py) and of the task loader's
        known = ", ".join(["default", *presets])
        message = f"task `{toml.parent.name}` has no preset `{preset}`"
        raise KirError(Diagnostic("cli.preset", "error", None, message, f"presets: {known}"))
    shapes = {k: v for k, v in presets.get(preset, {}).items() if isinstance(v, int)}
    params: dict[str, int] = {}
    for spec in meta.get("programs", {}).values():
        if (path.parent / spec.get("file", "")).resolve() == path:
            params = dict(spec.get("params", {}).get(preset, {}))
    return params, shapes


def _task_meta(toml: Path) -> dict:
    try:
        return tomllib.loads(toml.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        found = re.search(r"line (\d+)", str(err))
        line = int(found.group(1)) if found else 1
        # the task loader's rule (agent/tasks/task.py), which `kir run` reports for the same file
        raise KirError(
            Diagnostic("task.toml", "error", Span(line, 1, line, 2, str(toml)), f"task.toml is not valid TOML: {err}")
        ) from None


def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def _time(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def estimate_lines(file: str, kernel: str | None, est: dict, report: dict | None = None) -> list[str]:
    """An estimate (`Estimate.to_json`, as a Record holds it) for people; `report` is the compile
    report whose registers and shared memory it took, if it took them."""
    from costmodel.spec import chip

    occ = est["occupancy"]
    c = est["counts"]
    lines = [
        f"{file}: {kernel} on {chip(est['target']).chip}: {_time(est['time_s'])}, bound by {est['bottleneck']}",
        f"  programs {c['programs']}, {est['waves']:.2f} waves of {est['concurrent']} "
        f"({occ['blocks_per_sm']} blocks/SM, limited by {occ['limiter']}; {occ['registers']} regs/thread, "
        f"{occ['smem_bytes']} B shared/block)",
        f"  DRAM {_si(c['dram_bytes'], 'B')} (ideal {_si(c['ideal_dram_bytes'], 'B')}), L2 {_si(c['l2_bytes'], 'B')}, "
        f"shared {_si(c['smem_bytes'], 'B')}; matmul {_si(c['matmul_flops'], 'FLOP')}, ALU {_si(c['alu_ops'], 'op')}, "
        f"int {_si(c['int_ops'], 'op')}, SFU {_si(c['sfu_ops'], 'op')}",
        "  resources: "
        + ", ".join(f"{r} {_time(s)}" for r, s in sorted(est["resources"].items(), key=lambda kv: -kv[1]) if s > 0),
        "  breakdown:",
    ]
    for t in est["breakdown"][:12]:
        where = f" at line {t['span']['line']}" if t["span"] else ""
        note = f" ({t['note']})" if t["note"] else ""
        lines.append(f"    {_time(t['seconds']):>11}  {t['name']}{where}{note}")
    if report is not None:
        lines.insert(
            1,
            f"  from the {report['backend']} compile: {report['registers']} regs/thread, "
            f"{report['shared_bytes'] or 0} B shared, {report['spills'] or 0} B spilled a thread",
        )
    return lines
