"""KernelBench solution of elementwise_03_gelu_tanh_bias_add.py, written by `kir solve`: the KIR program below, lowered to
Triton, launched by `ModelNew.forward`. The problem's own source comes first, unchanged."""

import contextlib
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's interpreter runs the kernel

# ---- the problem ---------------------------------------------------------------------------

"""GELU (tanh approximation) of x plus a broadcast row-vector bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2048
dim = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, bias):
        return F.gelu(x + bias, approximate="tanh")


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(dim)]


def get_init_inputs():
    return []


# ---- the kernel: lowering.emit.triton of the KIR program in _KIR ----------------------------


import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def elementwise_03_gelu_tanh_bias_add(x, bias, y, M, N, BLOCK: tl.constexpr):
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    row = tl.program_id(0)
    x1 = tl.load(x + row * N + cols, mask=mask, other=0.0)
    w2 = tl.load(bias + cols, mask=mask, other=0.0)
    t3 = x1 + w2
    t4 = 0.5 * t3 * (1.0 + libdevice.tanh(0.7978846 * (t3 + 0.044715 * t3 * t3 * t3)))
    tl.store(y + row * N + cols, t4, mask=mask)

# ---- what ModelNew launches ---------------------------------------------------------------------

_KIR = '# rows seed of elementwise_03_gelu_tanh_bias_add.py, written by the frontend (agent/frontend)\nkernel elementwise_03_gelu_tanh_bias_add<BLOCK = 1024>(\n    x: global f32[M, N],\n    bias: global f32[N],\n    y: out global f32[M, N],\n)\n  target sm_90 grid(M, cdiv(N, BLOCK)) warps(4)\n{\n  cols = program_id(1) * BLOCK + arange(0, BLOCK)\n  mask = cols < N\n  row = program_id(0)\n  x1 = load(x[row, cols], mask = mask)\n  w2 = load(bias[cols], mask = mask)\n  t3 = x1 + w2\n  t4 = 0.5 * t3 * (1.0 + tanh(0.7978845608028654 * (t3 + 0.044715 * t3 * t3 * t3)))\n  store(y[row, cols], t4, mask = mask)\n}\n'

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
        tensors.append(_view(inputs[1], 1))  # bias
        tensors.append(_view(outs[0], 2))  # y
        symbols = {}
        for index, dim, name in [(0, 0, 'M'), (0, 1, 'N'), (1, 0, 'N'), (2, 0, 'M'), (2, 1, 'N')]:
            symbols.setdefault(name, tensors[index].shape[dim])

        grid = (symbols['M'], ((symbols['N']) + (1024) - 1) // (1024),)
        launch = elementwise_03_gelu_tanh_bias_add[grid]
        with _interpreting() if os.environ.get("TRITON_INTERPRET") == "1" else contextlib.nullcontext():
            launch(*tensors, *[symbols[s] for s in ['M', 'N']], num_warps=4, **{'BLOCK': 1024})
        return outs[0] if len(outs) == 1 else tuple(outs)
