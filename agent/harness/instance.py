"""One instance of a task: the model and inputs of a preset and a seed, on a device, and the
reference outputs computed from them.

The model is `Model(*get_init_inputs())` after `torch.manual_seed(seed)`; inputs come from the
reference's own `get_inputs()` after `torch.manual_seed(seed + 1)`, with the preset's module
variables set (and `shape`'s on top: the varied shapes of `Task.vary`); floating tensors are
then cast to the task's dtype. The reference is the same `Model` run in a higher precision
(float64 by default) on the same values: floating inputs and floating parameters are widened,
integer ones kept. The instance keeps what a KernelBench solution is built from in the
candidate's process: the init values and the CPU generator's state right after them (so that
`ModelNew` creating the same parameters in the same order gets the same values).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from agent.tasks.task import Task, TaskError, _error

TORCH_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}


def torch_dtype(name: str):
    import torch

    return getattr(torch, TORCH_DTYPES[name])


@dataclass
class Instance:
    task: Task
    preset: str
    seed: int
    device: str
    model: Any  # torch.nn.Module in the task's dtype, on the device
    inputs: list  # tensors (and other values) as forward takes them
    init: list = field(default_factory=list)  # get_init_inputs()
    rng_state: Any = None  # torch's CPU generator state after get_init_inputs()
    shape: dict[str, int] = field(default_factory=dict)  # the variables set over the preset's

    def tensors(self) -> list:
        return [x for x in self.inputs if _is_tensor(x)]


def _is_tensor(x) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def _cast(x, dtype):
    if _is_tensor(x) and x.is_floating_point() and dtype is not None:
        return x.to(dtype)
    return x


def make_instance(task: Task, preset: str, seed: int, device: str = "cpu", shape: dict | None = None) -> Instance:
    import torch

    task._apply(task.preset(preset), shape)
    dtype = torch_dtype(task.dtype) if task.dtype else None
    torch.manual_seed(seed)
    init = task.call("get_init_inputs()", task.module.get_init_inputs)
    if not isinstance(init, list | tuple):
        raise _error("task.reference", "get_init_inputs() must return a list", task.reference_file)
    rng_state = torch.get_rng_state()
    model = task.call("Model(*get_init_inputs())", task.module.Model, *init)
    if not isinstance(model, torch.nn.Module):
        raise _error("task.reference", "Model is not a torch.nn.Module", task.reference_file)
    model = model.to(device)
    if dtype is not None:
        model = model.to(dtype)
    model.train(task.mode == "train")
    inputs = make_inputs(task, preset, seed, device, shape)
    return Instance(task, preset, seed, device, model, inputs, list(init), rng_state, dict(shape or {}))


def make_inputs(task: Task, preset: str, seed: int, device: str = "cpu", shape: dict | None = None) -> list:
    """The inputs of seed `seed` (those of `make_instance(..., seed)`), for another model too:
    the timing's input sets share one model."""
    import torch

    task._apply(task.preset(preset), shape)
    dtype = torch_dtype(task.dtype) if task.dtype else None
    torch.manual_seed(seed + 1)
    raw = None
    if device != "cpu":
        # made on the device: at a GPU preset's shapes, drawing them on the CPU and copying them
        # over took seconds of every evaluation; a get_inputs() that cannot run there (a CPU
        # generator, numpy) draws them on the CPU as written
        try:
            with torch.device(device):
                raw = task.call("get_inputs()", task.module.get_inputs)
        except TaskError:
            torch.manual_seed(seed + 1)
    if raw is None:
        raw = task.call("get_inputs()", task.module.get_inputs)
    if not isinstance(raw, list | tuple):
        raise _error("task.reference", "get_inputs() must return a list", task.reference_file)
    inputs = [_cast(x.to(device) if _is_tensor(x) else x, dtype) for x in raw]
    for i, x in enumerate(inputs):
        if _is_tensor(x) and x.numel() and x.is_floating_point() and not torch.any(x != 0):
            raise _error(
                "task.inputs",
                f"get_inputs() made input {i} all zeros: a kernel that skips work would pass",
                task.reference_file,
                hint="draw inputs with both signs, e.g. torch.randn",
            )
    return inputs


def as_outputs(value) -> list:
    """forward's result as a list of tensors."""
    if _is_tensor(value):
        return [value]
    if isinstance(value, list | tuple) and all(_is_tensor(v) for v in value):
        return list(value)
    raise TypeError(f"forward returned {type(value).__name__}, not a tensor or a tuple of tensors")


def run_model(inst: Instance, model, inputs: list, what: str) -> list:
    import torch

    with torch.no_grad():
        value = inst.task.call(what, model, *inputs)
    try:
        return as_outputs(value)
    except TypeError as err:
        raise _error("task.reference", str(err), inst.task.reference_file) from None


def reference_outputs(inst: Instance, inputs: list | None = None) -> list:
    """The outputs in the reference precision, from widened copies of the model and inputs
    (the instance's own, or `inputs` for the same model)."""
    precision = torch_dtype(inst.task.reference_precision)
    model = copy.deepcopy(inst.model).to(precision)
    inputs = [_cast(x.clone() if _is_tensor(x) else x, precision) for x in (inst.inputs if inputs is None else inputs)]
    outs = run_model(inst, model, inputs, "the reference (in high precision)")
    return [o.detach() for o in outs]


def release(device: str) -> None:
    """Give the memory PyTorch keeps cached on a GPU back to the device: the reference's peak
    (knn_topk's is 26 GB at the bench shapes) would otherwise stay held by this checker while
    other checks on the same GPU need it."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def native_outputs(inst: Instance, inputs: list | None = None) -> list:
    """The model's outputs in the task's own dtype, on clones of the inputs (the shapes and dtypes
    the candidate must produce)."""
    inputs = [x.clone() if _is_tensor(x) else x for x in (inst.inputs if inputs is None else inputs)]
    return [o.detach() for o in run_model(inst, inst.model, inputs, "Model.forward")]


__all__ = [
    "Instance",
    "TaskError",
    "make_inputs",
    "make_instance",
    "native_outputs",
    "reference_outputs",
    "release",
    "torch_dtype",
]
