"""Whatever a task.toml says, loading it gives a task or one located `TaskError`, never a
traceback (derandomized hypothesis mutations of a real task.toml)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.tasks import TaskError, load_task

SOFTMAX = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks" / "softmax"
TOML = (SOFTMAX / "task.toml").read_text()
PIECES = ['"', "=", "[", "]", "{", "}", ",", "\n", "x", "0", "-1", "1e400", "inputs[9]", "outputs[0]", "model.w",
          "programs", "params", "bench", "test", "file", "seed.kir", "bf17", "f32", "reference.py:nope", "compare",
          "tolerance", "rtol", "flops", "__import__('os')", "M", "N", "1 / 0", "true", "bytes", "backends",
          '["gluon"]', '["nope"]', "backends = 3\n"]  # fmt: skip


@st.composite
def mutated(draw):
    text = TOML
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = min(len(text), i + draw(st.integers(0, 12)))
        text = text[:i] + draw(st.sampled_from(PIECES)) + text[j:]
    return text


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_a_mutated_task_toml_loads_or_fails_with_a_located_diagnostic(text):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "softmax"
        shutil.copytree(SOFTMAX, folder)
        (folder / "task.toml").write_text(text)
        try:
            task = load_task(folder)
        except TaskError as err:
            (diag,) = err.diagnostics
            assert diag.span is not None and diag.span.line >= 1 and diag.message
            return
        for preset in task.presets:  # what loaded must also evaluate
            try:
                task.counted_flops(preset)
                task.counted_bytes(preset)
            except TaskError:
                pass


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"


KEYS = ["description", "dtype", "reference_precision", "flops", "bytes", "tolerance", "presets", "bind", "outputs",
        "programs", "M", "N", "x", "y", "seed", "tuned", "file", "params", "test", "bench", "rtol", "atol", "compare",
        "BLOCK"]  # fmt: skip
SCALARS = st.one_of(
    st.integers(-3, 10**6), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["seed.kir", "bf16", "f32", "inputs[0]", "outputs[0]", "model.w", "close", "exact", "M * N", "", "x"]),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(KEYS[:10]), VALUES, max_size=6))
def test_a_task_toml_of_any_shape_loads_or_fails_with_a_located_diagnostic(meta):
    text = "".join(f"{key} = {_toml_value(value)}\n" for key, value in meta.items())
    test_a_mutated_task_toml_loads_or_fails_with_a_located_diagnostic.hypothesis.inner_test(text)


def test_a_program_names_the_backends_it_runs_through():
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "softmax"
        shutil.copytree(SOFTMAX, folder)
        entry = '[programs.tuned]\nfile = "tuned.kir"\n'
        assert entry in TOML
        (folder / "task.toml").write_text(TOML.replace(entry, entry + 'backends = ["triton"]\n'))
        assert load_task(folder).programs["tuned"].backends == ("triton",)
        (folder / "task.toml").write_text(TOML.replace(entry, entry + 'backends = ["tritn"]\n'))
        try:
            load_task(folder)
        except TaskError as err:
            (diag,) = err.diagnostics
            assert diag.rule == "task.program" and "backends" in diag.message and "triton" in diag.hint
        else:
            raise AssertionError("an unknown backend name loaded")


def test_loading_a_task_runs_none_of_its_code():
    """`kir run` loads the task in the caller's process: a reference that would exit or raise at
    import is imported only on first use of `Task.module`, as a located `TaskError`."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "softmax"
        shutil.copytree(SOFTMAX, folder)
        (folder / "reference.py").write_text(
            "raise RuntimeError('imported')\n" + (SOFTMAX / "reference.py").read_text()
        )
        task = load_task(folder)
        assert set(task.programs) >= {"seed", "tuned"}
        for _ in range(2):  # the same error each time it is asked for
            try:
                task.module  # noqa: B018
            except TaskError as err:
                (diag,) = err.diagnostics
                assert diag.rule == "task.reference" and diag.span.line == 1 and "imported" in diag.message
            else:
                raise AssertionError("the reference imported")


def test_a_vary_rule_is_ranges_of_integers_over_the_reference_s_variables():
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "softmax"
        shutil.copytree(SOFTMAX, folder)
        toml = TOML.split("[vary]")[0] + "[bind]" + TOML.split("[bind]", 1)[1] if "[vary]" in TOML else TOML
        for rule, ok in [("M = [1, 16]\nN = [128, 512, 128]", True), ("M = [4, 2]", False), ("M = [1, 2, 0]", False),
                         ("M = [1.5, 2]", False), ("M = 3", False), ("Q = [1, 2]", "module")]:  # fmt: skip
            (folder / "task.toml").write_text(toml.replace("[bind]", f"[vary]\n{rule}\n\n[bind]", 1))
            try:
                task = load_task(folder)
                task.module  # noqa: B018
            except TaskError as err:
                (diag,) = err.diagnostics
                assert ok is not True and diag.rule == "task.vary" and diag.span.line > 1, (rule, diag)
                continue
            assert ok is True, rule
            assert task.vary == {"M": (1, 16, 1), "N": (128, 512, 128)}
            import random

            shape = task.draw_shape(random.Random(0))
            assert 1 <= shape["M"] <= 16 and shape["N"] in (128, 256, 384, 512)
