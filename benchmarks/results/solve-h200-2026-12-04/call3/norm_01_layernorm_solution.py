"""KernelBench solution of norm_01_layernorm.py, written by `kir solve`: the KIR program below, lowered to
Triton, launched by `ModelNew.forward`. The problem's own source comes first, unchanged."""

import contextlib
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's interpreter runs the kernel

# ---- the problem ---------------------------------------------------------------------------

"""LayerNorm over the last dim, with affine weights."""

import torch
import torch.nn as nn

batch_size = 16
seq_len = 1024
hidden = 1024


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]


# ---- the kernel: lowering.emit.triton of the KIR program in _KIR ----------------------------


import triton
import triton.language as tl


@triton.jit
def norm_01_layernorm(x, w, b, y, R0, R1, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    p = tl.program_id(0)
    row1 = tl.where(tl.full((), R1, tl.int32) == 0, p, p % tl.where(tl.full((), R1, tl.int32) == 0, 1, tl.full((), R1, tl.int32)))
    rest1 = tl.where(tl.full((), R1, tl.int32) == 0, -1, p // tl.where(tl.full((), R1, tl.int32) == 0, 1, tl.full((), R1, tl.int32)))
    x1 = tl.load(x + rest1 * (R1 * N) + row1 * N + cols, mask=mask, other=0.0)
    t2 = tl.where(mask, x1, 0.0)
    t3 = tl.div_rn(tl.sum(t2, axis=0), tl.cast(N, tl.float32))
    t4 = tl.where(mask, x1 - t3, 0.0)
    _t0 = tl.div_rn(tl.sum(t4 * t4, axis=0), tl.cast(N, tl.float32)) + 1.0e-05
    t5 = tl.rsqrt(_t0)
    w6 = tl.load(w + cols, mask=mask, other=0.0)
    w7 = tl.load(b + cols, mask=mask, other=0.0)
    t8 = t4 * t5 * w6 + w7
    tl.store(y + rest1 * (R1 * N) + row1 * N + cols, t8, mask=mask)

# ---- what ModelNew launches ---------------------------------------------------------------------

_KIR = '# rows seed of norm_01_layernorm.py, written by the frontend (agent/frontend)\nkernel norm_01_layernorm<BLOCK = 1024>(\n    x: global f32[R0, R1, N],\n    w: global f32[N],\n    b: global f32[N],\n    y: out global f32[R0, R1, N],\n)\n  where N <= BLOCK\n  target sm_90 grid(R0 * R1) warps(4)\n{\n  cols = arange(0, BLOCK)\n  mask = cols < N\n  p = program_id(0)\n  row1 = p % R1\n  rest1 = p / R1\n  x1 = load(x[rest1, row1, cols], mask = mask)\n  t2 = where(mask, x1, 0.0)\n  t3 = sum(t2, axis = 0) / cast<f32>(N)\n  t4 = where(mask, x1 - t3, 0.0)\n  t5 = rsqrt(sum(t4 * t4, axis = 0) / cast<f32>(N) + 1e-05)\n  w6 = load(w[cols], mask = mask)\n  w7 = load(b[cols], mask = mask)\n  t8 = t4 * t5 * w6 + w7\n  store(y[rest1, row1, cols], t8, mask = mask)\n}\n'

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
        tensors.append(_view(inputs[0], 3))  # x
        tensors.append(_view(self.norm.weight, 1))  # w
        tensors.append(_view(self.norm.bias, 1))  # b
        tensors.append(_view(outs[0], 3))  # y
        symbols = {}
        for index, dim, name in [(0, 0, 'R0'), (0, 1, 'R1'), (0, 2, 'N'), (1, 0, 'N'), (2, 0, 'N'), (3, 0, 'R0'), (3, 1, 'R1'), (3, 2, 'N')]:
            symbols.setdefault(name, tensors[index].shape[dim])
        assert (symbols['N'] <= 1024), "the kernel needs N <= BLOCK (its parameters: {'BLOCK': 1024})"
        grid = ((symbols['R0'] * symbols['R1']),)
        launch = norm_01_layernorm[grid]
        with _interpreting() if os.environ.get("TRITON_INTERPRET") == "1" else contextlib.nullcontext():
            launch(*tensors, *[symbols[s] for s in ['R0', 'R1', 'N']], num_warps=4, **{'BLOCK': 1024})
        return outs[0] if len(outs) == 1 else tuple(outs)
