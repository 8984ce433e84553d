"""Launch a task's programs and its torch.compile peer once each inside a profiler range, for
Nsight Compute (`ncu --profile-from-start off`) to profile exactly those kernels:

    ncu --profile-from-start off --clock-control none --set full -o attn \\
        python3 benchmarks/profile_task.py benchmarks/tasks/causal_attention \\
        --program pingpong --program pingpong_overlap:ST=3 --backend gluon --peer compile

A program is a name from the task's task.toml or a .kir file, optionally followed by
`:K=V,K=V` parameter overrides. Every candidate and peer is warmed up (compiled, run 3 times)
before the range; inside it each runs once, in the order printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _program(task, spec: str, preset: str):
    from kir.parser import parse_file

    name, _, overrides = spec.partition(":")
    entry = task.programs.get(name)
    if entry is not None:
        file, params = entry.file, entry.params_for(preset)
    else:
        file, params = Path(name), {}
    for kv in filter(None, overrides.split(",")):
        k, _, v = kv.partition("=")
        params[k.strip()] = int(v)
    return parse_file(file), params


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("task")
    ap.add_argument("--program", action="append", default=[], help="NAME or FILE.kir, then :K=V,... (repeatable)")
    ap.add_argument("--backend", "-b", default="gluon")
    ap.add_argument("--preset", default="bench")
    ap.add_argument("--peer", action="append", default=[], choices=["eager", "compile"])
    args = ap.parse_args(argv)

    import torch

    from agent.harness.backends import KirCandidate, bind
    from agent.harness.correctness import poisoned_like
    from agent.harness.instance import make_instance, native_outputs
    from agent.tasks import load_task

    task = load_task(args.task)
    inst = make_instance(task, args.preset, 1000, "cuda")
    outs = native_outputs(inst)
    runs = []
    for spec in args.program:
        program, params = _program(task, spec, args.preset)
        candidate = KirCandidate(program, args.backend, params)
        tensors = bind(program, task, inst.inputs, [poisoned_like(o, 0) for o in outs], inst.model)
        runs.append((f"{spec} ({args.backend})", candidate.launcher(tensors)))
    with torch.no_grad():
        if "eager" in args.peer:
            runs.append(("eager", lambda: inst.model(*inst.inputs)))
        if "compile" in args.peer:
            compiled = torch.compile(inst.model)
            runs.append(("compile", lambda: compiled(*inst.inputs)))
        for _, fn in runs:
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for i, (what, fn) in enumerate(runs):
            print(f"launch {i}: {what}", flush=True)
            fn()
            torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
