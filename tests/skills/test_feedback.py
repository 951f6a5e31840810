"""Verdict -> refine feedback: what each kind of Verdict shows, and the bounds."""

from typing import Any

import pytest

from rubric_rl.sandbox import Verdict
from rubric_rl.skills.feedback import FeedbackConfig, feedback_sections, render_feedback


def verdict(status: str, **fields: Any) -> Verdict:
    return Verdict.model_validate({"status": status, "candidate_sha256": "0" * 64, **fields})


def stats(median: float, n: int = 20) -> dict[str, float]:
    return {
        "n": n,
        "median_ms": median,
        "mean_ms": median,
        "std_ms": 0.0,
        "min_ms": median,
        "max_ms": median,
        "p10_ms": median,
        "p90_ms": median,
    }


def trial(index: int, passed: bool, dist: str = "task", **fields: Any) -> dict[str, Any]:
    return {"index": index, "distribution": dist, "seed": 100 + index, "passed": passed, **fields}


CASES = [
    (
        "compile error",
        verdict(
            "compile_error",
            compile_log="candidate line 17: error: expected ';' before 'const'\n"
            "candidate line 18: error: 's' undeclared",
            errors=["build of 'fused' failed:\ncandidate line 17: error: expected ';' before 'const'"],
        ),
        ["Status: compile_error", "## Compilation", "candidate line 17: error: expected ';'", "'s' undeclared"],
        ["## Performance", "## Correctness"],
    ),
    (
        "mismatch",
        verdict(
            "incorrect",
            trials=[
                trial(0, True, max_abs_error=0.0),
                trial(1, False, max_abs_error=0.5, max_rel_error=2.0, mismatched=10, numel=1000),
                trial(2, False, "signed", max_abs_error=3.25, max_rel_error=9.0, mismatched=500, numel=1000),
            ],
        ),
        [
            "1/3 trials passed.",
            "Worst mismatch: trial 2 (signed inputs, seed 102): max absolute error 3.25, max relative error 9",
            "500/1000 elements (50%) outside tolerance",
            "Failing input distributions: signed, task.",
        ],
        ["## Compilation"],
    ),
    (
        "shape mismatch",
        verdict("incorrect", trials=[trial(0, False, error="output shape (4, 8) != reference (4, 16)")]),
        ["0/1 trials passed.", "Trial 0 (task inputs): output shape (4, 8) != reference (4, 16)"],
        ["Worst mismatch"],
    ),
    (
        "hack",
        verdict(
            "hack",
            findings=[
                {"rule": "static.x_warn", "severity": "warn", "source": "static", "message": "odd"},
                {
                    "rule": "static.torch_compute_call",
                    "severity": "error",
                    "source": "static",
                    "message": "forward calls torch.matmul",
                    "line": 12,
                    "evidence": "torch.matmul(a, b)",
                },
            ],
        ),
        [
            "## Evaluation rules broken",
            "- [error] static.torch_compute_call (line 12): forward calls torch.matmul Evidence: torch.matmul(a, b)",
        ],
        [],
    ),
    (
        "correct and timed, with a profile",
        verdict(
            "correct",
            trials=[trial(0, True)],
            timings={"timer": "host_sync", "candidate": stats(2.0), "eager": stats(3.0), "compile": stats(1.0)},
            speedup_eager=1.5,
            speedup_compile=0.5,
            kernels=[
                {"name": "my_kernel", "owner": "candidate", "calls": 1, "total_us": 40.0},
                {"name": "ampere_sgemm", "owner": "library", "calls": 2, "total_us": 60.0},
            ],
            own_kernel_time_share=0.4,
            aten_ops={"empty_like": 1, "addmm": 2},
        ),
        [
            "Program: 2 ms (median of 20 calls).",
            "PyTorch eager: 3 ms, speedup 1.5x.",
            "torch.compile (default): 1 ms, speedup 0.5x.",
            "slower than torch.compile",
            "- ampere_sgemm [library]: 2 call(s), 60.0 us (60.0%)\n- my_kernel [candidate]",
            "Share of GPU time in the program's own kernels: 40.0%.",
            "PyTorch ops run by the program's forward: addmm x2, empty_like x1.",
        ],
        ["## Compilation"],
    ),
    (
        "runtime error",
        verdict("runtime_error", errors=["correctness: CUDA error: an illegal memory access was encountered"]),
        ["## Runtime errors", "illegal memory access"],
        ["Evaluator failure"],
    ),
    (
        "evaluator failure",
        verdict("runtime_error", errors=["GPU lost"], infra_error="GPU lost"),
        ["## Evaluator failure (not the program's fault)", "GPU lost"],
        ["## Runtime errors"],
    ),
    (
        "task notes",
        verdict("correct", task_flags=["degenerate: zeros pass the tolerance"]),
        ["## Notes on the task", "degenerate: zeros pass the tolerance"],
        [],
    ),
]


@pytest.mark.parametrize(("name", "v", "present", "absent"), CASES, ids=[c[0] for c in CASES])
def test_feedback_shows_what_the_verdict_says(name, v, present, absent):
    text = render_feedback(v)
    for fragment in present:
        assert fragment in text, f"{name}: {fragment!r} missing from\n{text}"
    for fragment in absent:
        assert fragment not in text, f"{name}: {fragment!r} should not be in\n{text}"
    assert len(text) <= FeedbackConfig().max_chars


def test_sections_come_in_priority_order():
    v = verdict(
        "hack",
        compile_log="candidate line 3: error: x",
        findings=[{"rule": "r", "severity": "error", "source": "static", "message": "m"}],
        trials=[trial(0, False, max_abs_error=1.0)],
    )
    headings = [s[0] for s in feedback_sections(v)]
    assert headings[0].startswith("Status: hack")
    assert headings[1:] == ["## Compilation", "## Evaluation rules broken", "## Correctness"]


BOUNDS = [
    ("characters", FeedbackConfig(max_chars=400), None),
    ("tokens", FeedbackConfig(max_chars=100_000, max_tokens=60), lambda s: len(s.split())),
]


@pytest.mark.parametrize(("name", "cfg", "counter"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_long_verdicts_are_cut_at_a_line_with_a_note(name, cfg, counter):
    log = "\n".join(f"candidate line {i}: error: thing {i} went wrong" for i in range(200))
    warning = {"rule": "r", "severity": "warn", "source": "static", "message": "m"}
    v = verdict("compile_error", compile_log=log, findings=[warning])
    text = render_feedback(v, cfg, count_tokens=counter)
    assert len(text) <= cfg.max_chars
    if counter is not None:
        assert counter(text) <= cfg.max_tokens
    assert text.startswith("Status: compile_error")
    assert "feedback cut to its length limit" in text
    assert "## Warnings" not in text  # a lower-priority section is dropped once a higher one is cut


def test_a_single_huge_line_is_cut():
    v = verdict("runtime_error", errors=["x" * 10_000])
    text = render_feedback(v, FeedbackConfig(max_line_chars=100))
    assert max(len(line) for line in text.splitlines()) <= 100
