"""KernelBench solution of elementwise_06_swish_chain_scalar.py, written by `kir solve`: the KIR program below, lowered to
Triton, launched by `ModelNew.forward`. The problem's own source comes first, unchanged."""

import contextlib
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's interpreter runs the kernel

# ---- the problem ---------------------------------------------------------------------------

"""Swish with a scalar beta plus one: x * sigmoid(beta * x) + 1."""

import torch
import torch.nn as nn

batch_size = 8192
dim = 2048
beta = 1.5


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, beta):
        return x * torch.sigmoid(beta * x) + 1.0


def get_inputs():
    return [torch.randn(batch_size, dim), beta]


def get_init_inputs():
    return []


# ---- the kernel: lowering.emit.triton of the KIR program in _KIR ----------------------------


import triton
import triton.language as tl


@triton.jit
def elementwise_06_swish_chain_scalar(x, y, T, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < T
    x1 = tl.load(x + offs, mask=mask, other=0.0)
    t2 = 1.5 * x1
    t3 = tl.sigmoid(t2)
    t4 = x1 * t3
    t5 = t4 + 1.0
    tl.store(y + offs, t5, mask=mask)

# ---- what ModelNew launches ---------------------------------------------------------------------

_KIR = '# flat seed of elementwise_06_swish_chain_scalar.py, written by the frontend (agent/frontend)\nkernel elementwise_06_swish_chain_scalar<BLOCK = 512>(x: global f32[T], y: out global f32[T])\n  target sm_90 grid(cdiv(T, BLOCK)) warps(4)\n{\n  offs = program_id(0) * BLOCK + arange(0, BLOCK)\n  mask = offs < T\n  x1 = load(x[offs], mask = mask)\n  t2 = 1.5 * x1\n  t3 = sigmoid(t2)\n  t4 = x1 * t3\n  t5 = t4 + 1.0\n  store(y[offs], t5, mask = mask)\n}\n'

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
        tensors.append(_view(inputs[0], 1))  # x
        tensors.append(_view(outs[0], 1))  # y
        symbols = {}
        for index, dim, name in [(0, 0, 'T'), (1, 0, 'T')]:
            symbols.setdefault(name, tensors[index].shape[dim])

        grid = (((symbols['T']) + (512) - 1) // (512),)
        launch = elementwise_06_swish_chain_scalar[grid]
        with _interpreting() if os.environ.get("TRITON_INTERPRET") == "1" else contextlib.nullcontext():
            launch(*tensors, *[symbols[s] for s in ['T']], num_warps=4, **{'BLOCK': 512})
        return outs[0] if len(outs) == 1 else tuple(outs)
