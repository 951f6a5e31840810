"""Messages between the evaluator and its execution worker: framed JSON headers with optional binary blobs.

A frame is ``<u32 header length><u64 blob length><header JSON><blob>``. The evaluator reads with deadlines and
size limits, so a worker that hangs, dies mid-frame or writes garbage becomes a typed outcome, never a hang or
a crash of the evaluator. Tensors travel as ``torch.save`` bytes and are read back with ``weights_only=True``
(no pickled code runs in the evaluator).
"""

from __future__ import annotations

import io
import json
import os
import select
import struct
import time
from dataclasses import dataclass
from typing import Any

_HEADER = struct.Struct("<IQ")
MAX_HEADER_BYTES = 8 << 20


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
    blob: bytes = b""


def encode(type_: str, body: dict[str, Any] | None = None, blob: bytes = b"") -> bytes:
    header = json.dumps({"type": type_, "body": body or {}}, default=str).encode()
    return _HEADER.pack(len(header), len(blob)) + header + blob


class Channel:
    """One direction-pair of pipes. The worker uses blocking ``send``/``recv``; the evaluator ``recv(deadline)``."""

    def __init__(self, read_fd: int, write_fd: int, *, max_blob_bytes: int = 4 << 30) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.max_blob_bytes = max_blob_bytes

    def send(self, type_: str, body: dict[str, Any] | None = None, blob: bytes = b"") -> None:
        data = memoryview(encode(type_, body, blob))
        while data:
            n = os.write(self.write_fd, data)
            data = data[n:]

    def _read_exact(self, n: int, deadline: float | None) -> bytes:
        chunks = []
        remaining = n
        while remaining:
            if deadline is not None:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    raise Deadline()
                ready, _, _ = select.select([self.read_fd], [], [], timeout)
                if not ready:
                    raise Deadline()
            chunk = os.read(self.read_fd, min(remaining, 1 << 22))
            if not chunk:
                raise WorkerGone()
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

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
        return Message(type=header["type"], body=body if isinstance(body, dict) else {}, blob=blob)

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def pack_tensors(tensors: list[Any]) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(tensors, buf)
    return buf.getvalue()


def unpack_tensors(blob: bytes) -> list[Any]:
    """Read tensors sent by a worker without running any pickled code."""
    import torch

    try:
        value = torch.load(io.BytesIO(blob), weights_only=True, map_location="cpu")
    except Exception as e:  # weights_only refuses anything but tensors and plain containers
        raise ProtocolError(f"unreadable tensor payload: {type(e).__name__}: {e}") from e
    if not isinstance(value, list):
        raise ProtocolError("tensor payload is not a list")
    return value
