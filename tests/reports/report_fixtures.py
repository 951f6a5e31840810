"""A small fixed run written as records (no sandbox, no model), whose metrics are computed by hand in the tests
(conftest.py serves it as the `fixed_runs` fixture).

Run "base" (track own_kernels), five tasks:

| task | kept      | eager | compile | timed rounds (ms)                   | coder turns                          |
|------|-----------|-------|---------|-------------------------------------|--------------------------------------|
| L3-1 | correct   | 2.5   | 1.2     | candidate 1.0 x10, eager 2.5 x10    | correct                              |
| L3-2 | correct   | 1.2   | 0.6     | candidate 1.0 x10, eager 1.2 x8,0.9 x2 | compile_error, incorrect, correct |
| L3-3 | correct   | 0.7   | 0.3     | none                                | incorrect, correct                   |
| L3-4 | incorrect | -     | -       | -                                   | compile_error (no program), incorrect|
| L3-5 | hack      | -     | -       | -                                   | hack (static.torch_compute_call)     |

Run "trained" (track libraries): L3-1 correct at 3.0x eager (no rounds), L3-2 runtime_error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rubric_rl.agents.pcv.records import TaskResult, Turn
from rubric_rl.sandbox import Verdict


def verdict(status: str, se: float | None = None, sc: float | None = None, rounds: dict | None = None, **kw) -> Verdict:
    data: dict[str, Any] = {"status": status, "candidate_sha256": "0" * 64, "speedup_eager": se, "speedup_compile": sc}
    if rounds is not None:
        data["timings"] = {"timer": "host", "rounds_ms": rounds}
    return Verdict.model_validate({**data, **kw})


HACK = {"rule": "static.torch_compute_call", "severity": "error", "source": "static", "message": "torch.matmul"}

BASE = [
    ("L3-1", verdict("correct", 2.5, 1.2, {"candidate": [1.0] * 10, "eager": [2.5] * 10}), ["correct"], 1),
    (
        "L3-2",
        verdict("correct", 1.2, 0.6, {"candidate": [1.0] * 10, "eager": [1.2] * 8 + [0.9] * 2}),
        ["compile_error", "incorrect", "correct"],
        3,
    ),
    ("L3-3", verdict("correct", 0.7, 0.3), ["incorrect", "correct"], 2),
    ("L3-4", verdict("incorrect"), ["compile_error", "incorrect"], None),
    ("L3-5", verdict("hack", findings=[HACK]), ["hack"], None),
]
TRAINED = [
    ("L3-1", verdict("correct", 3.0, 1.5), ["correct"], 1),
    ("L3-2", verdict("runtime_error"), ["runtime_error"], None),
]


def write_run(root: Path, name: str, track: str, rows: list) -> Path:
    root.mkdir(parents=True)
    turns, results = [], []
    for task_id, kept, statuses, first in rows:
        for i, status in enumerate(statuses):
            v = kept if i == len(statuses) - 1 else verdict(status, findings=[HACK] if status == "hack" else [])
            no_program = task_id == "L3-4" and i == 0
            turns.append(
                Turn(
                    task_id=task_id,
                    index=i,
                    role="coder",
                    kind="generate" if i == 0 else "refine",
                    coder_turn=i + 1,
                    started_at=0,
                    seconds=5.0,
                    stages={"sandbox_s": 4.0, "coder_llm_s": 1.0},
                    program=None if no_program else "p",
                    extraction_error="no_code: none" if no_program else None,
                    verdict=v,
                    llm={"model": "m", "prompt_tokens": 80, "completion_tokens": 20},
                )  # fmt: skip
            )
        n = len(statuses)
        results.append(
            TaskResult(
                task_id=task_id,
                task_name=f"problem {task_id}",
                level=3,
                run=name,
                track=track,
                status=kept.status,
                best_turn=n - 1,
                program="p",
                verdict=kept,
                coder_turns=n,
                plans=1,
                first_correct_turn=first,
                statuses=statuses,
                stop_reason="max_turns",
                tokens=100 * n,
                seconds=5.0 * n,
                stage_seconds={"sandbox_s": 4.0 * n, "coder_llm_s": 1.0 * n},
                finished_at=0,
            )  # fmt: skip
        )
    (root / "turns.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in turns))
    (root / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in results))
    (root / "config.json").write_text(f'{{"rollout": {{"name": "{name}"}}}}')
    return root
