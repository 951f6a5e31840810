"""The final reward of a trajectory: a fresh evaluation through the reward verl trains on, never the tools'."""

from __future__ import annotations

import asyncio

import pytest

from rubric_rl.agents import SandboxTools, ToolsConfig, ToolSession, WriteProgram, final_reward
from rubric_rl.agents.backend import SEED_SPAN, final_sandbox_seed
from rubric_rl.agents.reward import AGENT_KEYS, as_response
from rubric_rl.reward.config import RewardConfig
from rubric_rl.reward.verl import extra_keys
from rubric_rl.skills import extract_program
from rubric_rl.tasks import Task


def score(program: str | None, source: str, reference: str):
    return asyncio.run(
        final_reward(
            program,
            source,
            data_source="agent_test",
            reference=reference,
            extra_info={"task_id": "fused_add_relu", "skill": "agent"},
            reward_kwargs=REWARD_KWARGS,
            turns=3,
            tool_calls=5,
            tool_errors=1,
        )
    )


REWARD_KWARGS = {"rule": {"name": "milestone"}, "mix": {"name": "none"}}


def test_the_scored_response_holds_exactly_the_program() -> None:
    program = 'DOC = """```python\nnot this\n```"""\n\nclass ModelNew:\n    pass\n'
    extraction = extract_program(as_response(program))
    assert extraction.program is not None and extraction.program.strip() == program.strip()
    assert as_response(None) == ""


def test_no_program_is_a_failure_with_every_key(reference: str) -> None:
    reward = score(None, "none", reference)
    config = RewardConfig.from_reward_kwargs(REWARD_KWARGS)
    assert reward.score == -1.0 and reward.source == "none"
    assert list(reward.info) == [*extra_keys(config), *AGENT_KEYS]
    assert reward.info["compiled"] == 0.0 and reward.info["agent_submitted"] == 0.0
    assert reward.info["agent_turns"] == 3.0 and reward.info["agent_tool_errors"] == 1.0


@pytest.mark.slow
def test_a_program_tuned_to_the_tools_inputs_fails_the_final_evaluation(
    task: Task, sandbox_tools: SandboxTools, programs: dict[str, str], reference: str
) -> None:
    """The program computes only on inputs drawn from the tools' seeds (which their feedback names) and returns
    zeros otherwise: every tool says it is correct; the final evaluation, on the reward's seed, says it is not."""
    tuned = programs["tuned"].replace("TOOL_SEED = None", f"TOOL_SEED = {sandbox_tools.seed}")

    async def with_tools():
        session = ToolSession(task, sandbox_tools, ToolsConfig(backend="cpu"))
        await session.write_program(WriteProgram(program=tuned))
        check = await session.check()
        await session.submit()
        return check, session.final_program("last_written")

    check, (program, source) = asyncio.run(with_tools())
    assert check.status == "correct", check.text
    assert check.verdict is not None
    tool_seeds = {t.seed for t in check.verdict.trials}
    reward = score(program, source, reference)
    assert source == "submitted" and reward.info["agent_submitted"] == 1.0
    assert reward.score == -1.0 and reward.info["correct"] == 0.0 and reward.info["compiled"] == 1.0
    final_seed = final_sandbox_seed(REWARD_KWARGS, "cpu")  # the final evaluation's inputs come from here on
    assert all(s >= final_seed + SEED_SPAN for s in tool_seeds)
