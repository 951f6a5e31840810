import os
import struct
import time

import pytest
import torch

from rubric_rl.sandbox.protocol import (
    Channel,
    Deadline,
    ProtocolError,
    WorkerGone,
    encode,
    pack_tensors,
    unpack_tensors,
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


def test_roundtrip_with_blob(pipe_pair):
    a, b = pipe_pair
    b.send("trial", {"index": 3}, pack_tensors([torch.arange(4), None]))
    msg = a.recv(deadline=time.monotonic() + 5)
    assert msg.type == "trial" and msg.body == {"index": 3}
    values = unpack_tensors(msg.blob)
    assert torch.equal(values[0], torch.arange(4)) and values[1] is None


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


def test_pickled_code_is_refused():
    import io
    import pickle

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    buf = io.BytesIO()
    torch.save([Evil()], buf, pickle_module=pickle)
    with pytest.raises(ProtocolError, match="unreadable tensor payload"):
        unpack_tensors(buf.getvalue())
