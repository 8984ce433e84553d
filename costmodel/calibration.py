"""Calibration: per-target correction factors fitted to measured times.

The analytic model's shape is kept; each resource's time (DRAM, L2, tensor cores, ALU, ...) and
the fixed overheads are multiplied by a factor, and the whole by a scale. The factors minimize
the squared error of log(predicted / measured) over the measurements, with a small penalty on
each log-factor (so a resource that no measurement exercises stays at 1), by coordinate descent
over a grid of log-factors. Because a factor changes one resource before the max over
resources, calibration can move the bottleneck of a program, not only rescale it.
"""

from __future__ import annotations

import math

import numpy as np

from costmodel.timing import FACTORS, Raw

GRID = np.round(np.arange(-1.6, 1.61, 0.1), 2)  # log-factors: x0.2 .. x5
PENALTY = 0.02
SWEEPS = 3


def loss(pairs: list[tuple[Raw, float]], factors: dict[str, float]) -> float:
    err = [math.log(raw.time(factors)[0] / measured) for raw, measured in pairs if measured > 0]
    reg = sum(math.log(v) ** 2 for k, v in factors.items() if k != "scale")
    return float(np.mean(np.square(err))) + PENALTY * reg if err else 0.0


def fit(pairs: list[tuple[Raw, float]], start: dict[str, float] | None = None) -> dict[str, float]:
    """Factors for one target (keys: the resources, "overhead" and "scale")."""
    factors = {k: 1.0 for k in (*FACTORS, "scale")}
    factors.update(start or {})
    if not pairs:
        return factors
    # the scale first: the geometric mean of measured / predicted
    ratios = [math.log(m / raw.time(factors)[0]) for raw, m in pairs if m > 0]
    factors["scale"] *= math.exp(float(np.mean(ratios)))
    for _ in range(SWEEPS):
        for key in (*FACTORS, "scale"):
            base = math.log(factors[key]) if key != "scale" else 0.0
            best, best_loss = factors[key], loss(pairs, factors)
            for step in GRID:
                trial = dict(factors)
                trial[key] = math.exp(base + step) if key != "scale" else factors["scale"] * math.exp(step / 4)
                value = loss(pairs, trial)
                if value < best_loss - 1e-12:
                    best, best_loss = trial[key], value
            factors[key] = best
    return {k: round(v, 6) for k, v in factors.items()}
