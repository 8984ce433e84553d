"""Every bucketize program of the suite agrees with torch.bucketize where random inputs never
go: NaN (after every boundary), +-inf, values equal to a boundary (right=False: the boundary's
own index), and below and above all boundaries."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch

from kir.interp import run
from kir.parser import parse_file

TASK = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks" / "bucketize"
PROGRAMS = tomllib.loads((TASK / "task.toml").read_text())["programs"]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_edges_match_torch(name):
    spec = PROGRAMS[name]
    program = parse_file(TASK / spec["file"])
    rng = np.random.default_rng(7)
    bounds = np.sort(rng.standard_normal(103)).astype(np.float32)
    special = [np.nan, np.inf, -np.inf, bounds[0], bounds[50], bounds[-1], -10.0, 10.0, 0.0, -0.0]
    x = np.concatenate([np.array(special, np.float32), rng.standard_normal(990).astype(np.float32)])
    out = run(program, {"x": x, "bounds": bounds, "out": np.zeros(x.size, np.int64)}, spec["params"]["test"])["out"]
    want = torch.bucketize(torch.from_numpy(x), torch.from_numpy(bounds), right=False).numpy()
    assert np.array_equal(out, want), [(v, o, w) for v, o, w in zip(x, out, want, strict=True) if o != w][:5]
