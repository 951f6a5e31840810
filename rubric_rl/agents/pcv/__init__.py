"""The Planner / Coder / Verifier loop (StitchCUDA): the Planner profiles the reference and plans the program, the
Coder (the trained model) writes it with the generate and refine skill cards, the Verifier runs the sandbox and
feeds back the Verdict, with documentation-grounded optimisation advice once the program is correct.

``run.run_rollout`` runs it over a task set (``rubric-rl rollout rollouts/level3.yaml --out DIR``); ``loop`` is one
task; ``state`` folds a task's recorded turns so that a killed run resumes where it stood."""

from rubric_rl.agents.pcv.config import RolloutConfig, RolloutConfigError, load_rollout
from rubric_rl.agents.pcv.records import Citation, TaskResult, Turn

__all__ = ["Citation", "RolloutConfig", "RolloutConfigError", "TaskResult", "Turn", "load_rollout"]
