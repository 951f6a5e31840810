"""One task's Planner / Coder / Verifier loop.

plan (profile + LLM) -> [coder turn: generate | refine -> program -> sandbox Verdict -> Verifier feedback]* with a
replan after repeated failure or stagnation, until a budget ends it (turns, wall time, tokens, or a target speedup
reached). Every turn is handed to ``record`` as soon as it exists. A turn that failed through no fault of the
models' answers (the endpoint after its retries, the evaluator's infra_error) ends the task unfinished: it gets no
result, and a rerun of the run goes on from its recorded turns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from rubric_rl.agents.pcv.coder import Coder
from rubric_rl.agents.pcv.config import RolloutConfig
from rubric_rl.agents.pcv.planner import Planner
from rubric_rl.agents.pcv.records import StopReason, TaskResult, Turn
from rubric_rl.agents.pcv.sandbox import SandboxGateway
from rubric_rl.agents.pcv.state import TaskState
from rubric_rl.agents.pcv.verifier import Verifier
from rubric_rl.tasks import Task

log = logging.getLogger(__name__)


@dataclass
class Roles:
    """What a run's loops share: the roles, the sandbox and the run definition."""

    config: RolloutConfig
    planner: Planner | None
    coder: Coder
    verifier: Verifier
    gateway: SandboxGateway


async def coder_turn(task: Task, state: TaskState, roles: Roles) -> Turn:
    """Write (generate or refine), evaluate, review: one coder turn."""
    started, wall = time.time(), time.perf_counter()
    refined, feedback = state.refine_inputs()
    draft = await roles.coder.write(
        task, state.plan, program=refined.program if refined is not None else None, feedback=feedback
    )
    stages = {"coder_llm_s": draft.reply.seconds}
    turn = Turn(
        task_id=task.id,
        index=state.next_index,
        role="coder",
        kind="generate" if refined is None else "refine",
        coder_turn=state.coder_turns + 1,
        started_at=started,
        seconds=0.0,
        llm=draft.reply,
        response=draft.reply.content,
        endpoint_error=draft.reply.error,
        refined_turn=refined.index if refined is not None else None,
    )
    if draft.extraction is not None:
        t0 = time.perf_counter()
        if draft.extraction.ok:
            assert draft.extraction.program is not None
            turn.program = draft.extraction.program
            turn.verdict = await roles.gateway.evaluate(task, turn.program)
        else:
            turn.extraction_error = f"{draft.extraction.error_code}: {draft.extraction.error}"
            reason = f"no program in the response ({draft.extraction.error_code}): {draft.extraction.error}"
            turn.verdict = roles.gateway.no_program(task, draft.reply.content or "", reason)
        stages["sandbox_s"] = time.perf_counter() - t0
        review = roles.verifier.review(turn.verdict)
        stages["verifier_s"] = review.seconds
        turn.feedback, turn.citations = review.feedback, review.citations
    turn.stages = stages
    turn.seconds = time.perf_counter() - wall
    return turn


def task_result(task: Task, state: TaskState, config: RolloutConfig, stop: StopReason) -> TaskResult:
    kept = state.best or state.last_reviewed
    coder = [t for t in state.turns if t.role == "coder" and t.verdict is not None and not t.infra_failed]
    return TaskResult(
        task_id=task.id,
        task_name=task.name,
        level=task.level,
        run=config.name,
        track=config.track,
        status=kept.verdict.status if kept is not None and kept.verdict is not None else "none",
        best_turn=kept.index if kept is not None else None,
        program=kept.program if kept is not None else None,
        verdict=kept.verdict if kept is not None else None,
        coder_turns=state.coder_turns,
        plans=state.plans,
        first_correct_turn=state.first_correct_turn,
        statuses=[t.verdict.status for t in coder if t.verdict is not None],
        stop_reason=stop,
        tokens=state.tokens,
        seconds=state.seconds,
        stage_seconds=state.stage_seconds(),
        finished_at=time.time(),
    )


async def run_task(task: Task, prior: list[Turn], roles: Roles, record: Callable[[Turn], None]) -> TaskResult | None:
    """Run (or go on with) one task's loop; the result, or None when it ended unfinished."""
    planner_cfg = roles.config.planner
    state = TaskState.from_turns(prior, planner_cfg)

    def step(turn: Turn) -> bool:
        record(turn)
        state.apply(turn, planner_cfg)
        if turn.endpoint_error is not None or turn.infra_failed:
            why = turn.endpoint_error or (turn.verdict.infra_error if turn.verdict else "")
            log.warning("task %s: turn %d failed (%s); the task stays unfinished", task.id, turn.index, why)
            return False
        return True

    if roles.planner is not None and state.plans == 0:
        if not step(await roles.planner.plan(task, index=state.next_index, history="(first plan)", reason=None)):
            return None
    while True:
        stop = state.stop_reason(roles.config.budgets)
        if stop is not None:
            return task_result(task, state, roles.config, stop)
        reason = state.replan_reason(planner_cfg)
        if reason is not None and roles.planner is not None:
            turn = await roles.planner.plan(
                task, index=state.next_index, history=state.history(), reason=reason, profile=state.profile
            )
            if not step(turn):
                return None
            continue
        if not step(await coder_turn(task, state, roles)):
            return None
