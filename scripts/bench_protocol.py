"""Seconds to move a list of tensors from a worker process to the evaluator, the way the sandbox does it.

    python scripts/bench_protocol.py [--sizes-mb 16,64,256] [--repeats 3] [--out runs/bench_protocol.json]

Two ways, each from a forked sender to a receiver that ends holding the tensors:
  torch.save   what the protocol did until e58386c: ``torch.save`` into a buffer, one frame through a pipe of
               the default size (64 KiB on Linux), read back in 4 MiB chunks, ``torch.load(weights_only=True)``;
  raw          ``rubric_rl.sandbox.run.protocol`` now: each tensor's bytes written straight into a widened pipe, read
               into one buffer, tensors made as views of it after their descriptors are checked.
On an H200 the correctness phase of a task with 256 MB outputs ships 14 such payloads.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import struct
import time
from pathlib import Path

import torch
from benchlib import fmt, print_table, write_json

from rubric_rl.sandbox.run.protocol import Channel, Message, encode, unpack_tensors, widen_pipe


def _old_send(fd: int, values: list) -> None:
    buf = io.BytesIO()
    torch.save(values, buf)
    data = memoryview(encode("trial", {}, buf.getvalue()))
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _old_recv(fd: int) -> list:
    def exact(n: int) -> bytes:
        chunks, remaining = [], n
        while remaining:
            chunk = os.read(fd, min(remaining, 1 << 22))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    header_len, blob_len = struct.unpack("<IQ", exact(12))
    json.loads(exact(header_len))
    return torch.load(io.BytesIO(exact(blob_len)), weights_only=True, map_location="cpu")


def _new_recv(fd: int) -> list:
    msg: Message = Channel(fd, -1).recv(deadline=time.monotonic() + 600)
    return unpack_tensors(msg)


def one(way: str, values: list) -> float:
    r, w = os.pipe()
    if way == "raw":
        widen_pipe(w)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the sender, as the worker would be
        os.close(r)
        try:
            if way == "raw":
                Channel(-1, w).send("trial", {}, tensors=values)
            else:
                _old_send(w, values)
        finally:
            os._exit(0)
    os.close(w)
    got = _new_recv(r) if way == "raw" else _old_recv(r)
    seconds = time.monotonic() - started
    os.waitpid(pid, 0)
    os.close(r)
    assert all(torch.equal(a, b) for a, b in zip(got, values, strict=True))
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-mb", default="16,64,256")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("runs/bench_protocol.json"))
    args = ap.parse_args()
    report: dict = {"cores": os.cpu_count(), "torch": torch.__version__, "results": []}
    rows = []
    for mb in (int(s) for s in args.sizes_mb.split(",")):
        values = [torch.randn(mb * 2**20 // 4), torch.arange(1000)]  # an output, and a small second one
        seconds = {way: [one(way, values) for _ in range(args.repeats)] for way in ("torch.save", "raw")}
        med = {way: statistics.median(s) for way, s in seconds.items()}
        report["results"].append({"mb": mb, "seconds": seconds, "median_s": med})
        rows.append(
            [
                str(mb),
                fmt(med["torch.save"], ".3f"),
                fmt(med["raw"], ".3f"),
                fmt(mb / 1024 / med["raw"], ".2f"),
                fmt(med["torch.save"] / med["raw"], ".1f") + "x",
            ]
        )
        write_json(args.out, report)
    print_table(
        f"worker -> evaluator payload, median of {args.repeats} ({os.cpu_count()} cores)",
        ["MB", "torch.save s", "raw s", "raw GB/s", "speed-up"],
        rows,
    )


if __name__ == "__main__":
    main()
