import os
import struct
import time

import pytest
import torch

from rubric_rl.sandbox.run.protocol import (
    Channel,
    Deadline,
    ProtocolError,
    WorkerGone,
    encode,
    pack_tensors,
    unpack_tensors,
    widen_pipe,
)


@pytest.fixture
def pipe_pair():
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    a, b = Channel(r1, w2), Channel(r2, w1)
    yield a, b
    for fd in (r1, w1, r2, w2):
        try:
            os.close(fd)
        except OSError:
            pass


def test_roundtrip_with_tensors(pipe_pair):
    a, b = pipe_pair
    b.send("trial", {"index": 3}, tensors=[torch.arange(4), None])
    msg = a.recv(deadline=time.monotonic() + 5)
    assert msg.type == "trial" and msg.body == {"index": 3}
    values = unpack_tensors(msg)
    assert torch.equal(values[0], torch.arange(4)) and values[1] is None


def test_every_kind_of_tensor_arrives_bit_for_bit(pipe_pair):
    a, b = pipe_pair
    g = torch.Generator().manual_seed(0)
    sent = [
        [torch.randn(3, 5, generator=g).t(), torch.randn(7, generator=g).to(torch.bfloat16)],  # non-contiguous
        [],
        [torch.tensor(2.5, dtype=torch.float64), torch.zeros(0, 4), torch.tensor([True, False, True])],
        [torch.randn(2, 3, dtype=torch.complex64, generator=g).conj(), torch.randint(-9, 9, (5,), dtype=torch.int8)],
        None,
    ]
    b.send("reference", {}, tensors=sent)
    got = unpack_tensors(a.recv(deadline=time.monotonic() + 5))
    flat_sent = [t for group in sent if group for t in group]
    flat_got = [t for group in got if group for t in group]
    assert got[1] == [] and got[4] is None
    for s, r in zip(flat_sent, flat_got, strict=True):
        assert r.dtype == s.dtype and r.shape == s.shape and torch.equal(r, s.resolve_conj())
    offsets = [e["offset"] for group in pack_tensors(sent).layout if group for e in group]
    assert all(o % 64 == 0 for o in offsets)


def test_a_large_payload_crosses_between_processes(pipe_pair):
    # Larger than any pipe buffer: the writer blocks until the reader drains, in another process.
    a, b = pipe_pair
    big = torch.arange(6 << 20, dtype=torch.int32)  # 24 MiB
    pid = os.fork()
    if pid == 0:
        try:
            b.send("trial", {}, tensors=[big])
        finally:
            os._exit(0)
    msg = a.recv(deadline=time.monotonic() + 60)
    os.waitpid(pid, 0)
    assert torch.equal(unpack_tensors(msg)[0], big)


def test_widen_pipe_grows_the_buffer():
    r, w = os.pipe()
    try:
        assert widen_pipe(w) >= 1 << 20
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize(
    "layout, blob_len, words",
    [
        ([{"dtype": "float32", "shape": [4], "offset": 0}], 8, "runs past"),
        ([{"dtype": "__class__", "shape": [1], "offset": 0}], 64, "unknown tensor dtype"),
        ([{"dtype": "Tensor", "shape": [1], "offset": 0}], 64, "unknown tensor dtype"),
        ([{"dtype": "float32", "shape": [-1], "offset": 0}], 64, "bad tensor shape"),
        ([{"dtype": "float32", "shape": [1.5], "offset": 0}], 64, "bad tensor shape"),
        ([{"dtype": "float32", "shape": [1], "offset": -4}], 64, "bad tensor offset"),
        ([{"dtype": "float32", "shape": [1], "offset": 0, "code": "x"}], 64, "unreadable tensor descriptor"),
        (["import os"], 64, "unreadable tensor descriptor"),
        (
            [{"dtype": "float32", "shape": [4], "offset": 0}, {"dtype": "float32", "shape": [4], "offset": 8}],
            64,
            "overlap",
        ),
        ([[[[[[[[[[None]]]]]]]]]], 0, "nested deeper"),
        ({"dtype": "float32", "shape": [1], "offset": 0}, 64, "no tensor layout"),
    ],
)
def test_forged_layouts_are_refused(pipe_pair, layout, blob_len, words):
    a, b = pipe_pair
    os.write(b.write_fd, encode("trial", {}, b"\0" * blob_len, tensors=layout))
    msg = a.recv(deadline=time.monotonic() + 5)
    with pytest.raises(ProtocolError, match=words):
        unpack_tensors(msg)


def test_deadline(pipe_pair):
    a, _ = pipe_pair
    with pytest.raises(Deadline):
        a.recv(deadline=time.monotonic() + 0.1)


def test_worker_gone(pipe_pair):
    a, b = pipe_pair
    os.close(b.write_fd)
    with pytest.raises(WorkerGone):
        a.recv(deadline=time.monotonic() + 5)


def test_garbage_and_oversize(pipe_pair):
    a, b = pipe_pair
    os.write(b.write_fd, struct.pack("<IQ", 5, 0) + b"{{{{{")
    with pytest.raises(ProtocolError, match="unreadable header"):
        a.recv(deadline=time.monotonic() + 5)
    small = Channel(a.read_fd, a.write_fd, max_blob_bytes=10)
    os.write(b.write_fd, encode("x", {}, b"0" * 11))
    with pytest.raises(ProtocolError, match="exceeds"):
        small.recv(deadline=time.monotonic() + 5)
