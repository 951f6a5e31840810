"""A task's loop state, folded from its turn records.

The live loop and a resumed one build their state the same way, by ``apply``-ing turns in order, so a run
killed between two turns goes on exactly where it stood: the same plan, the same program to refine with the same
feedback, the same budgets spent. Turns that failed for a reason that is not the model's (the endpoint after its
retries, the evaluator's ``infra_error``) are kept in the file but change nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rubric_rl.agents.pcv.config import Budgets, PlannerConfig
from rubric_rl.agents.pcv.plan import Plan
from rubric_rl.agents.pcv.profiling import ReferenceProfile
from rubric_rl.agents.pcv.records import StopReason, Turn


def speedup(turn: Turn | None) -> float:
    if turn is None or turn.verdict is None or turn.verdict.speedup_eager is None:
        return 0.0
    return turn.verdict.speedup_eager


@dataclass
class TaskState:
    turns: list[Turn] = field(default_factory=list)
    plan: Plan | None = None
    plans: int = 0
    replans: int = 0
    profile: ReferenceProfile | None = None
    coder_turns: int = 0
    best: Turn | None = None
    last_program: Turn | None = None
    last_reviewed: Turn | None = None
    first_correct_turn: int | None = None
    failures_in_row: int = 0
    stagnant_in_row: int = 0
    refine_best_next: bool = False
    generate_next: bool = False

    @classmethod
    def from_turns(cls, turns: list[Turn], planner: PlannerConfig | None) -> TaskState:
        state = cls()
        for turn in turns:
            state.apply(turn, planner)
        return state

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.turns)

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.turns)

    @property
    def next_index(self) -> int:
        return len(self.turns)

    def stage_seconds(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for t in self.turns:
            for k, v in t.stages.items():
                out[k] = out.get(k, 0.0) + v
        return out

    def apply(self, turn: Turn, planner: PlannerConfig | None) -> None:
        self.turns.append(turn)
        if turn.endpoint_error is not None or turn.infra_failed:
            return
        if turn.role == "planner":
            self._apply_plan(turn)
        else:
            self._apply_coder(turn, planner)

    def _apply_plan(self, turn: Turn) -> None:
        self.plans += 1
        if turn.kind == "replan":
            self.replans += 1
            self.refine_best_next = self.best is not None
            self.generate_next = self.best is None
        if turn.profile is not None:
            self.profile = turn.profile
        if turn.plan is not None:
            self.plan = turn.plan
        self.failures_in_row = self.stagnant_in_row = 0

    def _apply_coder(self, turn: Turn, planner: PlannerConfig | None) -> None:
        assert turn.verdict is not None
        self.coder_turns += 1
        self.refine_best_next = self.generate_next = False
        self.last_reviewed = turn
        if turn.program is not None:
            self.last_program = turn
        if turn.verdict.status != "correct":
            self.failures_in_row += 1
            self.stagnant_in_row = 0
            return
        if self.first_correct_turn is None:
            self.first_correct_turn = self.coder_turns
        margin = 1.0 + (planner.min_improvement if planner is not None else 0.0)
        improved = self.best is None or speedup(turn) > speedup(self.best) * margin
        if self.best is None or speedup(turn) > speedup(self.best):
            self.best = turn
        self.failures_in_row = 0
        self.stagnant_in_row = 0 if improved else self.stagnant_in_row + 1

    def replan_reason(self, planner: PlannerConfig | None) -> str | None:
        """Why the next step is a replan (None: it is not)."""
        if planner is None or self.replans >= planner.max_replans or self.coder_turns == 0:
            return None
        if self.failures_in_row >= planner.replan_after_failures:
            return f"{self.failures_in_row} coder turns in a row without a correct program"
        if self.stagnant_in_row >= planner.replan_after_stagnant:
            return f"{self.stagnant_in_row} correct turns in a row without a faster program"
        return None

    def stop_reason(self, budgets: Budgets) -> StopReason | None:
        if budgets.target_speedup is not None and speedup(self.best) >= budgets.target_speedup:
            return "target_speedup"
        if self.coder_turns >= budgets.max_turns:
            return "max_turns"
        if self.seconds >= budgets.wall_time_s:
            return "wall_time"
        if self.tokens >= budgets.max_tokens:
            return "max_tokens"
        return None

    def refine_inputs(self) -> tuple[Turn | None, str | None]:
        """(the turn whose program is refined, the feedback to show), or (None, None) for a fresh generate."""
        if self.generate_next or self.last_program is None:
            return None, None
        if self.refine_best_next and self.best is not None:
            return self.best, self.best.feedback
        assert self.last_reviewed is not None
        return self.last_program, self.last_reviewed.feedback

    def history(self, limit: int = 6) -> str:
        """What the planner is told on a replan: the plan so far and the recent coder turns."""
        lines = []
        if self.plan is not None:
            lines.append(f"Current plan: {self.plan.summary}")
        coder = [t for t in self.turns if t.role == "coder" and t.verdict is not None and not t.infra_failed]
        for t in coder[-limit:]:
            v = t.verdict
            assert v is not None
            speed = f", {v.speedup_eager:.3g}x eager" if v.speedup_eager is not None else ""
            first = (t.feedback or "").strip().splitlines()
            detail = "; ".join(x for x in first[1:4] if x.strip())
            lines.append(f"- coder turn {t.coder_turn} ({t.kind}): {v.status}{speed}. {detail}"[:400])
        if self.best is not None:
            lines.append(f"Best so far: coder turn {self.best.coder_turn}, {speedup(self.best):.3g}x eager.")
        return "\n".join(lines) if lines else "(first plan)"
