"""What each tool says to the model, built from the sandbox's records.

Verdicts are rendered by ``rubric_rl.skills.feedback.render_feedback``, the text the refine card's feedback
holds in training data, so a model meets one format in single-turn training, in agentic training and at
inference. Each tool shows its part of a Verdict (check: correctness; benchmark: speed; profile: where the
time goes) by rendering a copy of it with the other parts left out. Every text is bounded (characters always,
tokens with a counter) and absolute paths are reduced to their last part, so the evaluator's directories
never reach the model.
"""

from __future__ import annotations

import re
from typing import Any

from rubric_rl.sandbox import KernelMetrics, KernelMetricsReport, Status, Verdict
from rubric_rl.skills.feedback import FeedbackConfig, TokenCounter, render_feedback

_PATH = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+([\w.+-]+)")


def scrub_paths(text: str) -> str:
    """Absolute paths as their last part (``/root/.cache/rubric-rl/build/ab12/main.cpp`` -> ``main.cpp``)."""
    return _PATH.sub(lambda m: m.group(1), text)


def bound_text(text: str, max_chars: int, max_tokens: int | None = None, count: TokenCounter | None = None) -> str:
    """``text`` cut at a line boundary (or mid-line for one long line) to fit, with a note of what was cut."""

    def fits(t: str) -> bool:
        return len(t) <= max_chars and (count is None or max_tokens is None or count(t) <= max_tokens)

    if fits(text):
        return text
    note = f"\n… (output cut to its limit; {len(text)} characters in all)"
    lo, hi = 0, len(text)
    while lo < hi:  # the longest head that fits with the note
        mid = (lo + hi + 1) // 2
        if fits(text[:mid] + note):
            lo = mid
        else:
            hi = mid - 1
    head = text[:lo]
    if "\n" in head[len(head) // 2 :]:
        head = head[: head.rindex("\n")]
    return head + note


def _render(verdict: Verdict, cfg: FeedbackConfig, count: TokenCounter | None, **drop: Any) -> str:
    return scrub_paths(render_feedback(verdict.model_copy(update=drop), cfg, count_tokens=count))


def check_text(verdict: Verdict, cfg: FeedbackConfig, count: TokenCounter | None = None) -> str:
    """Status, build problems, broken rules, correctness trials, runtime errors: no timings, no profile."""
    return _render(verdict, cfg, count, timings=None, kernels=[], own_kernel_time_share=None, aten_ops={})


def benchmark_text(verdict: Verdict, cfg: FeedbackConfig, count: TokenCounter | None = None) -> str:
    """Speedups over eager and torch.compile, or why there are none."""
    if verdict.status != "correct" or verdict.timings is None or verdict.timings.candidate is None:
        why = (
            "the program is not correct"
            if verdict.status != "correct"
            else "the evaluation did not time it (performance measurement is off)"
        )
        head = f"No timing: {why} (status {verdict.status}). Call check for the details."
        return head if verdict.status == "correct" else head + "\n\n" + check_text(verdict, cfg, count)
    return _render(verdict, cfg, count, trials=[], kernels=[], own_kernel_time_share=None, aten_ops={}, task_flags=[])


def _torch_time(verdict: Verdict) -> list[str]:
    if not verdict.kernels:
        return []
    total = sum(k.total_us for k in verdict.kernels) or 1.0
    torch_us = sum(k.total_us for k in verdict.kernels if k.owner == "torch")
    library_us = sum(k.total_us for k in verdict.kernels if k.owner == "library")
    return [
        f"Remaining PyTorch (ATen) kernel time: {torch_us:.1f} us ({100 * torch_us / total:.1f}%); "
        f"library kernels (cuBLAS, cuDNN, ...): {library_us:.1f} us ({100 * library_us / total:.1f}%)."
    ]


NCU_TOP_KERNELS = 8
_NCU_SHOWN = (  # metric, short label, unit (percentages of the peak, registers per thread)
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM", "%"),
    ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "mem", "%"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM", "%"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy", "%"),
    ("launch__registers_per_thread", "regs", ""),
    ("l1tex__t_sector_hit_rate.pct", "L1 hit", "%"),
    ("lts__t_sector_hit_rate.pct", "L2 hit", "%"),
)


def _reading(kernel: KernelMetrics) -> str | None:
    """What a kernel's throughputs say, where they say something clear."""
    sm = kernel.metrics.get("sm__throughput.avg.pct_of_peak_sustained_elapsed")
    memory = kernel.metrics.get("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    if sm is None or memory is None:
        return None
    if memory > 60 and sm < 40:
        return "memory-bound: move fewer bytes (fuse passes, reuse data on chip, narrower types)"
    if sm > 60 and memory < 40:
        return "compute-bound: fewer or cheaper instructions (tensor cores, less index arithmetic)"
    if sm < 30 and memory < 30:
        return "latency-bound, the GPU underused: too few blocks or long stalls (put more work in flight)"
    return None


def _kernel_lines(kernel: KernelMetrics) -> list[str]:
    name = kernel.name if len(kernel.name) <= 80 else kernel.name[:77] + "..."
    took = f"{kernel.duration_us:.1f} us" if kernel.duration_us is not None else "duration n/a"
    shown = [
        f"{label} {kernel.metrics[metric]:.{0 if not unit else 1}f}{unit}"
        for metric, label, unit in _NCU_SHOWN
        if metric in kernel.metrics
    ]
    lines = [f"- {name} [{kernel.owner}] grid {kernel.grid} block {kernel.block}: {took}; {', '.join(shown) or '-'}"]
    reading = _reading(kernel)
    if reading is not None:
        lines.append(f"  {reading}")
    return lines


def ncu_text(backend: str, report: KernelMetricsReport | None) -> str:
    """Nsight Compute's lines of the profile: the longest kernels of one forward with their metrics and a reading
    of each, or one line saying why there are none."""
    if backend != "cuda":
        return "Nsight Compute metrics: unavailable on the cpu backend (no GPU kernels to measure)."
    if report is None:
        return "Nsight Compute metrics: not collected (turned off for these tools)."
    if not report.kernels:
        return scrub_paths(f"Nsight Compute metrics: unavailable ({report.error or 'no kernels were recorded'}).")
    top = sorted(report.kernels, key=lambda k: -(k.duration_us or 0.0))[:NCU_TOP_KERNELS]
    total = sum(k.duration_us or 0.0 for k in report.kernels)
    launches = f"{len(report.kernels)} kernel launch{'es' if len(report.kernels) > 1 else ''}"
    lines = [
        f"Nsight Compute metrics of one forward ({launches} measured, {total:.1f} us in all; each alone with cold "
        f"caches, so longer than in the timed runs). Longest first, at most {NCU_TOP_KERNELS} (SM, mem, DRAM: % of "
        "peak throughput; occupancy: active warps, % of peak; regs: per thread; L1, L2: hit rates):"
    ]
    for kernel in top:
        lines += _kernel_lines(kernel)
    if report.error:
        lines.append(f"Nsight Compute also reported: {report.error}")
    return scrub_paths("\n".join(lines))


def profile_text(
    verdict: Verdict,
    backend: str,
    cfg: FeedbackConfig,
    count: TokenCounter | None = None,
    metrics: KernelMetricsReport | None = None,
) -> str:
    """Top kernels, own-kernel share, remaining PyTorch time, PyTorch ops of the forward, and Nsight Compute's
    metrics of its kernels (``metrics``) or why there are none."""
    if verdict.status not in ("correct", "incorrect"):
        return f"No profile: the program did not run to the end (status {verdict.status}). Call check for details."
    extra: list[str] = []
    if backend != "cuda":
        extra.append("Kernel profile: unavailable on the cpu backend (its kernels are C++ functions, not GPU kernels).")
    elif not verdict.kernels:
        extra.append("Kernel profile: no kernels were recorded for this program.")
    extra += _torch_time(verdict)
    extra.append(ncu_text(backend, metrics))
    body = _render(verdict, cfg, count, trials=[], task_flags=[], findings=[], errors=[])
    return bound_text(body + "\n\n" + "\n".join(extra), cfg.max_chars, cfg.max_tokens, count)


def compile_text(report: Any, cfg: FeedbackConfig, count: TokenCounter | None = None) -> tuple[str, str]:
    """(status, text) of an ``Evaluator.check_compiles`` report: 'compiled', 'compile_error' or 'hack'."""
    if report.ok:
        builds = ", ".join(f"{b.name} ({'cached' if b.cached else f'{b.seconds:.1f} s'})" for b in report.builds)
        return "compiled", f"Compiled: {builds or 'nothing to build'}. The program builds; call check to test it."
    status: Status = "hack" if report.hack else "compile_error"
    verdict = Verdict(
        status=status,
        candidate_sha256="0" * 64,
        errors=list(report.errors),
        compile_log="\n".join(report.errors) or None,
        findings=list(report.findings),
    )
    return status, scrub_paths(render_feedback(verdict, cfg, count_tokens=count))
