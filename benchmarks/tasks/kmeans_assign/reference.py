"""k-means assignment (f32): the index of the nearest centroid of every point, by squared
Euclidean distance written as ||x||^2 - 2 x.c + ||c||^2 (the GEMM form)."""

import torch
import torch.nn as nn

P = 1024 * 1024  # points
C = 1024  # centroids
D = 128  # dimensions


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
        dist = (x * x).sum(1, keepdim=True) - 2.0 * (x @ centroids.T) + (centroids * centroids).sum(1)[None, :]
        return torch.argmin(dist, dim=1)


# The inputs of the latest get_inputs() call, for the comparison hook: the harness
# (agent/harness/correctness.py, `_compare`) casts a hook's floating inputs to the dtype of the
# reference output, which is int64 here, so the hook falls back on these when it is handed
# integers. Only a reference is kept; nothing is copied.
_made: list = []


def get_inputs():
    x, centroids = torch.randn(P, D), torch.randn(C, D)
    _made[:] = [x, centroids]
    return [x, centroids]


def get_init_inputs():
    return []


def nearest_within_tolerance(inputs, out, ref, rtol, atol):
    """The nearest centroid is not unique when two distances tie within rounding, so an index
    is accepted when its distance (computed here in float64) is within tolerance of the best:
    d[i, out[i]] - min_j d[i, j] <= rtol * (||x_i||^2 + ||c_out[i]||^2) + atol * rms(min_j d).
    The scale ||x||^2 + ||c||^2 is the size of the terms whose rounding an f32 computation
    of the distance carries. Every element is checked, and must be a valid index."""
    if not inputs[0].is_floating_point():  # cast to the index dtype by the harness: see _made
        inputs = _made
    x, c = inputs[0].double(), inputs[1].double()  # on the inputs' device: seconds on a GPU, minutes on a CPU
    idx = out.to(device=x.device, dtype=torch.int64)
    if idx.shape != ref.shape:
        return f"shape {list(idx.shape)}, want {list(ref.shape)}"
    bad = (idx < 0) | (idx >= c.shape[0])
    if bad.any():
        i = int(torch.nonzero(bad)[0])
        return f"{int(bad.sum())} of {idx.numel()} indices are outside [0, {c.shape[0]}); the first at [{i}] is {int(idx[i])}"
    xx = (x * x).sum(1)
    cc = (c * c).sum(1)
    gap = torch.empty_like(xx)
    best = torch.empty_like(xx)
    for s in range(0, x.shape[0], 4096):  # in row chunks: the bench preset's full matrix is 8 GB
        d = xx[s : s + 4096, None] - 2.0 * (x[s : s + 4096] @ c.T) + cc[None, :]
        best[s : s + 4096] = d.min(1).values
        gap[s : s + 4096] = d.gather(1, idx[s : s + 4096, None])[:, 0] - best[s : s + 4096]
    allowed = rtol * (xx + cc[idx]) + atol * float(torch.sqrt(torch.mean(best * best)))
    wrong = gap > allowed
    if wrong.any():
        i = int(torch.nonzero(wrong)[0])
        return (
            f"{int(wrong.sum())} of {idx.numel()} points are not assigned a nearest centroid; the first at [{i}]: "
            f"got {int(idx[i])} at distance {float(best[i] + gap[i]):.9g}, the nearest is {int(ref[i])} at "
            f"{float(best[i]):.9g} (allowed gap {float(allowed[i]):.3g})"
        )
    return None
