"""Rejection fine-tuning data: the good samples of a reward ledger as chat conversations for verl's SFT trainer.

A row is kept when its reward is positive and trustworthy: not masked, a program was extracted, the sandbox
found no hack (status ``hack`` or any error-severity finding), the judge did not fail, the program is correct
(``require_correct``), and its ``ModelNew`` is not a near-copy of the reference's ``Model``. The output is a
parquet of ``messages`` (the prompt's messages, then the response as the assistant turn) that
``verl.utils.dataset.multiturn_sft_dataset.MultiTurnSFTDataset`` reads with ``data.messages_key: messages``;
loss falls on the assistant turn only. A manifest beside it counts what each filter removed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rubric_rl.skills.dataset import write_parquet
from rubric_rl.skills.ledger import LedgerRow
from rubric_rl.skills.parsing import find_code_blocks
from rubric_rl.tasks.similarity import copies_reference


class SftConfig(BaseModel):
    """Which ledger rows become SFT conversations."""

    model_config = ConfigDict(extra="forbid")

    min_score: float = Field(default=0.0, description="Rows need a reward strictly above this.")
    require_correct: bool = Field(default=True, description="Rows need a 'correct' Verdict.")
    copy_threshold: float = Field(
        default=0.9, gt=0, le=1, description="ModelNew this similar (code) to the reference's Model is a copy."
    )
    max_per_prompt: int | None = Field(default=None, ge=1, description="Kept rows per prompt, best reward first.")


def reference_from_prompt(messages: Sequence[dict[str, Any]]) -> str | None:
    """The reference program as the skill cards show it: the first Python block of the first user message."""
    for m in messages:
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            blocks = [b for b in find_code_blocks(m["content"]) if b.info in ("", "python", "py")]
            return blocks[0].code if blocks else None
    return None


def reject_reason(row: LedgerRow, cfg: SftConfig, reference: str | None) -> str | None:
    """Why a ledger row is not SFT material (None: keep it). Checks run in the order of the manifest."""
    v, j = row.verdict, row.judgment
    checks = [
        ("masked", row.masked),
        ("no_program", row.program is None or row.response is None),
        ("not_positive", row.score <= cfg.min_score),
        ("hack_finding", v.status == "hack" or bool(v.hack_rules)),
        ("judge_failed", j is not None and j.judge_failed),
        ("not_correct", cfg.require_correct and v.status != "correct"),
        ("no_prompt", not row.prompt),
    ]
    for reason, failed in checks:
        if failed:
            return reason
    if reference is not None and copies_reference(reference, row.program or "", cfg.copy_threshold)[0]:
        return "copies_reference"
    return None


def sft_records(
    rows: Sequence[LedgerRow], cfg: SftConfig, references: dict[str, str] | None = None
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Conversations from ledger rows, with the counts of rows each filter removed."""
    dropped: Counter[str] = Counter()
    kept: list[LedgerRow] = []
    for row in rows:
        reference = (references or {}).get(row.task_id) or reference_from_prompt(row.prompt)
        reason = reject_reason(row, cfg, reference)
        if reason is None:
            kept.append(row)
        else:
            dropped[reason] += 1
    seen: set[str] = set()
    per_prompt: Counter[str] = Counter()
    records = []
    for row in sorted(kept, key=lambda r: -r.score):
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in row.prompt]
        prompt_key = hashlib.sha256(json.dumps(messages).encode()).hexdigest()
        key = hashlib.sha256(f"{prompt_key}\0{row.response}".encode()).hexdigest()
        if key in seen:
            dropped["duplicate"] += 1
            continue
        seen.add(key)
        if cfg.max_per_prompt is not None and per_prompt[prompt_key] >= cfg.max_per_prompt:
            dropped["over_per_prompt_limit"] += 1
            continue
        per_prompt[prompt_key] += 1
        messages.append({"role": "assistant", "content": row.response or ""})
        records.append(
            {
                "messages": messages,
                "data_source": row.data_source or "",
                "task_id": row.task_id,
                "skill": row.skill or "",
                "score": float(row.score),
                "where": row.where,
            }
        )
    return records, dropped


def _schema() -> Any:
    import pyarrow as pa

    s = pa.string()
    return pa.schema(
        [
            ("messages", pa.list_(pa.struct([("role", s), ("content", s)]))),
            ("data_source", s),
            ("task_id", s),
            ("skill", s),
            ("score", pa.float64()),
            ("where", s),
        ]
    )


def export_sft(
    rows: Sequence[LedgerRow],
    cfg: SftConfig,
    out_file: Path,
    *,
    references: dict[str, str] | None = None,
    sources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the SFT parquet and its manifest (``<out_file stem>.json``); returns the manifest."""
    records, dropped = sft_records(rows, cfg, references)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    write_parquet(records, out_file, _schema())
    manifest = {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "sources": sources or {},
        "ledger_rows": len(rows),
        "rows": len(records),
        "tasks": len({r["task_id"] for r in records}),
        "by_skill": dict(Counter(r["skill"] for r in records)),
        "dropped": dict(sorted(dropped.items())),
        "config": cfg.model_dump(mode="json"),
    }
    out_file.with_suffix(".json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
