"""What crosses between the checker and a candidate: tensors as raw bytes, decoded into fresh
plain tensors only after their dtype, shape and length are checked; messages read with a limit
and a deadline; the candidate's output kept with a cap and searched for forged records."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch

from agent.harness import wire
from agent.harness.sandbox import TailCapture


def roundtrip(header, payloads, limit=1 << 20):
    r, w = os.pipe()
    thread = threading.Thread(target=wire.send, args=(w, header, payloads))
    thread.start()
    try:
        return wire.receive(r, limit=limit, deadline=time.monotonic() + 5)
    finally:
        thread.join()
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.float8_e4m3fn])
def test_a_tensor_crosses_as_bytes_and_arrives_plain(dtype):
    class Sub(torch.Tensor):
        pass

    t = (torch.randn(3, 5) * 4).to(dtype).as_subclass(Sub)
    enc = wire.Encoder()
    header, payloads = roundtrip({"t": enc.tensor(t.transpose(0, 1))}, enc.payloads)
    got = wire.decode_tensor(header["t"], payloads)
    assert type(got) is torch.Tensor and got.dtype == dtype and got.shape == (5, 3)
    want = t.as_subclass(torch.Tensor).transpose(0, 1).contiguous()
    assert torch.equal(got.reshape(-1).view(torch.uint8), want.reshape(-1).view(torch.uint8))


@pytest.mark.parametrize(
    "meta, raw, message",
    [
        ({"tensor": ["float32", [2, 2], 0]}, bytes(15), "15 bytes"),
        ({"tensor": ["object", [1], 0]}, bytes(8), "dtype"),
        ({"tensor": ["float32", [-1], 0]}, bytes(4), "shape"),
        ({"tensor": ["float32", [1] * 9, 0]}, bytes(4), "shape"),
        ({"tensor": ["float32", [1], 3]}, bytes(4), "bytes"),
        ({"tensor": "x"}, b"", "not a tensor"),
    ],
)
def test_a_tensor_that_does_not_match_its_bytes_is_refused(meta, raw, message):
    with pytest.raises(wire.WireError, match=message):
        wire.decode_tensor(meta, [bytearray(raw)])


def test_bool_bytes_other_than_zero_and_one_are_read_as_truth():
    got = wire.decode_tensor({"tensor": ["bool", [3], 0]}, [bytearray(b"\x00\x02\x01")])
    assert got.tolist() == [False, True, True]


def test_values_nest_and_nothing_else_crosses():
    enc = wire.Encoder()
    value = [1, 2.5, None, "s", (True, torch.ones(2))]
    back = wire.decode_value(enc.value(value), enc.payloads)
    assert back[:4] == [1, 2.5, None, "s"] and back[4][0] is True and torch.equal(back[4][1], torch.ones(2))
    with pytest.raises(wire.WireError):
        enc.value({"a": 1})
    with pytest.raises(wire.WireError):
        wire.decode_value({"eval": "1"}, [])


def test_a_message_past_the_limit_or_the_deadline_is_refused():
    with pytest.raises(wire.WireError, match="more than"):
        roundtrip({}, [bytes(2000)], limit=1000)
    r, w = os.pipe()
    try:
        os.write(w, b"KIRM")
        with pytest.raises(wire.Timeout):
            wire.receive(r, limit=10, deadline=time.monotonic() + 0.2)
        os.close(w)
        w = -1
        with pytest.raises(wire.Closed):
            wire.receive(r, limit=10, deadline=time.monotonic() + 1)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    r, w = os.pipe()
    os.write(w, b"NOPE" + bytes(20))
    os.close(w)
    with pytest.raises(wire.WireError, match="marker"):
        wire.receive(r, limit=10)
    os.close(r)


def captured(chunks: list[bytes], keep: int = 100) -> TailCapture:
    r, w = os.pipe()
    capture = TailCapture(r, keep=keep)
    for c in chunks:
        os.write(w, c)
        time.sleep(0.01)
    os.close(w)
    capture.wait(5)
    return capture


def test_a_record_line_is_seen_even_split_across_reads_and_unended():
    assert captured([b'hello\n  {"kir_', b'record": 1}\n']).forged
    assert captured([b'x\n{"kir_record"']).forged
    assert not captured([b'a line that mentions {"kir_record" later\n']).forged


def test_the_output_kept_is_capped_in_characters():
    capture = captured([b"y" * 5000, "é".encode() * 300])
    assert len(capture.text()) <= 100 + 40 and "characters cut" in capture.text() and capture.total == 5300
