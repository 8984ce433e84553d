"""KernelBench solution of softmax_02_log_softmax.py, written by `kir solve`: the KIR program below, lowered to
Triton, launched by `ModelNew.forward`. The problem's own source comes first, unchanged."""

import contextlib
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's interpreter runs the kernel

# ---- the problem ---------------------------------------------------------------------------

"""LogSoftmax over the last dim."""

import torch
import torch.nn as nn

batch_size = 16384
dim = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


# ---- the kernel: lowering.emit.triton of the KIR program in _KIR ----------------------------


import triton
import triton.language as tl


@triton.jit
def _kir_max(a, b):
    # KIR's maximum: a NaN in either operand gives NaN
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def softmax_02_log_softmax(x, y, M, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    row = tl.program_id(0)
    x1 = tl.load(x + row * N + cols, mask=mask, other=0.0)
    t2 = tl.where(mask, x1, float("-inf"))
    t3 = tl.reduce(t2, 0, _kir_max)
    t4 = x1 - t3 - tl.log(tl.sum(tl.exp(t2 - t3), axis=0))
    tl.store(y + row * N + cols, t4, mask=mask)

# ---- what ModelNew launches ---------------------------------------------------------------------

_KIR = '# rows seed of softmax_02_log_softmax.py, written by the frontend (agent/frontend)\nkernel softmax_02_log_softmax<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M, N])\n  where N <= BLOCK\n  target sm_90 grid(M) warps(4)\n{\n  cols = arange(0, BLOCK)\n  mask = cols < N\n  row = program_id(0)\n  x1 = load(x[row, cols], mask = mask)\n  t2 = where(mask, x1, -inf)\n  t3 = max(t2, axis = 0)\n  t4 = x1 - t3 - log(sum(exp(t2 - t3), axis = 0))\n  store(y[row, cols], t4, mask = mask)\n}\n'

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
        tensors.append(_view(outs[0], 2))  # y
        symbols = {}
        for index, dim, name in [(0, 0, 'M'), (0, 1, 'N'), (1, 0, 'M'), (1, 1, 'N')]:
            symbols.setdefault(name, tensors[index].shape[dim])
        assert (symbols['N'] <= 1024), "the kernel needs N <= BLOCK (its parameters: {'BLOCK': 1024})"
        grid = (symbols['M'],)
        launch = softmax_02_log_softmax[grid]
        with _interpreting() if os.environ.get("TRITON_INTERPRET") == "1" else contextlib.nullcontext():
            launch(*tensors, *[symbols[s] for s in ['M', 'N']], num_warps=4, **{'BLOCK': 1024})
        return outs[0] if len(outs) == 1 else tuple(outs)
