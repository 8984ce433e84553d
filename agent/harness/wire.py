"""Plain data between the checker and a candidate process: JSON headers and raw bytes.

A message is a JSON header and a list of byte payloads, framed as

    b"KIRM" | u64 header length | header (UTF-8 JSON) | u32 payload count | (u64 length | bytes)*

Values inside a header are JSON, except tensors, which cross as `{"tensor": [dtype, shape,
payload index]}`: the raw bytes of a contiguous tensor. The receiver decodes them into a fresh
`torch.Tensor` only after checking the dtype against a fixed list, the shape (non-negative
integers, at most 8 dimensions) and the payload's length, so that what arrives from a candidate
is bytes and numbers, never an object of its making (no subclass, no custom `__bool__`).
Lists and tuples cross as `{"list": [...]}` and `{"tuple": [...]}`.

The checker reads with a deadline and a limit on the bytes it accepts (`receive`), so a
candidate that stops answering or sends without end cannot hold it.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

MAGIC = b"KIRM"
MAX_HEADER = 64 << 20
MAX_PAYLOADS = 1 << 16
MAX_RANK = 8
MAX_DEPTH = 16

# the dtypes that may cross, by the name torch prints without its `torch.` prefix
DTYPE_NAMES = (
    "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
    "int64", "int32", "int16", "int8", "uint8", "bool",
)  # fmt: skip


class WireError(Exception):
    """A message that does not have the agreed form (cut short, too large, not JSON, a tensor
    whose bytes do not match its shape)."""


class Closed(WireError):
    """The other end closed the channel before a whole message arrived."""


class Timeout(WireError):
    """No whole message arrived before the deadline."""


def _dtypes() -> dict[str, Any]:
    import torch

    return {name: getattr(torch, name) for name in DTYPE_NAMES}


# ---- framing ----


def frame(header: dict[str, Any], payloads: list) -> list:
    """The pieces of one message, in order (bytes and buffers, written as they are)."""
    head = json.dumps(header).encode()
    pieces: list = [MAGIC, struct.pack("<Q", len(head)), head, struct.pack("<I", len(payloads))]
    for p in payloads:
        view = memoryview(p).cast("B")
        pieces += [struct.pack("<Q", view.nbytes), view]
    return pieces


def send(fd: int, header: dict[str, Any], payloads: list | None = None, deadline: float | None = None) -> None:
    """Write one message; with a deadline the fd must be non-blocking (the checker's side)."""
    for piece in frame(header, payloads or []):
        view = memoryview(piece).cast("B")
        while view.nbytes:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout("the candidate did not read its request in time")
                _, ready, _ = select.select([], [fd], [], left)
                if not ready:
                    continue
            try:
                n = os.write(fd, view[: 1 << 20])
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                raise Closed("the other end closed the channel") from None
            view = view[n:]


class _Reader:
    def __init__(self, fd: int, deadline: float | None):
        self.fd, self.deadline = fd, deadline

    def exactly(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise Timeout("no answer before the deadline")
                ready, _, _ = select.select([self.fd], [], [], left)
                if not ready:
                    continue
            try:
                k = os.readv(self.fd, [view[got : got + (1 << 22)]])
            except BlockingIOError:
                continue
            if k == 0:
                raise Closed("the channel closed in the middle of a message" if got or n else "the channel closed")
            got += k
        return buf


def receive(fd: int, *, limit: int, deadline: float | None = None) -> tuple[dict[str, Any], list[bytearray]]:
    """Read one message of at most `limit` payload bytes."""
    r = _Reader(fd, deadline)
    if bytes(r.exactly(4)) != MAGIC:
        raise WireError("a message does not start with the agreed marker")
    (size,) = struct.unpack("<Q", r.exactly(8))
    if size > MAX_HEADER:
        raise WireError(f"a message header of {size} bytes (at most {MAX_HEADER})")
    try:
        header = json.loads(bytes(r.exactly(size)).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise WireError(f"a message header that is not JSON: {err}") from None
    if not isinstance(header, dict):
        raise WireError("a message header that is not a JSON object")
    (count,) = struct.unpack("<I", r.exactly(4))
    if count > MAX_PAYLOADS:
        raise WireError(f"{count} payloads in one message")
    payloads = []
    total = 0
    for _ in range(count):
        (n,) = struct.unpack("<Q", r.exactly(8))
        total += n
        if total > limit:
            raise WireError(f"a message of more than {limit} bytes, more than the outputs asked for can take")
        payloads.append(r.exactly(n))
    return header, payloads


# ---- values ----


class Encoder:
    """Builds the JSON of values, collecting the tensors' bytes as payloads."""

    def __init__(self) -> None:
        self.payloads: list = []

    def tensor(self, t) -> dict[str, Any]:
        import torch

        t = torch.Tensor.detach(t)
        if t.device.type != "cpu":
            t = t.cpu()
        name = str(t.dtype).removeprefix("torch.")
        if name not in DTYPE_NAMES:
            raise WireError(f"a tensor of dtype {t.dtype} cannot cross")
        t = t.contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else b""
        self.payloads.append(raw)
        return {"tensor": [name, [int(d) for d in t.shape], len(self.payloads) - 1]}

    def value(self, x, depth: int = 0) -> Any:
        import torch

        if depth > MAX_DEPTH:
            raise WireError("a value nested too deeply to cross")
        if isinstance(x, torch.Tensor):
            return self.tensor(x)
        if x is None or isinstance(x, bool | int | float | str):
            return x
        if isinstance(x, list | tuple):
            return {"tuple" if isinstance(x, tuple) else "list": [self.value(v, depth + 1) for v in x]}
        raise WireError(f"a {type(x).__name__} cannot cross between the processes (tensors, numbers, strings, lists)")


def decode_tensor(obj: Any, payloads: list, device: str | None = None):
    """A fresh tensor from `{"tensor": [dtype, shape, index]}` after every check."""
    import torch

    try:
        name, shape, index = obj["tensor"]
    except (TypeError, KeyError, ValueError):
        raise WireError("not a tensor") from None
    dtypes = _dtypes()
    if name not in dtypes:
        raise WireError(f"a tensor of dtype {name!r}, not one of {', '.join(DTYPE_NAMES)}")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_RANK
        or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 40 for d in shape)
    ):
        raise WireError(f"a tensor shape {shape!r}")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(payloads):
        raise WireError("a tensor without its bytes")
    dtype = dtypes[name]
    numel = 1
    for d in shape:
        numel *= d
    raw = payloads[index]
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(raw) != numel * itemsize:
        raise WireError(f"a {name} tensor of shape {shape} with {len(raw)} bytes, not {numel * itemsize}")
    if numel == 0:
        t = torch.empty(shape, dtype=dtype)
    else:
        flat = torch.frombuffer(raw, dtype=torch.uint8)
        # a bool byte other than 0 or 1 is no bool torch can compare: it is read as what it means
        t = (flat != 0).reshape(shape) if dtype == torch.bool else flat.view(dtype).reshape(shape)
    return t.to(device) if device and device != "cpu" else t


def decode_value(obj: Any, payloads: list, device: str | None = None, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise WireError("a value nested too deeply")
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, dict) and len(obj) == 1:
        (kind, body), *_ = obj.items()
        if kind == "tensor":
            return decode_tensor(obj, payloads, device)
        if kind in ("list", "tuple") and isinstance(body, list):
            items = [decode_value(v, payloads, device, depth + 1) for v in body]
            return items if kind == "list" else tuple(items)
    raise WireError(f"a value {str(obj)[:80]!r} of no agreed form")


def tensor_meta(obj: Any) -> tuple[str, list[int]] | None:
    """(dtype, shape) of an encoded tensor, None if `obj` is not one."""
    if isinstance(obj, dict) and isinstance(obj.get("tensor"), list) and len(obj["tensor"]) == 3:
        name, shape, _ = obj["tensor"]
        return name, shape
    return None
