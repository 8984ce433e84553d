"""KernelBench solution of argreduce_01_argmax_last_dim.py, written by `kir solve`: the KIR program below, lowered to
Triton, launched by `ModelNew.forward`. The problem's own source comes first, unchanged."""

import contextlib
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's interpreter runs the kernel

# ---- the problem ---------------------------------------------------------------------------

"""Argmax over the last dim."""

import torch
import torch.nn as nn

batch_size = 4096
dim = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


# ---- the kernel: lowering.emit.triton of the KIR program in _KIR ----------------------------


import triton
import triton.language as tl


@triton.jit
def _kir_argmax(v1, i1, v2, i2):
    # KIR's argmax: NaN counts as the largest value; ties go to the lower index
    n1 = v1 != v1
    n2 = v2 != v2
    tie = ((v1 == v2) | (n1 & n2)) & (i1 < i2)
    first = (v1 > v2) | (n1 & ~n2) | tie
    return tl.where(first, v1, v2), tl.where(first, i1, i2)


@triton.jit
def argreduce_01_argmax_last_dim(x, y, M, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    row = tl.program_id(0)
    x1 = tl.load(x + row * N + cols, mask=mask, other=0.0)
    t2 = tl.where(mask, x1, float("-inf"))
    t3 = tl.reduce((t2, tl.arange(0, BLOCK)), 0, _kir_argmax)[1]
    tl.store(y + row, t3.to(tl.int64))

# ---- what ModelNew launches ---------------------------------------------------------------------

_KIR = '# rows seed of argreduce_01_argmax_last_dim.py, written by the frontend (agent/frontend)\nkernel argreduce_01_argmax_last_dim<BLOCK = 8192>(x: global f32[M, N], y: out global i64[M])\n  where N <= BLOCK\n  target sm_90 grid(M) warps(4)\n{\n  cols = arange(0, BLOCK)\n  mask = cols < N\n  row = program_id(0)\n  x1 = load(x[row, cols], mask = mask)\n  t2 = where(mask, x1, -inf)\n  t3 = argmax(t2, axis = 0)\n  store(y[row], cast<i64>(t3))\n}\n'

try:  # Triton's interpreter has gaps that KIR's runtime patches (lowering/targets/triton/runtime.py)
    from lowering.targets.triton.runtime import interpreter_mode as _interpreting
except ImportError:
    import contextlib

    _interpreting = contextlib.nullcontext


def _view(t, rank):
    """A tensor as a kernel argument of `rank` dimensions: its trailing dimensions merged."""
    t = t.contiguous()
    return t.flatten(rank - 1) if 0 < rank < t.dim() else t


class ModelNew(Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._shapes = {}

    def _outputs(self, inputs):
        """The reference's output shapes and dtypes for these input shapes (Model.forward on the
        meta device, once per shape)."""
        import copy

        key = tuple((tuple(x.shape), x.dtype) if torch.is_tensor(x) else x for x in inputs)
        if key not in self._shapes:
            model = copy.deepcopy(self).to("meta")
            metas = [torch.empty_like(x, device="meta") if torch.is_tensor(x) else x for x in inputs]
            out = Model.forward(model, *metas)
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            self._shapes[key] = [(tuple(o.shape), o.dtype) for o in outs]
        return self._shapes[key]

    def forward(self, *inputs):
        device = next((x.device for x in inputs if torch.is_tensor(x)), None)
        outs = [torch.empty(s, dtype=d, device=device) for s, d in self._outputs(inputs)]
        tensors = []
        tensors.append(_view(inputs[0], 2))  # x
        tensors.append(_view(outs[0], 1))  # y
        symbols = {}
        for index, dim, name in [(0, 0, 'M'), (0, 1, 'N'), (1, 0, 'M')]:
            symbols.setdefault(name, tensors[index].shape[dim])
        assert (symbols['N'] <= 8192), "the kernel needs N <= BLOCK (its parameters: {'BLOCK': 8192})"
        grid = (symbols['M'],)
        launch = argreduce_01_argmax_last_dim[grid]
        with _interpreting() if os.environ.get("TRITON_INTERPRET") == "1" else contextlib.nullcontext():
            launch(*tensors, *[symbols[s] for s in ['M', 'N']], num_warps=4, **{'BLOCK': 8192})
        return outs[0] if len(outs) == 1 else tuple(outs)
