"""Refine data before any training run: evaluate given candidates (the bundled examples by default) first.

Candidates are a JSONL of ``{"candidate_id", "task_id", "code"}`` (or ``"response"``, a raw coder answer from
which the program is extracted), the format ``rubric-rl verify-batch`` reads. Each is evaluated by an executor
and appended as it finishes to a Verdicts file of ``{"candidate_id", "task_id", "program", "verdict"}`` rows
(``rubric_rl.skills.ledger.read_verdicts_file`` reads it); a rerun skips the candidates already there.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from rubric_rl.jsonl import repaired_rows
from rubric_rl.skills.ledger import EvaluatedProgram, read_verdicts_file
from rubric_rl.skills.parsing import extract_program
from rubric_rl.tasks import Task


class CandidateInputError(ValueError):
    """The candidates file is unusable; the message names the file and line."""


class Candidate(BaseModel):
    candidate_id: str = Field(min_length=1, description="Unique within the file.")
    task_id: str = Field(description="Task the program answers.")
    code: str | None = Field(default=None, description="The program.")
    response: str | None = Field(default=None, description="A coder's raw response, when no code is given.")

    @model_validator(mode="after")
    def _one_source(self) -> Candidate:
        if (self.code is None) == (self.response is None):
            raise ValueError("give exactly one of 'code' and 'response'")
        return self

    def program(self) -> str | None:
        return self.code if self.code is not None else extract_program(self.response or "").program


def read_candidates(path: Path) -> list[Candidate]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise CandidateInputError(f"{path}: candidates file does not exist") from None
    out: list[Candidate] = []
    seen: set[str] = set()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = Candidate.model_validate_json(line)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(map(str, err["loc"])) or "row"
            raise CandidateInputError(f"{path}:{lineno}: {where}: {err['msg']}") from None
        if row.candidate_id in seen:
            raise CandidateInputError(f"{path}:{lineno}: candidate_id {row.candidate_id!r} repeats")
        seen.add(row.candidate_id)
        out.append(row)
    return out


async def bootstrap_evaluations(
    tasks: dict[str, Task],
    candidates: Sequence[Candidate],
    executor: Any,
    out_path: Path,
    *,
    on_done: Callable[[str, str], None] | None = None,
) -> tuple[list[EvaluatedProgram], dict[str, int]]:
    """Evaluate the candidates not yet in ``out_path``; returns every evaluated program there and counts.

    ``executor``: a ``rubric_rl.sandbox.executors`` executor (``await executor.evaluate(task, program)``).
    """
    missing = sorted({c.task_id for c in candidates} - set(tasks))
    if missing:
        raise CandidateInputError(f"candidates name tasks the sources do not have: {', '.join(missing[:10])}")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    done = {row["candidate_id"] for row in repaired_rows(out_path)}  # a crash's unfinished last row cut first
    todo = [c for c in candidates if c.candidate_id not in done]
    counts = {"candidates": len(candidates), "already_done": len(candidates) - len(todo), "no_program": 0}

    async def one(c: Candidate) -> dict[str, Any] | None:
        program = c.program()
        if program is None:
            counts["no_program"] += 1
            return None
        verdict = await executor.evaluate(tasks[c.task_id], program)
        return {"candidate_id": c.candidate_id, "task_id": c.task_id, "program": program, "verdict": verdict}

    with out_path.open("a") as sink:
        for future in asyncio.as_completed([one(c) for c in todo]):
            row = await future
            if row is None:
                continue
            verdict = row.pop("verdict")
            sink.write(json.dumps({**row, "verdict": verdict.model_dump(mode="json")}) + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            if on_done is not None:
                on_done(row["candidate_id"], verdict.status)
    evaluated = read_verdicts_file(out_path) if out_path.exists() else []
    counts["evaluated"] = len(evaluated)
    return evaluated, counts
