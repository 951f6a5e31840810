"""Atomic-skill datasets for verl: tasks (and evaluated programs) -> RL parquet files and a manifest.

One row per prompt, in verl's ``RLHFDataset`` layout: ``data_source``, ``prompt`` (chat messages rendered from
the skill card), ``ability``, ``reward_model: {style: rule, ground_truth: <reference program>}`` and
``extra_info`` (task id, level, skill, split, and for refine rows the prior program, its feedback and its
Verdict's headline numbers). *generate* rows come one per task; *refine* rows one per evaluated program that
failed, was hacked, or was correct but slow, with ``render_feedback`` of its Verdict.

What must hold:

- the split is by task, never by row: every row of a task lands in the same file, and a task's side depends
  only on its id and the seed, so a generate and a refine dataset built apart agree on it;
- KernelBench's evaluation problems are left out (and listed in the manifest) unless ``allow_eval_tasks``;
- prompts are measured with the trained model's tokenizer as verl measures them, and rows over
  ``max_prompt_length`` are dropped and counted, never truncated.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rubric_rl.sandbox import Status, Verdict
from rubric_rl.skills.cards import SkillCard, load_skill
from rubric_rl.skills.feedback import FeedbackConfig, render_feedback
from rubric_rl.skills.ledger import EvaluatedProgram
from rubric_rl.tasks import Task, is_evaluation_task

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 1
DROP_REASONS = (
    "over_length",  # prompt longer than max_prompt_length tokens
    "eval_task",  # an evaluated program of a KernelBench evaluation task
    "unknown_task",  # an evaluated program of a task no source has
    "evaluator_failed",  # its Verdict is an infrastructure failure (infra_error)
    "nothing_to_refine",  # correct and fast enough (or a status not in refine_statuses)
    "duplicate_program",  # the same program for the same task again
    "over_per_task_limit",  # beyond max_refine_per_task
)
Split = Literal["train", "val"]


class DatasetConfig(BaseModel):
    """How a skill dataset is built; written into the manifest."""

    model_config = ConfigDict(extra="forbid")

    skills: list[str] = Field(default=["generate"], min_length=1, description="Skill cards: bundled names or paths.")
    backend: Literal["cuda", "cpu"] = Field(default="cuda", description="Backend instructions the cards render.")
    tokenizer: str | None = Field(default=None, description="Tokenizer (model name or path) measuring prompts.")
    max_prompt_length: int | None = Field(
        default=None, ge=1, description="Rows with longer prompts (tokens) are dropped and counted; needs tokenizer."
    )
    val_fraction: float = Field(default=0.1, ge=0.0, lt=1.0, description="Share of tasks (not rows) held out.")
    seed: int = Field(default=0, description="Seed of the task split.")
    allow_eval_tasks: bool = Field(default=False, description="Keep KernelBench evaluation problems in the data.")
    refine_statuses: list[Status] = Field(
        default=["incorrect", "compile_error", "runtime_error", "timeout", "hack", "correct"],
        description="Verdict statuses that make a refine row ('correct' only when slow, see refine_slow_below).",
    )
    refine_slow_against: Literal["eager", "compile"] = Field(
        default="compile", description="Baseline a correct program must beat not to need refining."
    )
    refine_slow_below: float = Field(
        default=1.0, gt=0, description="A correct program with a speedup below this over the baseline is refined."
    )
    max_refine_per_task: int | None = Field(default=None, ge=1, description="Refine rows kept per task, in order.")
    feedback: FeedbackConfig = Field(default_factory=FeedbackConfig, description="Bounds of the rendered feedback.")
    data_source_prefix: str = Field(default="rubric_rl", description="data_source is '<prefix>/<skill>'.")

    @model_validator(mode="after")
    def _length_needs_tokenizer(self) -> DatasetConfig:
        if self.max_prompt_length is not None and self.tokenizer is None:
            raise ValueError("max_prompt_length: needs a tokenizer to measure prompts")
        return self


@dataclass
class SkillRow:
    task: Task
    card: SkillCard
    messages: list[dict[str, str]]
    prior: EvaluatedProgram | None = None
    feedback: str | None = None
    tokens: int | None = None


def card_digest(card: SkillCard) -> str:
    return hashlib.sha256(card.model_dump_json().encode()).hexdigest()[:16]


def task_split(task_ids: Sequence[str], val_fraction: float, seed: int) -> dict[str, Split]:
    """Each task's side: val when a hash of (seed, id) falls under ``val_fraction``, so it depends on nothing
    else. When that leaves val empty while there are two tasks or more, the task of lowest hash moves there."""

    def u(task_id: str) -> float:
        return int(hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()[:15], 16) / 16**15

    ids = sorted(set(task_ids))
    split: dict[str, Split] = {t: ("val" if u(t) < val_fraction else "train") for t in ids}
    if val_fraction > 0 and len(ids) >= 2 and "val" not in split.values():
        lowest = min(ids, key=u)
        logger.info("no task hashed into val; moving %s (lowest hash) there", lowest)
        split[lowest] = "val"
    return split


def generate_rows(tasks: Sequence[Task], card: SkillCard, backend: str) -> list[SkillRow]:
    return [SkillRow(t, card, card.render(reference=t.code, backend=backend)) for t in tasks]  # type: ignore[arg-type]


def refine_reason(verdict: Verdict, cfg: DatasetConfig) -> str | None:
    """Why a program is worth a refine row (None: it is not)."""
    if verdict.infra_error is not None or verdict.status not in cfg.refine_statuses:
        return None
    if verdict.status != "correct":
        return verdict.status
    speedup = verdict.speedup_compile if cfg.refine_slow_against == "compile" else verdict.speedup_eager
    if speedup is not None and speedup < cfg.refine_slow_below:
        return f"slow against {cfg.refine_slow_against}"
    return None


def refine_rows(
    tasks: dict[str, Task],
    evaluated: Sequence[EvaluatedProgram],
    card: SkillCard,
    cfg: DatasetConfig,
    count_tokens: Any = None,
) -> tuple[list[SkillRow], Counter[str]]:
    """Refine rows from evaluated programs, with the counts of those left out and why."""
    rows: list[SkillRow] = []
    dropped: Counter[str] = Counter()
    seen: set[tuple[str, str]] = set()
    per_task: Counter[str] = Counter()
    for e in evaluated:
        task = tasks.get(e.task_id)
        key = (e.task_id, hashlib.sha256(e.program.encode()).hexdigest())
        if task is None:
            dropped["unknown_task"] += 1
        elif e.verdict.infra_error is not None:
            dropped["evaluator_failed"] += 1
        elif refine_reason(e.verdict, cfg) is None:
            dropped["nothing_to_refine"] += 1
        elif key in seen:
            dropped["duplicate_program"] += 1
        elif cfg.max_refine_per_task is not None and per_task[e.task_id] >= cfg.max_refine_per_task:
            dropped["over_per_task_limit"] += 1
        else:
            seen.add(key)
            per_task[e.task_id] += 1
            feedback = render_feedback(e.verdict, cfg.feedback, count_tokens=count_tokens)
            messages = card.render(
                reference=task.code,
                backend=cfg.backend,
                candidate=e.program,
                feedback=feedback,
            )
            rows.append(SkillRow(task, card, messages, prior=e, feedback=feedback))
    return rows, dropped


def _record(row: SkillRow, split: Split, index: int, cfg: DatasetConfig) -> dict[str, Any]:
    prior = row.prior
    v = prior.verdict if prior is not None else None
    return {
        "data_source": f"{cfg.data_source_prefix}/{row.card.name}",
        "prompt": row.messages,
        "ability": f"kernel/{cfg.backend}",
        "reward_model": {"style": "rule", "ground_truth": row.task.code},
        "extra_info": {
            "index": index,
            "task_id": row.task.id,
            "task_name": row.task.name,
            "level": row.task.level,
            "origin": row.task.origin,
            "skill": row.card.name,
            "card_version": row.card.version,
            "split": split,
            "backend": cfg.backend,
            "prompt_tokens": row.tokens,
            "prior_program": prior.program if prior else None,
            "feedback": row.feedback,
            "prior_status": v.status if v else None,
            "prior_speedup_eager": v.speedup_eager if v else None,
            "prior_speedup_compile": v.speedup_compile if v else None,
            "prior_candidate_sha256": v.candidate_sha256 if v else None,
            "prior_where": prior.where if prior else None,
        },
    }


def _schema() -> Any:
    import pyarrow as pa

    s, i, f = pa.string(), pa.int64(), pa.float64()
    extra = [
        ("index", i), ("task_id", s), ("task_name", s), ("level", i), ("origin", s), ("skill", s),
        ("card_version", i), ("split", s), ("backend", s), ("prompt_tokens", i), ("prior_program", s),
        ("feedback", s), ("prior_status", s), ("prior_speedup_eager", f), ("prior_speedup_compile", f),
        ("prior_candidate_sha256", s), ("prior_where", s),
    ]  # fmt: skip
    return pa.schema(
        [
            ("data_source", s),
            ("prompt", pa.list_(pa.struct([("role", s), ("content", s)]))),
            ("ability", s),
            ("reward_model", pa.struct([("style", s), ("ground_truth", s)])),
            ("extra_info", pa.struct(extra)),
        ]
    )


def write_parquet(records: list[dict[str, Any]], path: Path, schema: Any) -> None:
    """Write atomically (a temporary file renamed), so a reader never sees half a file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(pa.Table.from_pylist(records, schema=schema), tmp)
    tmp.replace(path)


def _length_stats(lengths: list[int]) -> dict[str, float] | None:
    if not lengths:
        return None
    xs = sorted(lengths)

    def q(p: float) -> int:
        return xs[min(len(xs) - 1, int(p * len(xs)))]

    return {"n": len(xs), "min": xs[0], "mean": round(sum(xs) / len(xs), 1), "p50": q(0.5), "p90": q(0.9),
            "p99": q(0.99), "max": xs[-1]}  # fmt: skip


def _measure(rows: list[SkillRow], cfg: DatasetConfig, tokenizer: Any) -> tuple[list[SkillRow], int, list[int]]:
    """Token lengths of every row; rows over the limit are dropped. Returns (kept, dropped, all lengths)."""
    if tokenizer is None:
        return rows, 0, []
    from rubric_rl.skills.tokens import prompt_tokens

    lengths = []
    kept = []
    for row in rows:
        row.tokens = prompt_tokens(tokenizer, row.messages)
        lengths.append(row.tokens)
        if cfg.max_prompt_length is None or row.tokens <= cfg.max_prompt_length:
            kept.append(row)
    return kept, len(rows) - len(kept), lengths


def _counts(rows: list[SkillRow], split: dict[str, Split]) -> dict[str, Any]:
    by_skill: dict[str, Counter[str]] = {"train": Counter(), "val": Counter()}
    by_level: dict[str, Counter[str]] = {"train": Counter(), "val": Counter()}
    for r in rows:
        side = split[r.task.id]
        by_skill[side][r.card.name] += 1
        by_level[side]["none" if r.task.level is None else str(r.task.level)] += 1
    return {
        "by_skill": {k: dict(sorted(v.items())) for k, v in by_skill.items()},
        "by_level": {k: dict(sorted(v.items())) for k, v in by_level.items()},
    }


def build_dataset(
    tasks: Sequence[Task],
    cfg: DatasetConfig,
    out_dir: Path,
    *,
    evaluated: Sequence[EvaluatedProgram] | None = None,
    sources: dict[str, Any] | None = None,
    tokenizer: Any = None,
) -> dict[str, Any]:
    """Write ``train.parquet``, ``val.parquet`` and ``dataset.json`` into ``out_dir``; returns the manifest."""
    cards = [load_skill(s) for s in cfg.skills]
    if tokenizer is None and cfg.tokenizer is not None:
        from rubric_rl.skills.tokens import load_tokenizer

        tokenizer = load_tokenizer(cfg.tokenizer)
    excluded = sorted(t.id for t in tasks if is_evaluation_task(t)) if not cfg.allow_eval_tasks else []
    usable = [t for t in tasks if t.id not in set(excluded)]
    by_id = {t.id: t for t in usable}
    dropped: Counter[str] = Counter({k: 0 for k in DROP_REASONS})
    rows: list[SkillRow] = []
    count_tokens = None
    if tokenizer is not None and cfg.feedback.max_tokens is not None:
        from rubric_rl.skills.tokens import text_tokens

        def count_tokens(text: str) -> int:
            return text_tokens(tokenizer, text)

    for card in cards:
        if card.contract.from_scratch:
            rows += generate_rows(usable, card, cfg.backend)
            continue
        if evaluated is None:
            raise ValueError(f"skill {card.name!r} needs evaluated programs (a ledger, a Verdicts file or bootstrap)")
        eval_ids = set(excluded)
        kept_evals = [e for e in evaluated if e.task_id not in eval_ids]
        dropped["eval_task"] += len(evaluated) - len(kept_evals)
        more, why = refine_rows(by_id, kept_evals, card, cfg, count_tokens)
        rows += more
        dropped.update(why)
    rows, over, lengths = _measure(rows, cfg, tokenizer)
    dropped["over_length"] = over
    split = task_split([r.task.id for r in rows], cfg.val_fraction, cfg.seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    schema = _schema()
    files = {}
    for side in ("train", "val"):
        records = [_record(r, side, i, cfg) for i, r in enumerate(x for x in rows if split[x.task.id] == side)]
        write_parquet(records, out_dir / f"{side}.parquet", schema)
        files[side] = {"path": f"{side}.parquet", "rows": len(records)}
    manifest = {
        "schema_version": MANIFEST_VERSION,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "skills": {c.name: {"version": c.version, "digest": card_digest(c)} for c in cards},
        "backend": cfg.backend,
        "sources": sources or {},
        "files": files,
        "tasks": {side: sorted({t for t, s in split.items() if s == side}) for side in ("train", "val")},
        "counts": _counts(rows, split),
        "token_lengths": {"tokenizer": cfg.tokenizer, **(_length_stats(lengths) or {})} if tokenizer else None,
        "max_prompt_length": cfg.max_prompt_length,
        "dropped": dict(sorted((k, v) for k, v in dropped.items())),
        "excluded_eval_tasks": excluded,
        "config": cfg.model_dump(mode="json"),
    }
    (out_dir / "dataset.json").write_text(json.dumps(manifest, indent=2) + "\n")
    logger.info("wrote %s: %s", out_dir, {k: v["rows"] for k, v in files.items()})
    return manifest
