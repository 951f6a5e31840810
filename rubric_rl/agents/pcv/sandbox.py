"""Every sandbox call the Verifier makes, in one place: today the executor directly; later the agent tools'
``ToolSession`` can take its place here without the loop changing."""

from __future__ import annotations

import hashlib

from rubric_rl.sandbox import Verdict
from rubric_rl.sandbox.executors import Executor
from rubric_rl.tasks import Task


class SandboxGateway:
    """Evaluates one program of one task and returns its Verdict (never raises for a program)."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    async def evaluate(self, task: Task, program: str) -> Verdict:
        return await self.executor.evaluate(task, program)

    @staticmethod
    def no_program(task: Task, response: str, reason: str) -> Verdict:
        """The Verdict of an answer with no program in it: a compile error that says why (as verify-batch does)."""
        sha = hashlib.sha256(response.encode()).hexdigest()
        return Verdict(
            status="compile_error", task_id=task.id, candidate_sha256=sha, errors=[reason], compile_log=reason
        )
