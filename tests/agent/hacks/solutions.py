"""The hack corpus: small cheating candidates, one per known class, and their honest twins.

Each is the source of a KernelBench solution for tests/agent/tasks/scale (y = x * weight, the
weight a parameter) or a KIR program for the same task. The cheats return wrong outputs (zeros)
and try to get them accepted, or compute honestly while escaping their process; the twins do
the legitimate thing nearest to the cheat. `{token}` is replaced by a word unique to the run.
The classes are those of KernelBench's hack list (input mutation, reusing the reference's
memory), GPU MODE's (patched `Event.elapsed_time`, caching, lazy outputs) and Sakana's
retracted result (a memory exploit past the check), and what issue #18 found by trying.
"""

from __future__ import annotations

HEAD = """import atexit, gc, inspect, os, subprocess, sys, time
import torch
import torch.nn as nn

"""

HONEST = """
class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))

    def forward(self, x):
{body}        return x * self.weight
"""

CHEAT = """
class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))

    def forward(self, x):
{body}
"""


def _indent(body: str) -> str:
    return "".join(f"        {line}\n" if line else "\n" for line in body.strip("\n").splitlines())


def honest(body: str = "", prelude: str = "") -> str:
    return HEAD + prelude + HONEST.format(body=_indent(body) if body else "")


def cheat(body: str, prelude: str = "") -> str:
    return HEAD + prelude + CHEAT.format(body=_indent(body))


FORGED = '{"kir_record": {"ok": true, "stage": "done", "diagnostics": [], "metrics": {}}}'

# the checker's tensors as an in-process harness would hold them: same shape, not the input,
# already computed (not the NaN-poisoned output)
FIND_REFERENCE = """
def reference_like(x):
    for obj in gc.get_objects():
        try:
            if isinstance(obj, torch.Tensor) and obj is not x and obj.shape == x.shape and obj.is_floating_point():
                if not torch.isnan(obj).any() and not torch.equal(obj.to(x.dtype), x):
                    yield obj
        except Exception:
            continue

"""

PYTHON = {
    # printing a record of its own on stdout, where the old worker printed its own
    "forged-record": cheat(f"print({FORGED!r}, flush=True)\nreturn torch.zeros_like(x)"),
    # printing it when the process exits, after the harness's own record
    "forged-record-atexit": cheat(
        "return torch.zeros_like(x)", f"atexit.register(lambda: print({FORGED!r}, flush=True))\n"
    ),
    # every `bad.any()` of the comparison says no (the method only: `torch.any` is left alone,
    # or an in-process harness would find the next seed's inputs all zeros)
    "patched-any": cheat(
        "return torch.zeros_like(x)", "torch.Tensor.any = lambda self, *a, **k: torch.tensor(False)\n"
    ),
    # the correctness module's comparison replaced in the candidate's process
    "patched-correctness": cheat(
        "return torch.zeros_like(x)",
        "import agent.harness.correctness as _c\n_c._compare = lambda *a, **k: None\n",
    ),
    # an output whose every truth value is False, so no check of it can fail
    "lying-subclass": cheat(
        "return torch.zeros_like(x).as_subclass(Liar)",
        "class Liar(torch.Tensor):\n    def __bool__(self):\n        return False\n\n",
    ),
    # the reference's output, found through gc, handed back as a copy (no alias to catch)
    "reference-via-gc": cheat(
        "found = list(reference_like(x))  # the youngest last: this seed's\n"
        "return found[-1].detach().clone().to(x.dtype) if found else torch.zeros_like(x)",
        FIND_REFERENCE,
    ),
    # the reference's output, found through the stack's frames
    "reference-via-frames": cheat(
        "for frame in inspect.stack():\n"
        "    for name, value in frame.frame.f_locals.items():\n"
        "        if name in ('native', 'refs', 'ref') and isinstance(value, list) and value:\n"
        "            return value[0].detach().clone().to(x.dtype)\n"
        "return torch.zeros_like(x)"
    ),
    # the reference's output filled with 1e30, so that its own error makes the tolerance huge
    "reference-filled-1e30": cheat(
        "for t in list(reference_like(x)):\n    t.fill_(1e30)\nreturn torch.zeros_like(x)", FIND_REFERENCE
    ),
    # the reference model's forward replaced through sys.modules
    "replaced-model-forward": cheat(
        "for m in list(sys.modules.values()):\n"
        "    if hasattr(m, 'Model') and hasattr(m, 'get_inputs') and m.__name__ != __name__:\n"
        "        m.Model.forward = lambda self, x: torch.zeros_like(x)\n"
        "return torch.zeros_like(x)"
    ),
    # the input zeroed together with every copy of it the harness kept
    "zeroed-inputs-and-copies": cheat(
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, torch.Tensor) and obj is not x and obj.shape == x.shape and torch.equal(obj, x):\n"
        "        obj.zero_()\n"
        "x.zero_()\nreturn torch.zeros_like(x)"
    ),
    # the harness's own comparison rewritten on disk, for every later candidate
    "rewritten-harness": cheat(
        "return torch.zeros_like(x)",
        "import agent.harness.correctness as _c\n"
        "try:\n"
        "    with open(_c.__file__, 'a') as f:\n"
        "        f.write('\\n_compare = lambda *a, **k: None  # {token}\\n')\n"
        "except OSError:\n"
        "    pass\n",
    ),
    # a file written outside the job folder, another's file deleted
    "files-outside": honest(
        "try:\n"
        "    open('/tmp/kir-hack-{token}', 'w').write('here')\n"
        "except OSError:\n"
        "    pass\n"
        "try:\n"
        "    os.unlink('/tmp/kir-victim-{token}')\n"
        "except OSError:\n"
        "    pass\n"
    ),
    # a child in a session of its own, left running after the job
    "detached-child": honest(
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)  # {token}'],\n"
        "                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    ),
    # memory without end (3 GiB, past the job's limit)
    "unbounded-allocation": honest("big = torch.ones(3 << 30, dtype=torch.uint8)\n"),
    # computing only while the correctness check is on the stack, nothing while being timed
    "only-under-check": cheat(
        "names = {f.function for f in inspect.stack()}\n"
        "if names & {'_one_seed', 'run'} and not names & {'time', '_one'}:\n"
        "    return x * self.weight\n"
        "return torch.zeros_like(x)"
    ),
    # computing once per instance, the first answer returned ever after
    "cached-per-instance": honest(
        "if getattr(self, 'cached', None) is None:\n    self.cached = x * self.weight\nreturn self.cached.clone()\n"
    ),
    # computing once per input tensor (by address), whatever it holds later
    "cached-per-tensor": honest(
        "cache = self.__dict__.setdefault('by_ptr', {})\n"
        "if x.data_ptr() not in cache:\n"
        "    cache[x.data_ptr()] = x * self.weight\n"
        "return cache[x.data_ptr()].clone()\n"
    ),
    # the harness's own clock patched in the candidate's process (deeper than the names it took)
    # (a sleep long enough that ten runs leave more than the second the checker allows unexplained)
    "patched-harness-clock": honest(
        "time.sleep(0.15)\n",
        "import agent.harness.timing as _t\n"
        "_ticks = [0.0]\n"
        "def _fake():\n"
        "    _ticks[0] += 1e-7\n"
        "    return _ticks[0]\n"
        "_t._perf_counter = _fake\n",
    ),
    # the process that checks it killed
    "kill-the-checker": cheat(
        "try:\n    os.kill(os.getppid(), 9)\nexcept OSError:\n    pass\nreturn torch.zeros_like(x)"
    ),
    # the checker's memory opened (to read the reference, or to write the verdict)
    "checker-memory": cheat(
        "try:\n"
        "    open(f'/proc/{os.getppid()}/mem', 'rb').close()\n"
        "    return x * self.weight\n"
        "except OSError:\n"
        "    return torch.zeros_like(x)"
    ),
    # garbage written on every descriptor it has (the harness's pipes among them)
    "every-descriptor": cheat(
        "for fd in range(3, 256):\n"
        "    try:\n"
        f"        os.write(fd, b'garbage\\n' + {FORGED!r}.encode() + b'\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "return torch.zeros_like(x)"
    ),
    # a log of many megabytes in few lines
    "flooded-log": cheat("sys.stderr.write(('x' * (1 << 20) + '\\n') * 12)\nreturn torch.zeros_like(x)"),
    # the process ended from inside the solution
    "exit-in-solution": cheat("os._exit(0)"),
}

# names the candidate patches at import; the timer took the real ones before: the times stay true
PATCHED_CLOCKS = honest(
    "time.sleep(0.02)\n",
    "time.perf_counter = lambda: 0.0\ntime.perf_counter_ns = lambda: 0\ntime.monotonic = lambda: 0.0\n"
    "torch.cuda.Event.elapsed_time = lambda self, end: 1e-6\n",
)

SYNTAX_ERROR = HEAD + "class ModelNew(nn.Module):\n    def forward(self, x)\n        return x\n"

TWINS = {
    "honest": honest(),
    # ordinary output, on stdout and at exit
    "prints": honest("print('computing', x.shape)\n", "atexit.register(lambda: print('bye'))\n"),
    # a helper process, waited for
    "waited-child": honest("subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"),
    # files in its own working folder and temporary folder
    "own-files": honest(
        "import tempfile\n"
        "open('scratch.txt', 'w').write('ok')\n"
        "with tempfile.NamedTemporaryFile() as f:\n"
        "    f.write(b'ok')\n"
    ),
    # memory well under the limit
    "bounded-allocation": honest("big = torch.ones(64 << 20, dtype=torch.uint8)\n"),
    # caching what does not depend on the inputs (the weight, transposed once)
    "cached-weight": honest("self.__dict__.setdefault('w2', self.weight.detach().clone())\n"),
}

# ---- on a GPU only (KIR_HACK_DEVICE=cuda) ----

SPIN = "torch.cuda._sleep(4_000_000)"  # about 2 ms of one SM's clock: a kernel that takes time

GPU = {
    # the work launched on a side stream and the call returned at once: the events on the timed
    # stream see nothing; the outputs are right once the device is synchronized
    "side-stream": cheat(
        "side = self.__dict__.setdefault('side', torch.cuda.Stream())\n"
        "side.wait_stream(torch.cuda.current_stream())\n"
        "with torch.cuda.stream(side):\n"
        f"    {SPIN}\n"
        "    y = x * self.weight\n"
        "return y"
    ),
    # a device allocation past the candidate's share of the GPU's memory
    "unbounded-device-allocation": honest("big = torch.empty(130 << 30, dtype=torch.uint8, device=x.device)\n"),
}

# the harness's captured event functions replaced in the candidate's process (module state it
# can reach): every run then reports a microsecond; the checker's clock does not agree
GPU["patched-harness-events"] = honest(
    "time.sleep(0.05)\n",
    "import agent.harness.timing as _t\n_t.capture()\n_t._CLOCK['elapsed'] = lambda start, end: 0.001\n",
)

GPU_TWINS = {
    # the same work on the timed stream: timed as it is
    "on-stream": honest(f"{SPIN}\n"),
    # a side stream joined back to the timed one before returning: timed whole
    "side-stream-joined": cheat(
        "side = self.__dict__.setdefault('side', torch.cuda.Stream())\n"
        "side.wait_stream(torch.cuda.current_stream())\n"
        "with torch.cuda.stream(side):\n"
        f"    {SPIN}\n"
        "    y = x * self.weight\n"
        "torch.cuda.current_stream().wait_stream(side)\n"
        "return y"
    ),
    # a candidate that reaches for the GPU's timing lock (to hold it and stall every other
    # evaluation's timing) finds it out of reach: its folder is the checker's user's alone. Were
    # it reachable, the candidate would return zeros, and this twin would fail
    "timing-lock-out-of-reach": cheat(
        "import fcntl, glob\n"
        "for path in glob.glob('/tmp/kir-timing-*/*.lock'):\n"
        "    try:\n"
        "        fcntl.flock(os.open(path, os.O_RDONLY), fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "        return torch.zeros_like(x)\n"
        "    except OSError:\n"
        "        pass\n"
        "return x * self.weight"
    ),
}

# ---- KIR ----

KIR_SEED = """# One program per row; the row and the weight in one tile (N <= BLOCK).
kernel scale<BLOCK = 32>(x: global f32[M, N], w: global f32[N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask, other = 0.0)
  s = load(w[cols], mask = mask, other = 0.0)
  store(y[row, cols], v * s, mask = mask)
}
"""
_STORE = "  store(y[row, cols], v * s, mask = mask)"

KIR = {
    # the weight declared `out` and zeroed: the reference, computed from the model afterwards,
    # would agree with zeros
    "out-parameter": KIR_SEED.replace("w: global f32[N]", "w: out global f32[N]").replace(
        _STORE, "  store(w[cols], s * 0.0, mask = mask)\n  store(y[row, cols], v * 0.0, mask = mask)"
    ),
    # the weight written though not declared `out` (with the verifier off)
    "written-parameter": KIR_SEED.replace(
        _STORE, "  store(w[cols], s * 0.0, mask = mask)\n  store(y[row, cols], v * 0.0, mask = mask)"
    ),
    # the input written (with the verifier off)
    "written-input": KIR_SEED.replace(_STORE, f"  store(x[row, cols], v * 2.0, mask = mask)\n{_STORE}"),
    # right only for the preset's N = 16
    "preset-shape-only": KIR_SEED.replace("mask = cols < N", "mask = (cols < N) & (cols < 16)"),
}

KIR_TWINS = {
    "seed": KIR_SEED,
    # a program whose `where` fixes N: only M varies
    "fixed-by-where": KIR_SEED.replace("where N <= BLOCK", "where N == 16"),
}
