"""A KernelBench problem's `Model.forward` as a torch.fx graph with every value's shape and dtype.

The model and its inputs are made on the `meta` device under a preset (`Task._apply`), so the
shapes of the file's own sizes cost no memory; `torch.nn` modules stay calls of their own
(`call_module`), and every node keeps the line of the problem file it came from, for the
diagnostics of ops the frontend does not translate.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.tasks.task import Task, TaskError
from kir.diagnostics import Diagnostic, KirError, Span


class FrontendError(KirError):
    """A problem the frontend cannot make a seed for: one located diagnostic."""


def error(rule: str, message: str, file: Path | str, line: int = 1, hint: str = "") -> FrontendError:
    return FrontendError(Diagnostic(rule, "error", Span(line, 1, line, 2, str(file)), message, hint))


@dataclass
class Traced:
    """The graph of `Model.forward` under one preset."""

    task: Task
    preset: str
    graph: Any  # torch.fx.Graph
    model: Any  # the meta-device model (its parameters' shapes, its modules' settings)
    inputs: list[Any]  # get_inputs() on the meta device: tensors, and the Python scalars as they are
    lines: dict[str, int] = field(default_factory=dict)  # node name -> line of the problem file

    def line(self, node) -> int:
        return self.lines.get(node.name, self.forward_line)

    @property
    def forward_line(self) -> int:
        text = self.task.reference.read_text()
        m = re.search(r"^\s*def forward\(", text, re.M)
        return text[: m.start()].count("\n") + 1 if m else 1

    def module(self, node):
        """The `torch.nn` module a `call_module` node calls."""
        return self.model.get_submodule(node.target)


def trace(task: Task, preset: str) -> Traced:
    """The traced forward of the task's model under `preset` (a `FrontendError` when the model
    cannot be made or traced: the line of the problem file that raised)."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    file = task.reference
    try:
        task._apply(task.preset(preset))
        with torch.device("meta"):
            torch.manual_seed(0)
            init = task.call("get_init_inputs()", task.module.get_init_inputs)
            model = task.call("Model(*get_init_inputs())", task.module.Model, *init)
            inputs = list(task.call("get_inputs()", task.module.get_inputs))
    except TaskError as err:
        raise FrontendError(list(err.diagnostics)) from None
    model.train(task.mode == "train")

    class Tracer(torch.fx.Tracer):
        def __init__(self) -> None:
            super().__init__()
            self.record_stack_traces = True

    try:
        graph = Tracer().trace(model)
        gm = torch.fx.GraphModule(model, graph)
    except Exception as err:  # noqa: BLE001 - any failure of tracing user code is a diagnostic
        raise error(
            "frontend.trace",
            f"Model.forward cannot be traced: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
            file,
            _line_in(err, file),
            "control flow that depends on tensor values cannot be traced (torch.fx)",
        ) from None
    try:
        ShapeProp(gm).propagate(*inputs)
    except Exception as err:  # noqa: BLE001
        raise error(
            "frontend.trace", f"Model.forward fails on the meta device: {type(err).__name__}: {err}", file, 1
        ) from None
    traced = Traced(task, preset, gm.graph, model, inputs)
    for node in gm.graph.nodes:
        line = _line_of_trace(node.stack_trace or "", file)
        if line:
            traced.lines[node.name] = line
    return traced


def _line_of_trace(stack: str, file: Path) -> int | None:
    """The last line of `file` in a node's recorded stack trace."""
    found = None
    for m in re.finditer(r'File "([^"]+)", line (\d+)', stack):
        if Path(m.group(1)).resolve() == file.resolve():
            found = int(m.group(2))
    return found


def _line_in(err: BaseException, file: Path) -> int:
    line = 1
    for frame in traceback.extract_tb(err.__traceback__):
        if Path(frame.filename).resolve() == file.resolve():
            line = frame.lineno or 1
    return line


def meta(node) -> tuple[tuple[int, ...], str] | None:
    """A node's tensor shape and torch dtype name, or None when its value is not one tensor."""
    tm = node.meta.get("tensor_meta")
    if tm is None or not hasattr(tm, "shape"):
        return None
    return tuple(int(d) for d in tm.shape), str(tm.dtype).removeprefix("torch.")
