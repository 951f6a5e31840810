"""Baseline (a) of scripts/bench_throughput.py: one candidate evaluated the way KernelBench's own scripts do it.

A fresh process; the candidate is exec'd in-process and builds through torch's default ``load_inline``
(default flags, its own fresh build directory, no cache); 5 correctness trials on fresh ``get_inputs()``
draws compared with ``torch.allclose`` (KernelBench's fp32 tolerance, 1e-4); then 100 timed calls of the
candidate and of the reference on one input set with CUDA events around each call (KernelBench's
``time_execution_with_cuda_event``). Prints one JSON line. This is the comparison point, not an evaluator:
it has every weakness the sandbox exists to remove.

    python scripts/kernelbench_style_eval.py REFERENCE.py CANDIDATE.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import types


def load(name: str, code: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(code, f"{name}.py", "exec"), module.__dict__)
    return module


def time_cuda(model, inputs, trials: int) -> list[float]:
    import torch

    times = []
    for _ in range(3):
        model(*inputs)
    torch.cuda.synchronize()
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        model(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return times


def main(ref_path: str, cand_path: str, trials: int = 5, perf_trials: int = 100) -> dict:
    import torch

    started = time.monotonic()
    result: dict = {"compiled": False, "correct": False}
    ref = load("reference", open(ref_path).read())
    torch.manual_seed(42)
    init = ref.get_init_inputs()
    ref_model = ref.Model(*init).cuda()
    try:
        t0 = time.monotonic()
        cand = load("candidate", open(cand_path).read())
        result["build_s"] = time.monotonic() - t0
        torch.manual_seed(42)
        new_model = cand.ModelNew(*init).cuda()
        result["compiled"] = True
    except Exception as e:
        result["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        result["wall_s"] = time.monotonic() - started
        return result
    with torch.no_grad():
        correct = True
        for t in range(trials):
            torch.manual_seed(42 + t)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
            try:
                out_ref, out_new = ref_model(*inputs), new_model(*inputs)
                torch.cuda.synchronize()
                correct &= out_ref.shape == out_new.shape and bool(
                    torch.allclose(out_ref, out_new, atol=1e-4, rtol=1e-4)
                )
            except Exception as e:
                result["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                correct = False
                break
        result["correct"] = correct
        if correct:
            torch.manual_seed(42)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
            cand_ms = statistics.median(time_cuda(new_model, inputs, perf_trials))
            ref_ms = statistics.median(time_cuda(ref_model, inputs, perf_trials))
            result.update(runtime_ms=cand_ms, ref_runtime_ms=ref_ms, speedup=ref_ms / cand_ms)
    result["wall_s"] = time.monotonic() - started
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
