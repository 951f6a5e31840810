"""Verdict -> the structured feedback a refine prompt shows the coder.

The same text is what the refine card's ``$feedback`` holds in the training data and what the agent loop's
Verifier sends back at inference, so both call ``render_feedback``: a model trained on one format meets the
same format later. The text is built from sections in a fixed priority order (status, evaluator failure,
compile errors, hack findings, correctness, runtime errors, performance, profile, task notes) and bounded:
in characters always, in tokens when a counter is given. A section that does not fit is cut at a line boundary
with a note saying how much was left out; lower-priority sections are dropped before higher ones are cut.

Everything quoted from the Verdict (compiler output, finding evidence, kernel names) may contain text the
candidate wrote; it is shown line-bounded and never interpreted.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from rubric_rl.sandbox import Finding, TimingStats, Verdict

TokenCounter = Callable[[str], int]

_STATUS_LINE = {
    "correct": "correct: every correctness trial passed.",
    "incorrect": "incorrect: the program ran but its outputs do not match the reference.",
    "compile_error": "compile_error: the program did not build (or did not parse).",
    "runtime_error": "runtime_error: the program built but failed while running.",
    "timeout": "timeout: the program exceeded the time limit.",
    "hack": "hack: the program broke an evaluation rule; it earns no credit until the findings below are gone.",
}


class FeedbackConfig(BaseModel):
    """Bounds of the rendered feedback."""

    model_config = ConfigDict(extra="forbid")

    max_chars: int = Field(default=3000, ge=200, description="Longest feedback text, characters (always enforced).")
    max_tokens: int | None = Field(
        default=None, ge=20, description="Longest feedback in tokens, enforced when a token counter is passed."
    )
    max_line_chars: int = Field(default=300, ge=40, description="Longest single line; longer ones are cut.")
    max_compile_lines: int = Field(default=25, ge=1, description="Lines of the compiler digest shown.")
    max_errors: int = Field(default=5, ge=1, description="Error messages shown (runtime errors, trial errors).")
    max_findings: int = Field(default=6, ge=1, description="Hack findings shown, errors before warnings.")
    top_kernels: int = Field(default=5, ge=0, description="Kernels of the profile shown, by total time.")
    max_aten_ops: int = Field(default=8, ge=0, description="PyTorch ops of the candidate's forward listed.")


def _cut(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _ms(stats: TimingStats | None) -> str | None:
    return None if stats is None else f"{stats.median_ms:.4g} ms"


def _status_section(v: Verdict) -> list[str]:
    return [f"Status: {_STATUS_LINE.get(v.status, v.status)}"]


def _infra_section(v: Verdict) -> list[str]:
    if v.infra_error is None:
        return []
    return ["## Evaluator failure (not the program's fault)", v.infra_error]


def _compile_section(v: Verdict, cfg: FeedbackConfig) -> list[str]:
    if v.status != "compile_error" and not v.compile_log:
        return []
    lines = ["## Compilation"]
    log_lines = [x for x in (v.compile_log or "").splitlines() if x.strip()]
    if log_lines:
        lines += log_lines[: cfg.max_compile_lines]
        if len(log_lines) > cfg.max_compile_lines:
            lines.append(f"… ({len(log_lines) - cfg.max_compile_lines} more compiler lines)")
    digest = v.compile_log or ""
    extra = [e for e in v.errors if e.strip() and e.strip() not in digest and not e.startswith("hack [")]
    for e in extra[: cfg.max_errors]:
        lines += [x for x in e.splitlines() if x.strip()][: cfg.max_compile_lines]
    return lines if len(lines) > 1 else []


def _finding_line(f: Finding) -> str:
    where = f" (line {f.line})" if f.line else ""
    text = f"- [{f.severity}] {f.rule}{where}: {f.message}"
    return text + (f" Evidence: {f.evidence}" if f.evidence else "")


def _findings_section(v: Verdict, cfg: FeedbackConfig) -> list[str]:
    if not v.findings:
        return []
    ordered = sorted(v.findings, key=lambda f: f.severity != "error")
    lines = ["## Evaluation rules broken" if v.hack_rules else "## Warnings"]
    lines += [_finding_line(f) for f in ordered[: cfg.max_findings]]
    if len(ordered) > cfg.max_findings:
        lines.append(f"… ({len(ordered) - cfg.max_findings} more findings)")
    return lines


def _correctness_section(v: Verdict, cfg: FeedbackConfig) -> list[str]:
    run = [t for t in v.trials if t.skipped is None]
    if not run:
        return []
    passed = sum(t.passed for t in run)
    lines = ["## Correctness", f"{passed}/{len(run)} trials passed."]
    failed = [t for t in run if not t.passed]
    if not failed:
        return lines
    numeric = [t for t in failed if t.max_abs_error is not None]
    if numeric:
        worst = max(numeric, key=lambda t: t.max_abs_error or 0.0)
        share = ""
        if worst.mismatched is not None and worst.numel:
            share = f", {worst.mismatched}/{worst.numel} elements ({100 * worst.mismatched / worst.numel:.3g}%) "
            share += "outside tolerance"
        rel = f", max relative error {worst.max_rel_error:.3g}" if worst.max_rel_error is not None else ""
        lines.append(
            f"Worst mismatch: trial {worst.index} ({worst.distribution} inputs, seed {worst.seed}): "
            f"max absolute error {worst.max_abs_error:.3g}{rel}{share}."
        )
        dists = sorted({t.distribution for t in failed})
        lines.append(f"Failing input distributions: {', '.join(dists)}.")
    errored = [t for t in failed if t.error]
    for t in errored[: cfg.max_errors]:
        lines.append(f"Trial {t.index} ({t.distribution} inputs): {t.error}")
    if len(errored) > cfg.max_errors:
        lines.append(f"… ({len(errored) - cfg.max_errors} more failing trials with errors)")
    return lines


def _runtime_section(v: Verdict, cfg: FeedbackConfig) -> list[str]:
    if v.status not in ("runtime_error", "timeout") or v.infra_error is not None:
        return []
    errors = [e for e in v.errors if e.strip()]
    if not errors:
        return []
    lines = ["## Runtime errors"]
    for e in errors[: cfg.max_errors]:
        lines += [x for x in e.splitlines() if x.strip()][: cfg.max_compile_lines]
    if len(errors) > cfg.max_errors:
        lines.append(f"… ({len(errors) - cfg.max_errors} more errors)")
    return lines


def _performance_section(v: Verdict) -> list[str]:
    t = v.timings
    if t is None or t.candidate is None:
        return []
    lines = ["## Performance", f"Program: {_ms(t.candidate)} (median of {t.candidate.n} calls)."]
    if t.eager is not None:
        speed = f", speedup {v.speedup_eager:.3g}x" if v.speedup_eager is not None else ""
        lines.append(f"PyTorch eager: {_ms(t.eager)}{speed}.")
    if t.compile is not None:
        speed = f", speedup {v.speedup_compile:.3g}x" if v.speedup_compile is not None else ""
        lines.append(f"torch.compile ({t.compile_mode or 'default'}): {_ms(t.compile)}{speed}.")
    if v.speedup_eager is not None and v.speedup_eager < 1.0:
        lines.append("The program is slower than eager PyTorch.")
    elif v.speedup_compile is not None and v.speedup_compile < 1.0:
        lines.append("The program beats eager PyTorch but is slower than torch.compile.")
    return lines


def _profile_section(v: Verdict, cfg: FeedbackConfig) -> list[str]:
    lines: list[str] = []
    if v.kernels and cfg.top_kernels:
        total = sum(k.total_us for k in v.kernels) or 1.0
        lines.append(f"## Profile (top {min(cfg.top_kernels, len(v.kernels))} of {len(v.kernels)} kernels by time)")
        for k in sorted(v.kernels, key=lambda k: -k.total_us)[: cfg.top_kernels]:
            lines.append(
                f"- {k.name} [{k.owner}]: {k.calls} call(s), {k.total_us:.1f} us ({100 * k.total_us / total:.1f}%)"
            )
    if v.own_kernel_time_share is not None:
        if not lines:
            lines.append("## Profile")
        lines.append(f"Share of GPU time in the program's own kernels: {100 * v.own_kernel_time_share:.1f}%.")
    if v.aten_ops and cfg.max_aten_ops:
        ops = sorted(v.aten_ops.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{name} x{n}" for name, n in ops[: cfg.max_aten_ops])
        more = f" (+{len(ops) - cfg.max_aten_ops} more)" if len(ops) > cfg.max_aten_ops else ""
        lines.append(f"PyTorch ops run by the program's forward: {shown}{more}.")
    return lines


def _notes_section(v: Verdict) -> list[str]:
    return ["## Notes on the task", *v.task_flags] if v.task_flags else []


def feedback_sections(verdict: Verdict, config: FeedbackConfig | None = None) -> list[list[str]]:
    """The sections of the feedback, highest priority first; each a list of lines (a heading first)."""
    cfg = config or FeedbackConfig()
    sections = [
        _status_section(verdict),
        _infra_section(verdict),
        _compile_section(verdict, cfg),
        _findings_section(verdict, cfg),
        _correctness_section(verdict, cfg),
        _runtime_section(verdict, cfg),
        _performance_section(verdict),
        _profile_section(verdict, cfg),
        _notes_section(verdict),
    ]
    return [[_cut(line, cfg.max_line_chars) for line in s] for s in sections if s]


def render_feedback(
    verdict: Verdict, config: FeedbackConfig | None = None, *, count_tokens: TokenCounter | None = None
) -> str:
    """The feedback text for one Verdict, within ``config.max_chars`` (and ``max_tokens`` with a counter)."""
    cfg = config or FeedbackConfig()

    def fits(text: str) -> bool:
        if len(text) > cfg.max_chars:
            return False
        return count_tokens is None or cfg.max_tokens is None or count_tokens(text) <= cfg.max_tokens

    out: list[str] = []
    for section in feedback_sections(verdict, cfg):
        block = ([""] if out else []) + section
        if fits("\n".join(out + block)):
            out += block
            continue
        for i in range(len(block) - 1, 0, -1):  # the longest head of the section that fits with its note
            note = f"… ({len(block) - i} more lines of this section; feedback cut to its length limit)"
            if fits("\n".join(out + block[:i] + [note])):
                out += block[:i] + [note]
                break
        break
    return "\n".join(out)
