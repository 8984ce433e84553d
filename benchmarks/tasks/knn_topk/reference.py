"""kNN top-16 (f32): the indices of the K nearest points of every query, nearest first, by
squared Euclidean distance written as ||q||^2 - 2 q.p + ||p||^2 (the GEMM form)."""

import torch
import torch.nn as nn

Q = 4096  # queries
N = 262144  # points
D = 128  # dimensions
K = 16  # neighbours


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, queries: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        dist = (queries * queries).sum(1, keepdim=True) - 2.0 * (queries @ points.T) + (points * points).sum(1)[None, :]
        return torch.topk(dist, K, dim=1, largest=False).indices


# The inputs of the latest get_inputs() call, for the comparison hook: the harness
# (agent/harness/correctness.py, `_compare`) casts a hook's floating inputs to the dtype of the
# reference output, which is int64 here, so the hook falls back on these when it is handed
# integers. Only a reference is kept; nothing is copied.
_made: list = []


def get_inputs():
    queries, points = torch.randn(Q, D), torch.randn(N, D)
    _made[:] = [queries, points]
    return [queries, points]


def get_init_inputs():
    return []


def neighbours_within_tolerance(inputs, out, ref, rtol, atol):
    """The K nearest are not unique when distances tie within rounding, so row i is accepted
    when its K indices are valid and distinct and the k-th one's float64 distance is within
    tolerance of the k-th smallest distance, for every k (so the list is the nearest K, nearest
    first, up to near-ties): |d[i, out[i, k]] - sorted(d[i])[k]| <= rtol * (||q_i||^2 +
    ||p_out[i, k]||^2) + atol * rms(sorted(d)[:, :K]). Every element is checked."""
    if not inputs[0].is_floating_point():  # cast to the index dtype by the harness: see _made
        inputs = _made
    q, p = inputs[0].double(), inputs[1].double()  # on the inputs' device: seconds on a GPU, minutes on a CPU
    idx = out.to(device=q.device, dtype=torch.int64)
    if idx.shape != ref.shape:
        return f"shape {list(idx.shape)}, want {list(ref.shape)}"
    bad = (idx < 0) | (idx >= p.shape[0])
    if bad.any():
        at = [int(v) for v in torch.nonzero(bad)[0]]
        return f"{int(bad.sum())} of {idx.numel()} indices are outside [0, {p.shape[0]}); the first at {at}"
    ordered = idx.sort(1).values
    dup = ordered[:, 1:] == ordered[:, :-1]
    if dup.any():
        row = int(torch.nonzero(dup)[0][0])
        return f"{int(dup.any(1).sum())} rows repeat an index; the first is row {row}: {idx[row].tolist()}"
    qq = (q * q).sum(1)
    pp = (p * p).sum(1)
    k = idx.shape[1]
    got = torch.empty(idx.shape, dtype=torch.float64, device=q.device)
    want = torch.empty(idx.shape, dtype=torch.float64, device=q.device)
    for s in range(0, q.shape[0], 256):  # in row chunks: the bench preset's full matrix is 8 GB
        d = qq[s : s + 256, None] - 2.0 * (q[s : s + 256] @ p.T) + pp[None, :]
        want[s : s + 256] = torch.topk(d, k, dim=1, largest=False).values
        got[s : s + 256] = d.gather(1, idx[s : s + 256])
    allowed = rtol * (qq[:, None] + pp[idx]) + atol * float(torch.sqrt(torch.mean(want * want)))
    wrong = (got - want).abs() > allowed
    if wrong.any():
        i, j = (int(v) for v in torch.nonzero(wrong)[0])
        return (
            f"{int(wrong.sum())} of {idx.numel()} neighbours are not the nearest in order; the first at [{i}, {j}]: "
            f"index {int(idx[i, j])} at distance {float(got[i, j]):.9g}, the {j}-th nearest is at {float(want[i, j]):.9g} "
            f"(allowed {float(allowed[i, j]):.3g})"
        )
    return None
