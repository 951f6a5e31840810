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
import shutil
from typing import Any

from rubric_rl.sandbox import Status, Verdict
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


def ncu_line(backend: str) -> str:
    if backend != "cuda":
        return "Nsight Compute metrics: unavailable on the cpu backend (no GPU kernels to measure)."
    if shutil.which("ncu") is None:
        return "Nsight Compute metrics: unavailable (ncu is not installed on the evaluation host)."
    return "Nsight Compute metrics: not collected (the sandbox does not run candidates under ncu)."


def profile_text(verdict: Verdict, backend: str, cfg: FeedbackConfig, count: TokenCounter | None = None) -> str:
    """Top kernels, own-kernel share, remaining PyTorch time, PyTorch ops of the forward, and Nsight Compute's
    availability."""
    if verdict.status not in ("correct", "incorrect"):
        return f"No profile: the program did not run to the end (status {verdict.status}). Call check for details."
    extra: list[str] = []
    if backend != "cuda":
        extra.append("Kernel profile: unavailable on the cpu backend (its kernels are C++ functions, not GPU kernels).")
    elif not verdict.kernels:
        extra.append("Kernel profile: no kernels were recorded for this program.")
    extra += _torch_time(verdict)
    extra.append(ncu_line(backend))
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
