"""The Planner's profile of a reference program: operators (and, on a GPU, kernels) by time, with shapes.

The reference runs in a child process (``profile_worker.py``) with a timeout, in a private temporary directory
and an environment without API keys; whatever it does, this side gets a ``ReferenceProfile`` (with ``error`` set
when the child failed or ran out of time).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

_WORKER = Path(__file__).with_name("profile_worker.py")
_SECRET_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


class TensorInfo(BaseModel):
    shape: list[int] = Field(default_factory=list)
    dtype: str


class OpStat(BaseModel):
    name: str
    calls: int
    self_cpu_us: float
    device_us: float = 0.0
    shapes: list[list[int]] = Field(default_factory=list, description="Input shapes of this group of calls.")


class KernelStat(BaseModel):
    name: str
    calls: int
    total_us: float


class ReferenceProfile(BaseModel):
    """One profiled forward of the reference (after a warm-up call)."""

    device: str
    torch: str | None = None
    inputs: list[TensorInfo] = Field(default_factory=list)
    outputs: list[TensorInfo] = Field(default_factory=list)
    parameters: int = 0
    eager_ms: float | None = Field(default=None, description="Median of 5 timed eager forwards, milliseconds.")
    ops: list[OpStat] = Field(default_factory=list, description="ATen ops by time (device time on a GPU).")
    kernels: list[KernelStat] = Field(default_factory=list, description="GPU kernels by time (cuda only).")
    seconds: float = 0.0
    error: str | None = Field(default=None, description="Why there is no profile (timeout, the reference failed).")


def _child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not any(h in k.upper() for h in _SECRET_HINTS)}


async def profile_reference(reference: str, device: str, *, top: int, timeout_s: float) -> ReferenceProfile:
    """Profile ``reference`` on ``device`` in a child process, within ``timeout_s``."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rubric-rl-profile-") as tmp:
        ref, out = Path(tmp) / "reference.py", Path(tmp) / "profile.json"
        ref.write_text(reference)
        env = {**_child_env(), "HOME": tmp, "TMPDIR": tmp}
        args = [str(ref), str(out), device, str(top), str(timeout_s), str(os.getpid())]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(_WORKER),
            *args,
            cwd=tmp,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _, stderr = await asyncio.wait_for(proc.communicate(), timeout=timeout_s + 5)
        except asyncio.TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            return _failed(device, f"timeout: profiling took longer than {timeout_s:g} s", started)
        finally:
            if proc.returncode is None:
                _kill_group(proc.pid)
        if proc.returncode == -signal.SIGALRM:
            return _failed(device, f"timeout: profiling took longer than {timeout_s:g} s", started)
        if proc.returncode != 0 or not out.exists():
            tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
            return _failed(device, f"the reference failed (exit {proc.returncode}): {' | '.join(tail)}", started)
        data = json.loads(out.read_text())
    return ReferenceProfile.model_validate({**data, "seconds": time.perf_counter() - started})


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _failed(device: str, error: str, started: float) -> ReferenceProfile:
    return ReferenceProfile(device=device, error=error[:1000], seconds=time.perf_counter() - started)


def render_profile(profile: ReferenceProfile | None, top: int) -> str:
    """The profile as the text the Planner's prompt shows."""
    if profile is None:
        return "(no profile: profiling is off)"
    if profile.error:
        return f"(no profile: {profile.error})"

    def tensors(xs: list[TensorInfo]) -> str:
        return ", ".join(f"[{', '.join(map(str, t.shape))}] {t.dtype}" for t in xs) or "-"

    eager = f"{profile.eager_ms:.4g} ms" if profile.eager_ms is not None else "-"
    lines = [
        f"Device: {profile.device} (torch {profile.torch}); eager forward: {eager}; parameters: {profile.parameters}",
        f"Inputs: {tensors(profile.inputs)}",
        f"Outputs: {tensors(profile.outputs)}",
    ]
    on_device = profile.device == "cuda"
    total = sum(o.device_us if on_device else o.self_cpu_us for o in profile.ops) or 1.0
    lines.append(f"Operators by {'device' if on_device else 'CPU self'} time (top {min(top, len(profile.ops))}):")
    for o in profile.ops[:top]:
        t = o.device_us if on_device else o.self_cpu_us
        shapes = "; ".join(str(s) for s in o.shapes)
        lines.append(f"- {o.name} x{o.calls}: {t:.1f} us ({100 * t / total:.1f}%) shapes {shapes or '-'}")
    if profile.kernels:
        lines.append("GPU kernels by time:")
        lines += [f"- {k.name[:120]} x{k.calls}: {k.total_us:.1f} us" for k in profile.kernels[:top]]
    return "\n".join(lines)
