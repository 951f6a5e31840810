"""Reading evaluated programs: a run's reward ledger, or a file of Verdicts.

The reward ledger (``ledger.jsonl`` in a run directory, one ``RewardRecord`` per scored sample, written by
``rubric_rl.reward``) is read here as plain JSON, its ``verdict`` validated as a ``Verdict`` and its
``judgment`` as a ``Judgment``; this is the one place that knows the row's layout, so it can switch to the
reward package's own model without touching the datasets built from it.

A Verdicts file (``--from-verdicts``) is JSONL of ``{"task_id", "program" (or "code"), "verdict"}`` rows,
optionally with ``candidate_id``; ``skills build --bootstrap`` writes one. Both readers skip a last line cut
short by a crash (a run still being written) with a warning, and fail naming the file and line on any other
unreadable row.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from rubric_rl.judge import Judgment
from rubric_rl.sandbox import Verdict

logger = logging.getLogger(__name__)

LEDGER_FILE = "ledger.jsonl"


class LedgerError(ValueError):
    """An unreadable ledger or Verdicts file; the message names the file and line."""


class EvaluatedProgram(BaseModel):
    """A program, the task it answers, and the Verdict the sandbox gave it."""

    task_id: str
    program: str
    verdict: Verdict
    where: str = Field(description="File and line it was read from.")


class LedgerRow(BaseModel):
    """The fields of a reward-ledger row that the datasets use."""

    task_id: str
    data_source: str | None = None
    skill: str | None = None
    prompt: list[dict[str, Any]] = Field(default_factory=list, description="Chat messages the coder was given.")
    response: str | None = None
    program: str | None = None
    extraction_error: str | None = None
    verdict: Verdict
    judgment: Judgment | None = None
    components: dict[str, Any] = Field(default_factory=dict)
    score: float
    masked: bool = False
    mask_reason: str | None = None
    config_hash: str | None = None
    where: str

    def evaluated(self) -> EvaluatedProgram | None:
        if self.program is None:
            return None
        return EvaluatedProgram(task_id=self.task_id, program=self.program, verdict=self.verdict, where=self.where)


def ledger_path(path: Path) -> Path:
    """A ledger file, or the ``ledger.jsonl`` of a run directory."""
    return path / LEDGER_FILE if path.is_dir() else path


def _json_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        data = path.read_text()
    except FileNotFoundError:
        raise LedgerError(f"{path}: does not exist") from None
    lines = data.split("\n")
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if lineno == len(lines):  # no newline after it: a row cut short by a crash or a writer still at work
                logger.warning("%s: skipping an unfinished last row", where)
                return
            raise LedgerError(f"{where}: not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise LedgerError(f"{where}: row is not an object")
        yield where, row


def _validated(model: type[BaseModel], row: dict[str, Any], where: str) -> Any:
    try:
        return model.model_validate(row)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "row"
        raise LedgerError(f"{where}: {loc}: {err['msg']}") from None


def read_ledger(path: Path) -> list[LedgerRow]:
    """Every row of a reward ledger (a ``ledger.jsonl`` or a run directory holding one)."""
    file = ledger_path(path)
    rows = []
    for where, raw in _json_rows(file):
        fields = {k: raw.get(k) for k in LedgerRow.model_fields if k != "where" and raw.get(k) is not None}
        fields["verdict"] = _validated(Verdict, raw.get("verdict") or {}, f"{where}: verdict")
        if raw.get("judgment") is not None:
            fields["judgment"] = _validated(Judgment, raw["judgment"], f"{where}: judgment")
        rows.append(_validated(LedgerRow, {**fields, "where": where}, where))
    return rows


def read_verdicts_file(path: Path) -> list[EvaluatedProgram]:
    """Evaluated programs from a JSONL of ``{"task_id", "program" | "code", "verdict"}`` rows."""
    out = []
    for where, raw in _json_rows(path):
        program = raw.get("program", raw.get("code"))
        if not isinstance(program, str):
            raise LedgerError(f"{where}: row has no 'program' (or 'code') string")
        verdict = _validated(Verdict, raw.get("verdict") or {}, f"{where}: verdict")
        task_id = raw.get("task_id") or verdict.task_id
        if not task_id:
            raise LedgerError(f"{where}: row has no task_id (nor does its verdict)")
        out.append(EvaluatedProgram(task_id=task_id, program=program, verdict=verdict, where=where))
    return out


def evaluated_from_ledger(rows: list[LedgerRow]) -> list[EvaluatedProgram]:
    """The ledger's rows that hold a program (a response with none has nothing to refine)."""
    return [e for e in (r.evaluated() for r in rows) if e is not None]
