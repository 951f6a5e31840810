"""Scoring one coder response: extract the program, evaluate it and judge it concurrently, mix, settle masking
with the group, append to the ledger. Independent of verl (the adapter in rubric_rl.reward.verl only unpacks
verl's call), so benchmarks, tests and notebooks use it directly.

A dataset row's ``extra_info`` carries what the reward needs besides the reference program (``SampleInfo``):
the task id, the skill, and for refine the program that was refined and the feedback it answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from rubric_rl.judge import Judge, JudgeRequest, Judgment, build_request
from rubric_rl.reward.config import RewardConfig
from rubric_rl.reward.groups import group_mean
from rubric_rl.reward.ledger import LedgerWriter
from rubric_rl.reward.mix import compiled, needs_judgment, score_sample
from rubric_rl.reward.record import RewardRecord, StageSeconds
from rubric_rl.sandbox import Verdict
from rubric_rl.sandbox.executors import Executor
from rubric_rl.skills import extract_program
from rubric_rl.tasks import Task, check_reference_source

log = logging.getLogger(__name__)


class SampleInfo(BaseModel):
    """The fields of a dataset row's ``extra_info`` the reward reads (others are ignored)."""

    model_config = ConfigDict(extra="ignore")

    task_id: str | None = Field(default=None, description="Task id; None: derived from the reference's hash.")
    skill: str = Field(default="generate", description="Skill card the prompt was rendered from.")
    level: int | None = Field(default=None, description="KernelBench level, when the task has one.")
    split: str | None = Field(default=None, description="train | val.")
    index: int | None = Field(default=None, description="Row index in its dataset.")
    previous: str | None = Field(default=None, description="refine: the program being refined.")
    feedback: str | None = Field(default=None, description="refine: the feedback the response must act on.")


class Board(Protocol):
    """Where a group's scores meet (rubric_rl.reward.groups.GroupBoard, here or in a Ray actor)."""

    async def settle(
        self, group_id: str, size: int, sample_id: str, own_score: float | None, wait_s: float, fallback: float
    ) -> tuple[float, list[str]]: ...

    async def observe(self, row: dict[str, object]) -> None: ...


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def extraction_verdict(task_id: str, response: str, error: str) -> Verdict:
    """The Verdict of a response with no program: a compile failure that says why."""
    message = f"no program in the response: {error}"
    return Verdict(
        status="compile_error",
        task_id=task_id,
        candidate_sha256=_sha(response),
        errors=[message],
        compile_log=message,
    )


def make_reference_task(reference: str, info: SampleInfo, data_source: str) -> Task:
    """The Task of a row: its reference program (verl's ground_truth); a reference that is not one raises."""
    task_id = info.task_id or f"ref-{_sha(reference)[:12]}"
    check_reference_source(reference, f"task {task_id} ({data_source}): reward_model.ground_truth")
    return Task(
        id=task_id, level=info.level, problem_id=info.index or 0, name=task_id, origin=data_source, code=reference
    )


class RewardScorer:
    """Turns responses into RewardRecords with one executor, one judge, one group board and one ledger."""

    def __init__(
        self,
        config: RewardConfig,
        executor: Executor,
        judge: Judge | None,
        *,
        board: Board | None = None,
        ledger: LedgerWriter | None = None,
        backend: str = "cpu",
    ) -> None:
        if config.mix.uses_judge and judge is None:
            raise ValueError(f"mix.name: {config.mix.name} needs a judge")
        self.config = config
        self.executor = executor
        self.judge = judge
        self.board = board
        self.ledger = ledger
        self.backend = backend
        self.config_hash = config.scoring_hash()

    def _request(self, task: Task, program: str, info: SampleInfo, verdict: Verdict | None) -> JudgeRequest:
        """The judge's request; a row that cannot make one (refine without feedback) raises here, at once."""
        return build_request(
            info.skill,
            task.code,
            program,
            feedback=info.feedback,
            previous=info.previous,
            verdict=verdict,
            backend="cuda" if self.backend == "cuda" else "cpu",
            task_id=task.id,
        )

    async def _timed_judge(self, request: JudgeRequest) -> tuple[Judgment, float]:
        assert self.judge is not None
        t = time.perf_counter()
        judgment = await self.judge.judge(request)
        return judgment, time.perf_counter() - t

    async def _evaluate_and_judge(
        self, task: Task, program: str, info: SampleInfo, seconds: StageSeconds
    ) -> tuple[Verdict, Judgment | None]:
        """The Verdict, and the judgment where the reward needs one. Without ``judge_sees_verdict`` the judge
        starts with the evaluation and its answer is dropped when the Verdict makes it moot."""
        early: asyncio.Task[tuple[Judgment, float]] | None = None
        if self.config.mix.uses_judge and not self.config.judge_sees_verdict:
            early = asyncio.ensure_future(self._timed_judge(self._request(task, program, info, None)))
            early.add_done_callback(_retrieve)  # a dropped judgment's error is not worth a warning
        t = time.perf_counter()
        try:
            verdict = await self.executor.evaluate(task, program, deadline_s=self.config.deadline_s)
        except BaseException:
            if early is not None:
                early.cancel()
            raise
        seconds.evaluate_s = time.perf_counter() - t
        if not needs_judgment(verdict, self.config):
            if early is not None:
                early.cancel()
            return verdict, None
        if early is None:
            early = asyncio.ensure_future(self._timed_judge(self._request(task, program, info, verdict)))
        judgment, seconds.judge_s = await early
        return verdict, judgment

    async def score(
        self,
        *,
        data_source: str,
        response: str,
        reference: str,
        info: SampleInfo,
        prompt: list[dict[str, Any]] | None = None,
        group_id: str | None = None,
        group_size: int | None = None,
    ) -> RewardRecord:
        """Score one response; never raises for the candidate or for our infrastructure (both become fields)."""
        started = time.perf_counter()
        seconds = StageSeconds()
        task = make_reference_task(reference, info, data_source)
        extraction = extract_program(response)
        seconds.extract_s = time.perf_counter() - started
        judgment: Judgment | None = None
        if extraction.program is None:
            verdict = extraction_verdict(task.id, response, extraction.error or str(extraction.error_code))
        else:
            verdict, judgment = await self._evaluate_and_judge(task, extraction.program, info, seconds)
        s = score_sample(verdict, judgment, info.skill, self.config)
        sample_id = uuid.uuid4().hex
        score, peers = await self._settle(s.score, sample_id, group_id, group_size, seconds)
        seconds.total_s = time.perf_counter() - started
        record = RewardRecord(
            sample_id=sample_id,
            task_id=task.id,
            data_source=data_source,
            skill=info.skill,
            split=info.split,
            level=info.level,
            index=info.index,
            prompt=prompt or [],
            response=response,
            program=extraction.program,
            extraction_error=extraction.error,
            previous=info.previous,
            feedback=info.feedback,
            verdict=verdict,
            judgment=judgment,
            components=s.components,
            own_score=s.score,
            score=score,
            masked=s.masked,
            mask_reason=s.mask_reason,
            group_id=group_id,
            group_size=group_size,
            group_peers=peers,
            config_hash=self.config_hash,
            seconds=seconds,
        )
        if s.masked:
            log.warning("sample %s of task %s masked (%s): scored %.4f", sample_id, task.id, s.mask_reason, score)
        if self.ledger is not None:
            self.ledger.append(record)
        if self.board is not None:
            await self.board.observe(metrics_row(record))
        return record

    async def _settle(
        self, own: float | None, sample_id: str, group_id: str | None, group_size: int | None, seconds: StageSeconds
    ) -> tuple[float, list[str] | None]:
        masking = self.config.masking
        grouped = masking.group_mean and self.board is not None and group_id is not None and (group_size or 0) > 1
        if not grouped:
            return (own if own is not None else group_mean([], masking.fallback_score)), None
        assert self.board is not None and group_id is not None and group_size is not None
        t = time.perf_counter()
        score, peers = await self.board.settle(
            group_id, group_size, sample_id, own, masking.group_wait_s, masking.fallback_score
        )
        seconds.group_wait_s = time.perf_counter() - t
        return score, (peers if own is None else None)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def metrics_row(record: RewardRecord) -> dict[str, object]:
    """What the metrics window needs of a record."""
    v = record.verdict
    return {
        "data_source": record.data_source,
        "score": record.score,
        "components": record.components,
        "compiled": compiled(v),
        "correct": v.status == "correct",
        "hack": v.status == "hack",
        "judge_failed": bool(record.judgment is not None and record.judgment.judge_failed),
        "masked": record.masked,
    }
