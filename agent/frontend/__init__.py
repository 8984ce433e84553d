"""The PyTorch frontend: a KernelBench problem file -> a task folder with a seed KIR program.

The package's modules: `trace` (the graph), `ops` (what PyTorch's ops are), `emit` (the seed's
forms), `make` (the task folder), `solution` (the `ModelNew` file), `cli` (`kir seed`, `kir
solve`). Importing the package imports none of them (`kir --help` loads `cli` alone).

    from agent.frontend.make import seed_task
    made = seed_task("problem.py", "out/problem")   # out/problem/{reference.py, task.toml, seed.kir}
    made.seed.text                                   # the KIR program

`trace` runs `Model.forward` through torch.fx on the meta device (the file's own sizes cost no
memory); `make_seed` writes one kernel for the graph (agent/frontend/emit.py: the flat, rows and
gemm forms); `seed_task` writes the task folder around it: the problem file as `reference.py`
(run as KernelBench runs it: training mode), a `test` preset that scales every size variable of
the file down (`Task.scaled`: what the CPU interpreters check) and the file's own sizes as
`bench`, every kernel argument bound to the input, parameter or output it is, and the seed's
parameters per preset. An op, shape or output the frontend does not take is a `FrontendError`
located at the line of the problem file that makes it.
"""
