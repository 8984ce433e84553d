"""Calibration: per-target correction factors fitted to measured times.

The analytic model's shape is kept; a few resources' times are multiplied by a factor, and the
whole by a scale. Few and well-conditioned on purpose: with a factor per resource (nine of them)
a handful of badly modelled programs (a 100x error from an unmodelled effect) pulled the rarely
exercised factors to the edge of their range (FMA x7) and the scale to x1.8, and every other
program paid for it (leave-one-task-out error 0.61 against 0.27 uncalibrated). So:

- only `FITTED` factors move: the shared memory system (DRAM, L2), the tensor cores, the integer
  pipe and the fixed per-wave overhead; the others, and the scale, stay at 1 (a fitted scale
  moved every program for the sake of the under-predicted compute-bound ones: on a second,
  fresh sweep it raised the leave-one-task-out median error from 0.22 to 0.27);
- the loss is robust: Tukey's biweight on log(predicted / measured), which stops growing at
  `CUT` (a factor of 2): a program the model gets 2x or more wrong has an effect the model does
  not have, and shared per-resource factors must not chase it. (With Huber's loss, quadratic
  near 0 and linear beyond, the badly modelled programs of other tasks still pulled the factors:
  leave-one-task-out, calibration made the third H200 sweep's median error 0.303 against 0.247
  uncalibrated; with the biweight 0.252, and 0.164 / 0.160 on the first two sweeps, where the
  uncalibrated model has 0.163 / 0.160);
- every log-factor, the scale's too, is pulled toward 0 (a factor of 1) by `PENALTY`, and moves
  within x0.5 .. x2.

Coordinate descent over a grid of log-factors. Because a factor changes one resource before the
max over resources, calibration can move the bottleneck of a program, not only rescale it.

Beyond the factors, a learned correction (`Correction`, as TVM's cost model learns one): the
log of measured over predicted time as a sum of small regression trees (gradient boosting,
scikit-learn's, with the Huber loss) over features of the model's own figures (`FEATURES`: each
resource's share of the time, waves, blocks per SM, overlap, bytes in flight, the register
estimate, warps). It is fitted to the predictions made without a compile report (the search
ranks its children before compiling them; a sweep's rows are re-predicted without theirs) and
applied only to those, shrunk by `SHRINK`. A kept correction is data: the trees' arrays, read
back and walked here, never a pickled object.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from costmodel.timing import FACTORS, RESOURCES, Raw

LEARNED_DIR = Path(__file__).resolve().parent / "learned"
ENV_DIR = "KIR_LEARNED_CALIBRATION"
FITTED = ("dram", "l2", "tensor", "int", "overhead")
GRID = np.round(np.arange(-0.7, 0.701, 0.05), 2)  # log-factors: x0.5 .. x2
PENALTY = 0.05
CUT = math.log(2.0)
SWEEPS = 3


def _biweight(x: np.ndarray) -> np.ndarray:
    """Tukey's biweight: about x^2 / 2 near 0, constant (CUT^2 / 6) from |x| = CUT on."""
    u = np.minimum(np.abs(x) / CUT, 1.0)
    return (CUT * CUT / 6) * (1 - (1 - u * u) ** 3)


def loss(pairs: list[tuple[Raw, float]], factors: dict[str, float]) -> float:
    err = np.array([math.log(raw.time(factors)[0] / measured) for raw, measured in pairs if measured > 0])
    reg = sum(math.log(v) ** 2 for v in factors.values())
    return float(np.mean(_biweight(err))) + PENALTY * reg if len(err) else 0.0


def fit(pairs: list[tuple[Raw, float]], start: dict[str, float] | None = None) -> dict[str, float]:
    """Factors for one target (keys: the resources, "overhead" and "scale")."""
    factors = {k: 1.0 for k in (*FACTORS, "scale")}
    factors.update(start or {})
    if not pairs:
        return factors
    for _ in range(SWEEPS):
        for key in FITTED:
            best, best_loss = factors[key], loss(pairs, factors)
            for step in GRID:
                trial = dict(factors)
                trial[key] = math.exp(step)
                value = loss(pairs, trial)
                if value < best_loss - 1e-12:
                    best, best_loss = trial[key], value
            factors[key] = best
    return {k: round(v, 6) for k, v in factors.items()}


FEATURES = (
    "log_time", *(f"share_{r}" for r in RESOURCES), "share_tail", "share_drain", "share_launch",
    "latency_bound", "log_waves", "blocks_per_sm", "overlap", "log_inflight_bytes", "share_chain",
    "registers", "warps",
)  # fmt: skip
SHRINK = 0.5  # of the trees' log-correction applied (leave-one-task-out: 0.5 ordered more pairs than 1)
TREES = 150
DEPTH = 3
RATE = 0.05


def features(raw: Raw) -> list[float]:
    """The correction's inputs (`FEATURES`) for one program's uncalibrated figures."""
    t, tot = raw.time()
    t = max(t, 1e-12)
    return [
        math.log(t), *(tot[r] / t for r in RESOURCES), tot["tail"] / t, tot["drain"] / t, tot["launch"] / t,
        tot["dram_latency_bound"], math.log1p(raw.waves), float(raw.blocks_per_sm), raw.overlap,
        math.log1p(raw.inflight_bytes), raw.chain_s / t, float(raw.extra.get("registers", 0)),
        float(raw.extra.get("warps", 0)),
    ]  # fmt: skip


@dataclass(frozen=True)
class Tree:
    """One regression tree as arrays: node i splits on `feature[i]` at `threshold[i]` (left when
    the value is at most it), or is a leaf (`left[i] == -1`) worth `value[i]`."""

    left: tuple[int, ...]
    right: tuple[int, ...]
    feature: tuple[int, ...]
    threshold: tuple[float, ...]
    value: tuple[float, ...]

    def __call__(self, x: list[float]) -> float:
        i = 0
        while self.left[i] != -1:
            i = self.left[i] if x[self.feature[i]] <= self.threshold[i] else self.right[i]
        return self.value[i]


@dataclass(frozen=True)
class Correction:
    """A learned factor on a prediction made without a compile report: exp(shrink x rate x the
    trees' sum over `features`)."""

    trees: tuple[Tree, ...]
    rate: float = RATE
    shrink: float = SHRINK
    names: tuple[str, ...] = FEATURES

    def log_factor(self, raw: Raw) -> float:
        x = features(raw)
        return self.shrink * self.rate * sum(t(x) for t in self.trees)

    def factor(self, raw: Raw) -> float:
        return math.exp(self.log_factor(raw))

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.names), "rate": self.rate, "shrink": self.shrink,
            "trees": [{k: list(getattr(t, k)) for k in ("left", "right", "feature", "threshold", "value")} for t in self.trees],
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Correction:
        """A correction `to_json` wrote; ValueError when it is not one over today's features or a
        tree's arrays do not make a tree."""
        if tuple(data.get("features", ())) != FEATURES:
            raise ValueError("the correction was fitted on other features than the model's")
        trees = []
        for t in data["trees"]:
            tree = Tree(*(tuple(t[k]) for k in ("left", "right", "feature", "threshold", "value")))
            n = len(tree.left)
            if not n or any(len(a) != n for a in (tree.right, tree.feature, tree.threshold, tree.value)):
                raise ValueError("a tree's arrays differ in length")
            for i in range(n):
                if tree.left[i] != -1 and not (
                    i < tree.left[i] < n and i < tree.right[i] < n and 0 <= tree.feature[i] < len(FEATURES)
                ):
                    raise ValueError("a tree's node points outside the tree")
            trees.append(tree)
        return cls(tuple(trees), float(data["rate"]), float(data["shrink"]))


def fit_correction(
    raws: list[Raw], measured: list[float], factors: dict[str, float] | None = None, seed: int = 0
) -> Correction:
    """Gradient-boosted trees (scikit-learn's) on log(measured / predicted with `factors`), kept
    as arrays."""
    from sklearn.ensemble import GradientBoostingRegressor

    x = np.array([features(r) for r in raws], dtype=float)
    y = np.array([math.log(m / max(r.time(factors)[0], 1e-12)) for r, m in zip(raws, measured, strict=True)])
    gb = GradientBoostingRegressor(
        n_estimators=TREES, learning_rate=RATE, max_depth=DEPTH, subsample=0.8, loss="huber", init="zero",
        random_state=seed,
    ).fit(x, y)  # fmt: skip
    trees = []
    for (est,) in gb.estimators_:
        t = est.tree_
        trees.append(
            Tree(
                tuple(int(v) for v in t.children_left), tuple(int(v) for v in t.children_right),
                tuple(max(0, int(v)) for v in t.feature), tuple(float(v) for v in t.threshold),
                tuple(float(v) for v in t.value[:, 0, 0]),
            )
        )  # fmt: skip
    return Correction(tuple(trees))


def pairs_right(predicted: list[float], measured: list[float]) -> float | None:
    """The share of pairs (with different measured times) that the prediction orders alike."""
    right = total = 0
    for i in range(len(measured)):
        for j in range(i + 1, len(measured)):
            if measured[i] == measured[j]:
                continue
            total += 1
            right += (predicted[i] - predicted[j]) * (measured[i] - measured[j]) > 0
    return right / total if total else None


def library_dir() -> Path:
    """Where the learned calibrations are (`kir learn --calibrate` writes them): one JSON file a
    target, $KIR_LEARNED_CALIBRATION, else costmodel/learned."""
    return Path(os.environ.get(ENV_DIR) or LEARNED_DIR)


@dataclass(frozen=True)
class Learned:
    """One learned calibration file: its factors and corrections, by chip name."""

    path: Path
    factors: dict[str, dict[str, float]]
    corrections: dict[str, Correction]


def learned(folder: Path | None = None) -> dict[str, Learned]:
    """The learned calibrations by id. A file that does not read, or has no id, is left out."""
    out = {}
    folder = folder or library_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            ident = data["id"]
            factors = {t: {k: float(v) for k, v in f.items()} for t, f in data["corrections"].items()}
            corrections = {t: Correction.from_json(c) for t, c in (data.get("correction") or {}).items()}
        except (
            OSError,
            UnicodeDecodeError,
            json.JSONDecodeError,
            KeyError,
            TypeError,
            AttributeError,
            ValueError,
            IndexError,
        ):
            continue
        if isinstance(ident, str):
            out[ident] = Learned(path, factors, corrections)
    return out
