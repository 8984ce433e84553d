"""Kernel arguments to and from `.npz` archives, as `kir interp` exchanges them.

An `.npz` archive cannot hold bf16 or fp8 arrays portably (numpy stores ml_dtypes arrays as raw
bytes), so arguments of the low-precision float dtypes (f16, bf16, f8e4m3, f8e5m2) are read
from float32 (or float16) arrays and rounded to nearest even, and are written back as float32,
which holds every value of those dtypes exactly. Raw two-byte / one-byte arrays (what
`np.savez` makes of an ml_dtypes array) are taken as the bit pattern. Every other dtype is
stored as is and must match the argument's dtype exactly: no silent narrowing.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from kir.diagnostics import Diagnostic, KirError
from kir.dialect.types import GlobalType
from kir.dtypes import DTYPES, DType
from kir.program import Program

LOW_PRECISION = ("f16", "bf16", "f8e4m3", "f8e5m2")
_CARRIERS = (np.dtype(np.float32), np.dtype(np.float16))


def tensor_args(program: Program) -> list[tuple[str, GlobalType]]:
    return [(name, arg.type) for name, arg in program.kernel.args if isinstance(arg.type, GlobalType)]


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """All arrays of an archive; `io.read` if it cannot be opened, `io.npz` if it is not a
    readable `.npz` of plain arrays."""
    from kir.check import read_bytes

    data = read_bytes(path)
    try:
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ValueError("it holds a single array, not an archive")
        with loaded as archive:
            return {name: np.asarray(archive[name]) for name in archive.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError, TypeError) as err:
        raise KirError(
            Diagnostic(
                "io.npz",
                "error",
                None,
                f"{path} is not a readable .npz archive of arrays: {err}",
                "write it with numpy.savez(path, name=array, ...)",
            )
        ) from None


def inputs_for(
    program: Program, arrays: dict[str, np.ndarray], file: str
) -> tuple[dict[str, np.ndarray], list[Diagnostic]]:
    """The interpreter's inputs from an archive's arrays: one per kernel argument, converted to
    the argument's dtype. Output arguments may be absent. Returns the inputs and the
    diagnostics (errors for missing or mistyped arrays, a warning for unused ones)."""
    diags: list[Diagnostic] = []
    inputs: dict[str, np.ndarray] = {}
    args = tensor_args(program)
    names = {n for n, _ in args}
    for name, gtype in args:
        span = program.arg_spans.get(name)
        if name not in arrays:
            if not gtype.is_out:
                diags.append(
                    Diagnostic(
                        "io.input-missing",
                        "error",
                        span,
                        f"input '{name}' is not in {file}",
                        f"save it with numpy.savez(..., {name}=array)",
                    )
                )
            continue
        d = DTYPES[gtype.dtype.data]
        converted, problem = to_dtype(arrays[name], d)
        if converted is None:
            diags.append(
                Diagnostic("io.input-dtype", "error", span, f"'{name}' is {d.name}; {problem}", _dtype_hint(d))
            )
            continue
        rank = len(gtype.shape.data)
        if converted.ndim != rank:
            diags.append(
                Diagnostic(
                    "io.input-shape",
                    "error",
                    span,
                    f"'{name}' has rank {rank}; the array in {file} has shape {list(converted.shape)}",
                )
            )
            continue
        inputs[name] = converted
    for extra in sorted(set(arrays) - names):
        diags.append(
            Diagnostic(
                "io.input-unused",
                "warning",
                None,
                f"array '{extra}' in {file} is not an argument of kernel {program.name}",
                f"arguments: {', '.join(sorted(names))}",
            )
        )
    return inputs, diags


def to_dtype(array: np.ndarray, d: DType) -> tuple[np.ndarray | None, str]:
    """`array` as dtype `d` following the module's rules, or None and the reason."""
    if array.dtype == d.numpy:
        return array, ""
    if d.name in LOW_PRECISION:
        if array.dtype in _CARRIERS:
            # f16 -> f32 is exact, so either carrier rounds once, to nearest even; overflow
            # gives inf (or NaN for f8e4m3, which has no inf), as the dtype's own casts do.
            with np.errstate(over="ignore", invalid="ignore"):
                return array.astype(np.float32).astype(d.numpy), ""
        if d.name != "f16" and array.dtype.kind == "V" and array.dtype.itemsize == d.numpy.itemsize:
            return array.view(d.numpy), ""
        return None, f"the array is {array.dtype}; store it as float32"
    return None, f"the array is {array.dtype}; store it as {d.numpy}"


def _dtype_hint(d: DType) -> str:
    if d.name in LOW_PRECISION:
        return "use array.astype(numpy.float32); kir rounds it to nearest even"
    return f"use array.astype(numpy.{d.numpy.name})"


def to_storage(array: np.ndarray, dtype: str) -> np.ndarray:
    """An argument's array as stored in an archive: low-precision floats widen to float32."""
    array = np.asarray(array)
    if dtype in LOW_PRECISION:
        return array.astype(np.float32)
    return array


def write_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Write the arrays to exactly `path` (numpy.savez would append `.npz` to a bare name)."""
    try:
        with open(path, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub: a key could be its allow_pickle
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise KirError(Diagnostic("io.write", "error", None, f"cannot write {path}: {reason}")) from None


def outputs_for(
    program: Program, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Every tensor argument after the run, in storage form: the interpreter's result where it
    gave one, else the input as passed."""
    out: dict[str, np.ndarray] = {}
    for name, gtype in tensor_args(program):
        value = outputs.get(name, inputs.get(name))
        if value is not None:
            out[name] = to_storage(value, gtype.dtype.data)
    return out
