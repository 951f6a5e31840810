"""Messages between the evaluator and its execution worker: framed JSON headers with optional tensor data.

A frame is ``<u32 header length><u64 blob length><header JSON><blob>``. The evaluator reads with deadlines and
size limits, so a worker that hangs, dies mid-frame or writes garbage becomes a typed outcome, never a hang or
a crash of the evaluator.

Tensors travel raw: the header's ``tensors`` field is the layout of the values (nested lists of ``None`` and
tensor descriptors: dtype, shape, byte offset) and the blob is their bytes, each tensor's at a 64-byte aligned
offset. The sender writes each tensor's memory straight into the pipe and the reader reads it into one buffer
that the tensors are then views of, so a 256 MB output costs one copy each side
(on 2 cores: 0.45 s, against 2.0 s through ``torch.save``/``torch.load`` and a
default-sized pipe). Nothing in a payload is
unpickled: the evaluator checks every descriptor against the blob (known dtype, sizes that add up, in
bounds, no two tensors overlapping) before it makes a tensor of it.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import select
import struct
import time
from dataclasses import dataclass
from typing import Any

_HEADER = struct.Struct("<IQ")
MAX_HEADER_BYTES = 8 << 20
ALIGN = 64  # byte alignment of each tensor in a blob
MAX_NESTING = 8  # lists in a tensor layout
PIPE_BYTES = 1 << 20  # asked for each pipe (Linux default 64 KiB; 1 MiB is the unprivileged maximum)


class ProtocolError(Exception):
    """The worker broke the protocol (garbage, oversized or truncated frame)."""


class WorkerGone(Exception):
    """The worker closed its end (exited or crashed) before the expected message."""


class Deadline(Exception):
    """No complete message arrived before the deadline."""


@dataclass
class Message:
    type: str
    body: dict[str, Any]
    blob: bytes | bytearray = b""
    tensors: Any = None  # the layout of the tensors in ``blob`` (see ``unpack_tensors``), None if it has none


@dataclass
class TensorPack:
    """Tensors ready to send: their layout (JSON) and the byte views to write, padding included."""

    layout: Any
    chunks: list[memoryview]
    nbytes: int


def widen_pipe(fd: int, size: int = PIPE_BYTES) -> int:
    """Ask for a larger pipe buffer (fewer wake-ups per megabyte); returns the size the pipe has."""
    try:
        return fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
    except (OSError, AttributeError):  # not Linux, or above /proc/sys/fs/pipe-max-size: keep what it has
        try:
            return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
        except (OSError, AttributeError):
            return 0


def encode(type_: str, body: dict[str, Any] | None = None, blob: bytes = b"", tensors: Any = None) -> bytes:
    header: dict[str, Any] = {"type": type_, "body": body or {}}
    if tensors is not None:
        header["tensors"] = tensors
    data = json.dumps(header, default=str).encode()
    return _HEADER.pack(len(data), len(blob)) + data + blob


class Channel:
    """One direction-pair of pipes. The worker uses blocking ``send``/``recv``; the evaluator ``recv(deadline)``."""

    def __init__(self, read_fd: int, write_fd: int, *, max_blob_bytes: int = 4 << 30) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.max_blob_bytes = max_blob_bytes

    def send(self, type_: str, body: dict[str, Any] | None = None, tensors: list[Any] | None = None) -> None:
        """Send a message; ``tensors`` (nested lists of CPU tensors and None) travel raw after the header."""
        pack = pack_tensors(tensors) if tensors is not None else None
        header = json.dumps(
            {"type": type_, "body": body or {}, **({"tensors": pack.layout} if pack else {})}, default=str
        ).encode()
        self._write_all(memoryview(_HEADER.pack(len(header), pack.nbytes if pack else 0) + header))
        for chunk in pack.chunks if pack else ():
            self._write_all(chunk)

    def _write_all(self, data: memoryview) -> None:
        while data:
            n = os.write(self.write_fd, data)
            data = data[n:]

    def _wait_readable(self, deadline: float | None) -> None:
        if deadline is None:
            return
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise Deadline()
        ready, _, _ = select.select([self.read_fd], [], [], timeout)
        if not ready:
            raise Deadline()

    def _read_into(self, buf: memoryview, deadline: float | None) -> None:
        got = 0
        while got < len(buf):
            self._wait_readable(deadline)
            n = os.readv(self.read_fd, [buf[got:]])
            if not n:
                raise WorkerGone()
            got += n

    def _read_exact(self, n: int, deadline: float | None) -> bytearray:
        buf = bytearray(n)
        self._read_into(memoryview(buf), deadline)
        return buf

    def recv(self, deadline: float | None = None) -> Message:
        header_len, blob_len = _HEADER.unpack(self._read_exact(_HEADER.size, deadline))
        if header_len > MAX_HEADER_BYTES:
            raise ProtocolError(f"header of {header_len} bytes exceeds the limit")
        if blob_len > self.max_blob_bytes:
            raise ProtocolError(f"message of {blob_len >> 20} MiB exceeds the {self.max_blob_bytes >> 20} MiB limit")
        try:
            header = json.loads(self._read_exact(header_len, deadline))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ProtocolError(f"unreadable header: {e}") from e
        if not isinstance(header, dict) or not isinstance(header.get("type"), str):
            raise ProtocolError("header is not an object with a type")
        blob = self._read_exact(blob_len, deadline) if blob_len else b""
        body = header.get("body")
        return Message(
            type=header["type"],
            body=body if isinstance(body, dict) else {},
            blob=blob,
            tensors=header.get("tensors"),
        )

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def pack_tensors(values: list[Any]) -> TensorPack:
    """Lay out nested lists of tensors (and None) for sending; each tensor is made contiguous on the host."""
    import torch

    chunks: list[memoryview] = []
    offset = 0

    def lay(value: Any, depth: int) -> Any:
        nonlocal offset
        if value is None:
            return None
        if isinstance(value, (list, tuple)):
            if depth >= MAX_NESTING:
                raise ValueError(f"tensor payload nested deeper than {MAX_NESTING} lists")
            return [lay(v, depth + 1) for v in value]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"tensor payload holds a {type(value).__name__}; only tensors, None and lists travel")
        t = value.detach().to("cpu").resolve_conj().resolve_neg().contiguous()
        entry = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "offset": offset}
        size = t.numel() * t.element_size()
        if size:
            chunks.append(memoryview(t.reshape(-1).view(torch.uint8).numpy().data))
            pad = -size % ALIGN
            if pad:
                chunks.append(memoryview(bytes(pad)))
            offset += size + pad
        return entry

    layout = lay(list(values), 0)
    return TensorPack(layout=layout, chunks=chunks, nbytes=offset)


def unpack_tensors(msg: Message) -> list[Any]:
    """The tensors of a message, as views of its blob, after every descriptor is checked against the blob."""
    import torch

    blob = msg.blob
    spans: list[tuple[int, int]] = []

    def read(entry: Any, depth: int) -> Any:
        if entry is None:
            return None
        if isinstance(entry, list):
            if depth >= MAX_NESTING:
                raise ProtocolError(f"tensor layout nested deeper than {MAX_NESTING} lists")
            return [read(e, depth + 1) for e in entry]
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "offset"}:
            raise ProtocolError(f"unreadable tensor descriptor {str(entry)[:80]}")
        dtype = getattr(torch, str(entry["dtype"]), None)
        shape, offset = entry["shape"], entry["offset"]
        if not isinstance(dtype, torch.dtype):
            raise ProtocolError(f"unknown tensor dtype {str(entry['dtype'])[:40]!r}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise ProtocolError(f"bad tensor shape {str(shape)[:80]}")
        if not isinstance(offset, int) or offset < 0:
            raise ProtocolError(f"bad tensor offset {offset!r}")
        numel = math.prod(shape)
        size = numel * dtype.itemsize
        if offset + size > len(blob):
            raise ProtocolError(f"tensor of {size} bytes at offset {offset} runs past the {len(blob)}-byte payload")
        if not numel:
            return torch.empty(shape, dtype=dtype)
        spans.append((offset, offset + size))
        return torch.frombuffer(blob, dtype=dtype, count=numel, offset=offset).view(shape)

    if not isinstance(msg.tensors, list):
        raise ProtocolError("the message carries no tensor layout")
    values = read(msg.tensors, 0)
    spans.sort()
    if any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False)):
        raise ProtocolError("two tensors of the payload overlap")
    return values
