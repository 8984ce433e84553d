"""Tasks: what a kernel must compute, in the KernelBench file format plus KIR metadata.

A task is a folder (benchmarks/tasks/<name>/) holding

- `reference.py`: a PyTorch reference in the KernelBench format: a `Model(nn.Module)` whose
  `forward` computes the outputs, `get_inputs()` and `get_init_inputs()`. Module-level variables
  (`batch_size = 16`) set the shapes; any KernelBench problem file loads as it is.
- `task.toml` (optional): KIR's metadata, every key optional:

      description = "row softmax"
      dtype = "bf16"              # floating inputs, weights and outputs are made in this dtype
      reference_precision = "f64"  # the precision of the reference the outputs are compared to
      flops = "5 * M * N"          # counted flops (an expression over the preset's variables)
      bytes = "2 * NB * L * D * 2" # counted bytes, where the tensors' sizes are not the traffic
                                   # (a gather reads rows many times; default: the sizes of the
                                   # inputs, outputs and parameters)
      tolerance = { rtol = 2e-2, atol = 2e-2 }   # overrides the dtype's default
      mode = "eval"                # the models' mode: "eval" (default) or "train" (a bare
                                   # KernelBench file: train, as KernelBench runs it)

      [presets.test]               # module-level variables of reference.py, overridden
      M = 8
      N = 300
      [presets.bench]
      M = 8192
      N = 8192

      [bind]                       # kernel argument -> the tensor it is
      x = "inputs[0]"              # the i-th tensor of get_inputs()
      y = "outputs[0]"             # the i-th output of forward (a lone tensor is outputs[0])
      w = "model.weight"           # a parameter or buffer of the Model

      [outputs.y]                  # how one output is compared (default: by dtype)
      compare = "close"            # "close", "exact" or "reference.py:function_name"

      [vary]                       # other shapes for one round of the correctness protocol:
      M = [1, 16]                  #   [lowest, highest] or [lowest, highest, step], drawn from
      N = [128, 512, 128]          #   the last seed (a KIR program: only shapes its `where`
                                   #   admits; a variable it fixes keeps the preset's value)

      [shapes.bench]               # kernel shape symbols that are not variables of reference.py
      M = 8192                     #   (a frontend seed's `M` for the file's `batch_size`): the
                                   #   cost model's shapes at that preset

      [programs.seed]              # KIR programs for the task, by name
      file = "seed.kir"
      params.bench = { BLOCK = 8192 }   # compile-time parameters per preset
      backends = ["gluon"]         # optional: the only backends of its level it runs through

  Without `[bind]`, kernel arguments bind by position: the inputs of `get_inputs()` in order,
  then one `out` argument per output. An argument declared with fewer dimensions than its
  (contiguous) tensor binds to the view that merges the trailing dimensions: a kernel may take
  the PyTorch weight [C, C, KW] as `w: global bf16[C, C * KW]`.

A preset named `scale:F` (0 < F <= 1) needs no table: every size variable of reference.py (a
top-level integer literal of at least 64) times F, at least 16 and a multiple of 16 where the
size was; the top-level values derived from the sizes are computed again under every preset.

By name (`kir search softmax`), a task is found in the suite (benchmarks/tasks/) and then in the
folders of `$KIR_TASK_PATH` (os.pathsep-separated; `kir seed PROBLEM.py --out DIR/NAME` makes
such folders from KernelBench files).

Loading a task runs none of its code: reference.py is imported on first use of `Task.module`
(in the harness's checker process, not in a caller such as `kir run`).

A `compare = "reference.py:fn"` hook is called as `fn(inputs, out, ref, rtol, atol)` with the
inputs (in the reference precision), the candidate's output and the reference's (both in the
reference precision), and returns None when they agree or a message saying where they do not.
It is for outputs whose right answer is not unique (the index of a minimum when two distances
tie within rounding); the hook must still check every element.
"""

from agent.tasks.task import (
    Preset,
    Program,
    Task,
    TaskError,
    find_task,
    load_suite,
    load_task,
    task_dirs,
    task_names,
)

__all__ = [
    "Preset", "Program", "Task", "TaskError", "find_task", "load_suite", "load_task", "task_dirs", "task_names",
]  # fmt: skip
