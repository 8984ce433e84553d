"""Measurements -> calibration: the times the stores measured on a GPU refit the cost model's
per-target correction factors (`costmodel.calibration`), gated out of sample.

The measurements: every node of a search store that went through the harness with a GPU timing
(`verdict.metrics.ms`, the median of its timed runs) on a chip the analytic model covers (not
mtia-sim, whose model is a count of the simulator's own cycles), with its program, parameters,
the shapes of the task's preset and, where the record has it, the compile report's registers,
shared memory and spills; and the rows of a measured sweep (`benchmarks/costmodel_variants.py
time`'s JSON), which carry their compile reports.

Two things are fitted per target, each with its own gate, both leave-one-task-out: for each
task, they are fitted on every other task's measurements and the task's own are predicted with
them; the share of its pairs of programs the prediction orders as measured (`pairs_right`) is
compared with the model without them.
- The factors (`costmodel.calibration.fit`), on the predictions with the compile reports the
  measurements have, against the uncalibrated model: kept when the mean share does not fall, no
  task loses more than `MAX_TASK_LOSS` of its pairs, and the median relative error grows by at most
  `MAX_ERR_GROWTH` (the ordering is the aim; the error says the scale is not lost).
- The learned correction (`costmodel.calibration.Correction`), on the predictions made before
  compile (what ranks a search's children), against the factors alone: kept when it orders
  `MIN_GAIN` more pairs right on the mean, no task loses more than `MAX_TASK_LOSS_CORRECTION`,
  and the median error grows by at most `MAX_ERR_GROWTH`.
What is kept is a file (`costmodel/learned/<chip>.json`, or `$KIR_LEARNED_CALIBRATION`) with an
id, the factors and the correction fitted on every measurement, the gates' figures and where the
measurements came from; `CostModel.learned()` loads it (`kir search` ranks with it), and `kir
learn --retire ID` removes it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from agent.execute import CPU_BACKENDS
from agent.learn.tactics import task_shapes
from agent.store import open_store
from costmodel import CostModel, calibration
from costmodel.calibration import library_dir, pairs_right
from costmodel.model import measurement_raw
from costmodel.spec import chip
from costmodel.timing import Raw
from kir.diagnostics import KirError

PREFIX = "calibration."
MAX_TASK_LOSS = 0.02  # a task may lose at most this share of its pairs to the factors
MAX_TASK_LOSS_CORRECTION = 0.05  # ... and to the learned correction (trees move single programs)
MIN_GAIN = 0.01  # the correction must order at least this many more pairs right, on the mean
MAX_ERR_GROWTH = 1.10  # the median relative error may grow by at most this factor (pairs are the aim)
MIN_TASKS = 2  # leave-one-task-out needs another task to fit on


@dataclass(frozen=True)
class Measurement:
    task: str
    target: str
    text: str
    params: dict[str, int]
    shapes: dict[str, int]
    seconds: float
    source: str
    registers: int | None = None
    smem_bytes: int | None = None
    spills: int | None = None

    def as_update(self) -> dict[str, Any]:
        """The form `CostModel.update` takes."""
        return {
            "target": self.target, "text": self.text, "params": self.params, "shapes": self.shapes,
            "seconds": self.seconds, "registers": self.registers, "smem_bytes": self.smem_bytes,
            "spills": self.spills,
        }  # fmt: skip


def measurements(sources: Iterable[str]) -> list[Measurement]:
    """Every GPU measurement of the stores and measured sweeps given (a path ending in `.json`
    is a sweep), one a program, parameters and shapes (the first seen)."""
    out: dict[tuple, Measurement] = {}
    for source in sources:
        found = _from_sweep(source) if source.endswith(".json") else _from_store(source)
        for m in found:
            key = (m.target, m.text, json.dumps(m.params, sort_keys=True), json.dumps(m.shapes, sort_keys=True))
            out.setdefault(key, m)
    return list(out.values())


def _from_store(db: str) -> list[Measurement]:
    found = []
    with open_store(db) as store:
        for s in store.searches():
            config = s.get("config") or {}
            shapes = task_shapes(s["task"], config.get("preset", "test"))
            for n in store.nodes(s["id"]):
                r = n.record
                if r is None or not r.ok or not r.target or r.backend in CPU_BACKENDS:
                    continue  # (mtia-sim's cycles are its own model's; the interpreters time nothing)
                ms = ((r.verdict or {}).get("metrics") or {}).get("ms")
                if not ms or ms <= 0:
                    continue
                report = r.report or {}
                found.append(
                    Measurement(
                        s["task"], r.target, n.text, dict(n.params), shapes, ms / 1e3, f"{Path(db).name}#{s['name']}",
                        report.get("registers"), report.get("shared_bytes"), report.get("spills"),
                    )
                )  # fmt: skip
    return found


def _from_sweep(path: str) -> list[Measurement]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    target = data.get("target", "sm_90")
    return [
        Measurement(
            v["task"], target, v["text"], v.get("params") or {}, v.get("shapes") or {}, v["measured_s"],
            Path(path).name, v.get("registers"), v.get("smem_bytes"), v.get("spills"),
        )
        for v in data.get("variants", [])
        if v.get("measured_s")
    ]  # fmt: skip


@dataclass
class Fit:
    """One target's calibration: the factors fitted on every measurement, the learned correction
    of the predictions made before compile (None when it did not pass its gate), and the
    gate's leave-one-task-out figures per task and over them."""

    target: str
    factors: dict[str, float]
    measurements: int
    sources: list[str]
    correction: calibration.Correction | None = None
    tasks: dict[str, dict[str, float | None]] = field(default_factory=dict)
    summary: dict[str, float | None] = field(default_factory=dict)
    skipped: int = 0  # measurements the model could not count
    inputs: list[str] = field(default_factory=list)  # the stores and sweeps read, as named
    reasons: list[str] = field(default_factory=list)  # why the factors are not kept; empty when they are
    correction_reasons: list[str] = field(default_factory=list)  # why the correction is not

    @property
    def kept(self) -> bool:
        return not self.reasons or self.correction is not None

    @property
    def id(self) -> str:
        kept = {"factors": self.factors if not self.reasons else {}}
        if self.correction is not None:
            kept["correction"] = self.correction.to_json()
        digest = hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:8]
        return f"{PREFIX}{chip(self.target).name}-{digest}"

    def to_json(self) -> dict[str, Any]:
        name = chip(self.target).name
        out: dict[str, Any] = {
            "version": 1,
            "id": self.id,
            "target": self.target,
            "corrections": {name: self.factors if not self.reasons else {}},
            "provenance": {
                "added": date.today().isoformat(),
                "measurements": self.measurements,
                "skipped": self.skipped,
                "inputs": self.inputs,
                "sources": self.sources,
                "gate": {"summary": self.summary, "tasks": self.tasks},
                "factors_not_kept": self.reasons,
                "correction_not_kept": self.correction_reasons,
            },
        }
        if self.correction is not None:
            out["correction"] = {name: self.correction.to_json()}
        return out


@dataclass(frozen=True)
class _Row:
    m: Measurement
    raw: Raw  # with the compile report where the measurement has one
    before: Raw  # without it: what the model predicts before compile


def fit(
    found: list[Measurement], progress: Callable[[str], None] | None = None, inputs: list[str] | None = None
) -> list[Fit]:
    """A fit per target, gated leave-one-task-out; `inputs` (the stores and sweeps read, as
    named) go into each fit's provenance."""
    by_target: dict[str, list[_Row]] = {}
    skipped: dict[str, int] = {}
    for m in found:
        try:
            update = m.as_update()
            bare = {**update, "registers": None, "smem_bytes": None, "spills": None}
            row = _Row(m, measurement_raw(update), measurement_raw(bare))
        except (KirError, KeyError, ValueError, ZeroDivisionError):
            skipped[m.target] = skipped.get(m.target, 0) + 1
            continue
        by_target.setdefault(m.target, []).append(row)
    fits = []
    for target in sorted(set(skipped) - set(by_target)):
        f = Fit(target, {}, 0, [], skipped=skipped[target])
        f.reasons.append(f"none of its {skipped[target]} measurements could be counted")
        f.correction_reasons.append(f.reasons[-1])
        fits.append(f)
    for target, rows in sorted(by_target.items()):
        model = CostModel()
        model.update([r.m.as_update() for r in rows])
        f = Fit(target, model.factors(target), len(rows), sorted({r.m.source for r in rows}), inputs=list(inputs or []))
        f.skipped = skipped.get(target, 0)
        if importlib.util.find_spec("sklearn") is None:
            f.correction_reasons.append(
                "scikit-learn is not installed (pip install 'kir[learn]'): no correction fitted"
            )
        _gate(f, rows, progress)
        if not f.correction_reasons:
            f.correction = calibration.fit_correction([r.before for r in rows], [r.m.seconds for r in rows], f.factors)
        fits.append(f)
    return fits


def _times(raws: list[Raw], factors: dict[str, float], correction: calibration.Correction | None = None) -> list[float]:
    return [r.time(factors)[0] * (correction.factor(r) if correction else 1.0) for r in raws]


def _errs(predicted: list[float], measured: list[float]) -> list[float]:
    return [abs(p - s) / s for p, s in zip(predicted, measured, strict=True)]


def _gate(f: Fit, rows: list[_Row], progress: Callable[[str], None] | None) -> None:
    tasks = sorted({r.m.task for r in rows})
    if len(tasks) < MIN_TASKS:
        f.reasons.append(f"measurements of {len(tasks)} task: leaving one out needs {MIN_TASKS}")
        f.correction_reasons.append(f.reasons[-1])
        return
    errs: dict[str, list[float]] = defaultdict(list)
    for i, task in enumerate(tasks):
        if progress:
            progress(f"leave one task out: {task} ({i + 1} of {len(tasks)})")
        mine = [r for r in rows if r.m.task == task]
        others = [r for r in rows if r.m.task != task]
        model = CostModel()
        model.update([r.m.as_update() for r in others])
        factors = model.factors(f.target)
        correction = calibration.fit_correction([r.before for r in others], [r.m.seconds for r in others], factors)
        measured = [r.m.seconds for r in mine]
        before = [r.before for r in mine]
        figures = {
            # with the compile reports the measurements have: the factors' gate
            "uncalibrated": _times([r.raw for r in mine], {}),
            "calibrated": _times([r.raw for r in mine], factors),
            # before compile (the search's ranking): the correction's gate
            "before_uncalibrated": _times(before, {}),
            "before_calibrated": _times(before, factors),
            "before_corrected": _times(before, factors, correction),
        }
        f.tasks[task] = {"measurements": len(mine)}
        for key, predicted in figures.items():
            f.tasks[task][f"pairs_right_{key}"] = pairs_right(predicted, measured)
            errs[key] += _errs(predicted, measured)
    scored = [t for t in f.tasks.values() if t["pairs_right_uncalibrated"] is not None]
    if not scored:
        f.reasons.append("no task has two measurements with different times: nothing to order")
        f.correction_reasons.append(f.reasons[-1])
        return
    s = f.summary
    for key in errs:
        s[f"mean_pairs_right_{key}"] = statistics.fmean(t[f"pairs_right_{key}"] or 0.0 for t in scored)
        s[f"min_pairs_right_{key}"] = min(t[f"pairs_right_{key}"] or 0.0 for t in scored)
        s[f"median_abs_err_{key}"] = statistics.median(errs[key])
    f.reasons += _verdict(f, "calibrated", "uncalibrated", MAX_TASK_LOSS)
    if all(math.isclose(v, 1.0) for v in f.factors.values()):
        f.reasons.append("every factor fitted to 1: nothing to correct")
    if f.correction_reasons:
        return
    f.correction_reasons += _verdict(f, "before_corrected", "before_calibrated", MAX_TASK_LOSS_CORRECTION)
    if (s["mean_pairs_right_before_corrected"] or 0) < (s["mean_pairs_right_before_calibrated"] or 0) + MIN_GAIN:
        f.correction_reasons.append(f"orders fewer than {MIN_GAIN:.0%} more pairs right out of sample")


def _verdict(f: Fit, new: str, old: str, max_loss: float) -> list[str]:
    """Why `new` is not kept against `old`: fewer pairs right on the mean, a task losing more
    than `max_loss` of its pairs, a median error more than `MAX_ERR_GROWTH` times larger."""
    s, out = f.summary, []
    if (s[f"mean_pairs_right_{new}"] or 0) < (s[f"mean_pairs_right_{old}"] or 0) - 1e-9:
        out.append(
            f"orders fewer pairs right out of sample ({s[f'mean_pairs_right_{new}']:.3f} against "
            f"{s[f'mean_pairs_right_{old}']:.3f})"
        )
    worse = [
        name
        for name, t in f.tasks.items()
        if t[f"pairs_right_{new}"] is not None
        and (t[f"pairs_right_{new}"] or 0) < (t[f"pairs_right_{old}"] or 0) - max_loss
    ]
    if worse:
        out.append(f"loses more than {max_loss:.0%} of the pairs of {', '.join(worse)}")
    if (s[f"median_abs_err_{new}"] or 0) > (s[f"median_abs_err_{old}"] or 0) * MAX_ERR_GROWTH + 1e-9:
        out.append(
            f"a larger median error out of sample ({s[f'median_abs_err_{new}']:.3f} against "
            f"{s[f'median_abs_err_{old}']:.3f})"
        )
    return out


def keep(f: Fit, folder: Path | None = None) -> Path:
    """Write the kept fit as its target's learned calibration (replacing an earlier one)."""
    folder = folder or library_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{chip(f.target).name}.json"
    path.write_text(json.dumps(f.to_json(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path
