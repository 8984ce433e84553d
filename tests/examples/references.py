"""Test-size inputs and numpy references (float64) for every example in examples/."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from kir.random import rand

BF16 = ml_dtypes.bfloat16


def _normal(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    # never zero, both signs: a kernel that skips work cannot pass by accident
    x = rng.standard_normal(shape)
    x = np.where(np.abs(x) < 1e-3, 1e-3, x)
    return x.astype(dtype)


def _gelu(h: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf)
    return 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))


@dataclass
class Case:
    example: str
    params: dict[str, int]
    make: Callable[[np.random.Generator], dict[str, np.ndarray]]
    reference: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
    rtol: float = 1e-5
    atol: float = 1e-5
    check: Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], None] | None = None
    extra: dict = field(default_factory=dict)


def f64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


def _vector_add(rng):
    return {"x": _normal(rng, 1000), "y": _normal(rng, 1000)}


def _softmax_inputs(rng):
    return {"x": _normal(rng, (8, 100), BF16)}


def _softmax_ref(i):
    x = f64(i["x"])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}


def _norm_inputs(rng):
    return {"x": _normal(rng, (8, 100), BF16), "w": _normal(rng, 100, BF16), "b": _normal(rng, 100, BF16)}


def _layernorm_ref(i):
    x = f64(i["x"])
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return {"y": (x - mean) / np.sqrt(var + 1e-5) * f64(i["w"]) + f64(i["b"])}


def _rmsnorm_inputs(rng):
    return {"x": _normal(rng, (8, 100), BF16), "w": _normal(rng, 100, BF16)}


def _rmsnorm_ref(i):
    x = f64(i["x"])
    return {"y": x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * f64(i["w"])}


def _gemm_bias_gelu_inputs(rng):
    return {"a": _normal(rng, (70, 64), BF16), "b": _normal(rng, (64, 50), BF16), "bias": _normal(rng, 50, BF16)}


def _gemm_bias_gelu_ref(i):
    return {"c": _gelu(f64(i["a"]) @ f64(i["b"]) + f64(i["bias"]))}


def _gemm_inputs(rng):
    return {"a": _normal(rng, (128, 256), BF16), "b": _normal(rng, (256, 128), BF16)}


def _gemm_ref(i):
    return {"c": f64(i["a"]) @ f64(i["b"])}


def _scores_inputs(rng):
    return {"q": _normal(rng, (256, 64), BF16), "k": _normal(rng, (256, 64), BF16)}


def _scores_ref(i):
    return {"out": f64(i["q"]) @ f64(i["k"]).T}


def _kmeans_inputs(rng):
    return {"x": _normal(rng, (50, 20)), "cent": _normal(rng, (70, 20))}


def _kmeans_ref(i):
    d = ((f64(i["x"])[:, None, :] - f64(i["cent"])[None, :, :]) ** 2).sum(axis=2)
    return {"assign": d.argmin(axis=1).astype(np.int32)}


def _kmeans_check(inputs, out):
    """The chosen centroid must be (within f32 rounding) as close as the best one: near-ties may
    legitimately resolve differently in f32 than in the f64 reference."""
    d = ((f64(inputs["x"])[:, None, :] - f64(inputs["cent"])[None, :, :]) ** 2).sum(axis=2)
    got = out["assign"]
    assert got.dtype == np.int32 and got.shape == (50,)
    assert ((got >= 0) & (got < 70)).all()
    chosen = d[np.arange(50), got]
    np.testing.assert_allclose(chosen, d.min(axis=1), rtol=1e-4, atol=1e-4)


def _bucketize_inputs(rng):
    bounds = np.sort(_normal(rng, 100))
    x = _normal(rng, 1000)
    x[:50] = bounds[rng.integers(0, 100, 50)]  # values equal to a boundary
    x[50:53] = [np.nan, np.inf, -np.inf]  # NaN after every boundary, as searchsorted and torch put it
    return {"x": x, "bounds": bounds}


def _bucketize_ref(i):
    return {"out": np.searchsorted(i["bounds"], i["x"], side="left").astype(np.int32)}


def _bag_inputs(rng):
    return {"table": _normal(rng, (50, 20), BF16), "idx": rng.integers(0, 50, (6, 5)).astype(np.int64)}


def _bag_ref(i):
    return {"out": f64(i["table"])[i["idx"]].sum(axis=1)}


def _dropout_inputs(rng):
    return {"x": _normal(rng, 3000), "seed": np.array([rng.integers(-(2**40), 2**40)], np.int64)}


def _dropout_ref(i):
    """The mask from kir.random, as the kernel draws it: Philox keyed by the seed, one offset an element."""
    keep = rand(i["seed"][0], np.arange(i["x"].size, dtype=np.int32)) >= np.float32(0.2)
    return {"y": np.where(keep, f64(i["x"]) * 1.25, 0.0)}


CASES = [
    Case("vector_add", {"BLOCK": 256}, _vector_add, lambda i: {"z": f64(i["x"]) + f64(i["y"])}),
    Case("softmax", {"BLOCK": 128}, _softmax_inputs, _softmax_ref, rtol=1e-2, atol=1e-2),
    Case("layernorm", {"BLOCK": 128}, _norm_inputs, _layernorm_ref, rtol=2e-2, atol=2e-2),
    Case("rmsnorm", {"BLOCK": 128}, _rmsnorm_inputs, _rmsnorm_ref, rtol=2e-2, atol=2e-2),
    Case(
        "gemm_bias_gelu",
        {"BM": 32, "BN": 32, "BK": 32},
        _gemm_bias_gelu_inputs,
        _gemm_bias_gelu_ref,
        rtol=2e-2,
        atol=5e-2,
    ),
    Case("gemm_hopper_ws", {"BM": 64, "BN": 64, "BK": 32, "S": 2}, _gemm_inputs, _gemm_ref, rtol=2e-2, atol=1e-1),
    Case(
        "attention_scores_hopper",
        {"BM": 128, "BN": 64, "D": 64, "S": 2},
        _scores_inputs,
        _scores_ref,
        rtol=2e-2,
        atol=1e-1,
    ),
    Case("kmeans_assign", {"BP": 16, "BC": 32, "BD": 32}, _kmeans_inputs, _kmeans_ref, check=_kmeans_check),
    Case("bucketize", {"BLOCK": 256, "STEPS": 11}, _bucketize_inputs, _bucketize_ref),
    Case("embedding_bag", {"BL": 8, "BD": 32}, _bag_inputs, _bag_ref, rtol=1e-2, atol=2e-2),
    Case("dropout", {"BLOCK": 256}, _dropout_inputs, _dropout_ref),
]
