"""Evaluating a file of candidates: every Verdict appended as it arrives, resumable after any interruption.

Input rows (JSONL): ``{"candidate_id", "task_id", "code"}`` or, instead of ``code``, a coder's raw
``response`` from which the program is extracted (a response with no program is a compile error: it says
why). Output, in the run directory: ``verdicts.jsonl`` (one row per candidate, written and flushed as each
finishes), ``config.json`` (the resolved configuration) and ``summary.json``. A rerun skips every candidate
already in ``verdicts.jsonl`` and repairs a last line cut short by a crash, so nothing is redone or lost.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from rubric_rl.sandbox.executors.base import Executor
from rubric_rl.sandbox.verdict import Verdict
from rubric_rl.tasks.task import Task

log = logging.getLogger(__name__)


class BatchInputError(ValueError):
    """The candidates file is unusable; the message names the file and line."""


class CandidateRow(BaseModel):
    candidate_id: str = Field(min_length=1, description="Unique within the file.")
    task_id: str = Field(description="Id of the task (e.g. 'L1-19') in the task source.")
    code: str | None = Field(default=None, description="The candidate program.")
    response: str | None = Field(default=None, description="A coder's raw response, if no code is given.")

    @model_validator(mode="after")
    def _one_source(self) -> CandidateRow:
        if (self.code is None) == (self.response is None):
            raise ValueError("give exactly one of 'code' and 'response'")
        return self


class BatchRecord(BaseModel):
    """One row of ``verdicts.jsonl``."""

    candidate_id: str
    task_id: str
    verdict: Verdict
    extras: dict[str, Any] = Field(default_factory=dict, description="Added by callbacks (e.g. a judgment).")
    finished_at: float


def read_candidates(path: Path) -> list[CandidateRow]:
    rows: list[CandidateRow] = []
    seen: dict[str, int] = {}
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise BatchInputError(f"{path}: candidates file does not exist") from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = CandidateRow.model_validate_json(line)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "row"
            raise BatchInputError(f"{path}:{lineno}: {where}: {err['msg']}") from None
        if row.candidate_id in seen:
            raise BatchInputError(
                f"{path}:{lineno}: candidate_id {row.candidate_id!r} repeats line {seen[row.candidate_id]}"
            )
        seen[row.candidate_id] = lineno
        rows.append(row)
    if not rows:
        raise BatchInputError(f"{path}: no candidates in file")
    return rows


def load_done(path: Path) -> set[str]:
    """Candidate ids already in ``verdicts.jsonl``; a trailing partial line (a crash mid-write) is cut off."""
    if not path.exists():
        return set()
    data = path.read_bytes()
    done: set[str] = set()
    good_end = 0
    pos = 0
    for line in data.splitlines(keepends=True):
        pos += len(line)
        if not line.endswith(b"\n"):
            break
        try:
            done.add(json.loads(line)["candidate_id"])
            good_end = pos
        except (ValueError, KeyError):
            break
    if good_end != len(data):
        log.warning("%s: dropping %d bytes of an unfinished last row", path, len(data) - good_end)
        with path.open("r+b") as f:
            f.truncate(good_end)
    return done


def _program_of(row: CandidateRow) -> tuple[str | None, str | None]:
    if row.code is not None:
        return row.code, None
    from rubric_rl.skills.parsing import extract_program

    extraction = extract_program(row.response or "")
    if extraction.ok:
        return extraction.program, None
    return None, f"no program in the response ({extraction.error_code}): {extraction.error}"


def _unparseable_verdict(row: CandidateRow, reason: str) -> Verdict:
    sha = hashlib.sha256((row.response or "").encode()).hexdigest()
    return Verdict(
        status="compile_error", task_id=row.task_id, candidate_sha256=sha, errors=[reason], compile_log=reason
    )


Extra = Callable[[Task, str, Verdict], Awaitable[dict[str, Any]]]


async def run_batch(
    tasks: dict[str, Task],
    rows: list[CandidateRow],
    executor: Executor,
    out_dir: Path,
    *,
    extra: Extra | None = None,
    on_done: Callable[[BatchRecord], None] | None = None,
) -> dict[str, Any]:
    """Evaluate every row not yet in ``out_dir/verdicts.jsonl``; returns the summary (also written)."""
    missing = sorted({r.task_id for r in rows} - set(tasks))
    if missing:
        raise BatchInputError(f"candidates name tasks the source does not have: {', '.join(missing[:10])}")
    out_dir.mkdir(parents=True, exist_ok=True)
    verdicts_path = out_dir / "verdicts.jsonl"
    done = load_done(verdicts_path)
    todo = [r for r in rows if r.candidate_id not in done]
    started = time.monotonic()

    async def one(row: CandidateRow) -> BatchRecord:
        task = tasks[row.task_id]
        program, reason = _program_of(row)
        if program is None:
            verdict = _unparseable_verdict(row, reason or "no program")
        else:
            verdict = await executor.evaluate(task, program)
        extras = await extra(task, program or "", verdict) if extra is not None else {}
        return BatchRecord(
            candidate_id=row.candidate_id, task_id=row.task_id, verdict=verdict, extras=extras, finished_at=time.time()
        )

    with verdicts_path.open("a") as sink:
        for future in asyncio.as_completed([one(r) for r in todo]):
            record = await future
            sink.write(record.model_dump_json() + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            if on_done is not None:
                on_done(record)
    summary = summarize_run(
        verdicts_path,
        elapsed_s=time.monotonic() - started,
        evaluated=len(todo),
        skipped=len(rows) - len(todo),
        executor_stats=executor.stats(),
    )
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def summarize_run(
    verdicts_path: Path, *, elapsed_s: float, evaluated: int, skipped: int, executor_stats: dict[str, Any]
) -> dict[str, Any]:
    records = [BatchRecord.model_validate_json(line) for line in verdicts_path.read_text().splitlines() if line]
    statuses = Counter(r.verdict.status for r in records)
    correct = [r.verdict for r in records if r.verdict.status == "correct"]
    speedups = [v.speedup_eager for v in correct if v.speedup_eager]
    compile_speedups = [v.speedup_compile for v in correct if v.speedup_compile]
    n = len(records)
    return {
        "candidates": n,
        "evaluated_now": evaluated,
        "skipped_already_done": skipped,
        "status": dict(sorted(statuses.items())),
        "correct_rate": len(correct) / n if n else 0.0,
        "fast_eager_rate": sum(1 for s in speedups if s > 1.0) / n if n else 0.0,
        "fast_compile_rate": sum(1 for s in compile_speedups if s > 1.0) / n if n else 0.0,
        "geomean_speedup_eager": math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else None,
        "geomean_speedup_compile": (
            math.exp(sum(math.log(s) for s in compile_speedups) / len(compile_speedups)) if compile_speedups else None
        ),
        "infra_errors": sum(1 for r in records if r.verdict.infra_error),
        "elapsed_s": round(elapsed_s, 3),
        "candidates_per_hour": round(3600 * evaluated / elapsed_s, 1) if elapsed_s > 0 and evaluated else None,
        "executor": executor_stats,
    }
