"""Child process of the Planner's profiler: runs one reference program under torch.profiler and writes JSON.

Usage: ``python profile_worker.py REFERENCE.py OUT.json DEVICE TOP TIMEOUT_S PARENT_PID``.

The reference is user code, so it runs here and never in the loop's process. This file imports only the
standard library and torch (it is run by path, not as part of the package). It protects against a reference that
hangs (an alarm, and the parent's kill), and against outliving its parent (PR_SET_PDEATHSIG); it does not
sandbox the reference beyond that: tasks come from the user's own task source.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import statistics
import sys
import time
import types


def _die_with_parent(parent_pid: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        os._exit(1)


def _tensors(values, torch) -> list[dict]:
    flat = values if isinstance(values, (list, tuple)) else [values]
    out = []
    for v in flat:
        if isinstance(v, torch.Tensor):
            out.append({"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")})
        else:
            out.append({"shape": [], "dtype": type(v).__name__})
    return out


def _to(values, device, torch):
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _time_calls(model, inputs, torch, device: str, n: int = 5) -> float:
    times = []
    for _ in range(n):
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        model(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def _device_us(evt) -> float:
    for name in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(evt, name, None)
        if value:
            return float(value)
    return 0.0


def profile(reference: str, device: str, top: int) -> dict:
    import torch

    module = types.ModuleType("reference")
    exec(compile(reference, "reference.py", "exec"), module.__dict__)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).to(device).eval()
    inputs = _to(module.get_inputs(), device, torch)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.no_grad():
        outputs = model(*inputs)
        eager_ms = _time_calls(model, inputs, torch, device)
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            model(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
    ops = []
    for evt in prof.key_averages(group_by_input_shape=True):
        if not evt.key.startswith("aten::"):
            continue
        ops.append(
            {
                "name": evt.key,
                "calls": int(evt.count),
                "self_cpu_us": float(evt.self_cpu_time_total),
                "device_us": _device_us(evt),
                "shapes": [list(s) for s in (evt.input_shapes or []) if s][:4],
            }
        )
    key = "device_us" if device == "cuda" else "self_cpu_us"
    ops.sort(key=lambda o: -o[key])
    kernels: dict[str, dict] = {}
    if device == "cuda":
        for evt in prof.events():
            if str(getattr(evt, "device_type", "")).endswith("CUDA") and evt.name:
                k = kernels.setdefault(evt.name, {"name": evt.name, "calls": 0, "total_us": 0.0})
                k["calls"] += 1
                k["total_us"] += float(getattr(evt, "device_time", 0.0) or getattr(evt, "cuda_time", 0.0) or 0.0)
    return {
        "device": device,
        "torch": torch.__version__,
        "inputs": _tensors(inputs, torch),
        "outputs": _tensors(outputs, torch),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "eager_ms": eager_ms,
        "ops": ops[:top],
        "kernels": sorted(kernels.values(), key=lambda k: -k["total_us"])[:top],
    }


def main(argv: list[str]) -> int:
    ref_path, out_path, device, top, timeout_s, parent_pid = argv
    _die_with_parent(int(parent_pid))
    signal.alarm(max(1, int(float(timeout_s))))
    with open(ref_path) as f:
        reference = f.read()
    result = profile(reference, device, int(top))
    with open(out_path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(out_path + ".tmp", out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
