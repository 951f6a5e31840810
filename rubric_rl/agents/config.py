"""Typed configuration of the agentic environment: the tools' bounds and sandbox, and the agent loop's budgets
and final reward.

Built once (from the agent loop's YAML entry, a file, or code) and passed down. The tools evaluate with input
seeds of their own, far from the final evaluation's: a program tuned to what the tools showed meets different
inputs when it is scored (see ``seeds``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rubric_rl.reward.config import ServiceConfig, plain
from rubric_rl.sandbox import NcuOptions
from rubric_rl.skills.feedback import FeedbackConfig


class AgentConfigError(ValueError):
    """An agent configuration that cannot be used; the message names the field."""


def _tool_service() -> ServiceConfig:
    return ServiceConfig(name="rubric_rl.agent_tools")


class ToolsConfig(BaseModel):
    """The tools over the sandbox: where they evaluate and how much each call may cost and say."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="Sandbox backend of the tools; auto: cuda where a GPU is visible, else cpu."
    )
    seed: int | None = Field(
        default=None,
        ge=0,
        description="Base input seed of the tools' evaluations. None: the final evaluation's plus 2**30; a set "
        "seed must be at least backend.SEED_SPAN (100000) away from the final evaluation's.",
    )
    sandbox: dict[str, Any] = Field(
        default_factory=dict,
        description="Further SandboxConfig fields of the tools' evaluations (validated at load; backend and the "
        "seed are set above).",
    )
    executor: dict[str, Any] = Field(default_factory=dict, description="ExecutorConfig fields of the tools' executor.")
    service: ServiceConfig = Field(
        default_factory=_tool_service,
        description="Where the tools' evaluations run: under Ray one named service per node (its own name, apart "
        "from the reward's), else an executor in this process.",
    )
    max_program_chars: int = Field(
        default=100_000, ge=100, description="Longest program write_program accepts, characters."
    )
    max_output_chars: int = Field(
        default=4000, ge=200, description="Longest text one tool call returns to the model, characters."
    )
    max_output_tokens: int | None = Field(
        default=1024,
        ge=20,
        description="Longest text one tool call returns, tokens; enforced where a token counter is given (the "
        "agent loop gives its tokenizer's). None: characters only.",
    )
    compile_timeout_s: float = Field(
        default=900.0, gt=0, description="Bound on one compile call, waiting for a build slot included."
    )
    evaluate_timeout_s: float = Field(
        default=1800.0,
        gt=0,
        description="Bound on one evaluation (check, benchmark, profile share it), queueing included.",
    )
    max_parallel_compiles: int = Field(
        default=2, ge=1, description="compile calls building at once in this process (other sessions wait)."
    )
    feedback: FeedbackConfig = Field(
        default_factory=FeedbackConfig,
        description="How Verdicts are rendered for the model (the refine card's feedback format).",
    )
    ncu: NcuOptions | None = Field(
        default_factory=NcuOptions,
        description="Nsight Compute metrics in profile's answer (cuda backend, where ncu is installed): the "
        "program's kernels measured in a worker of their own, alone on its GPU. None: off.",
    )


def _default_reward_kwargs() -> dict[str, Any]:
    return {"rule": {"name": "milestone"}, "mix": {"name": "none"}}


class AgentConfig(BaseModel):
    """The agent loop: its budgets, its tools and its final reward."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int = Field(
        default=16,
        ge=1,
        description="Assistant turns (generations) per trajectory; verl's multi_turn.max_assistant_turns, when "
        "set, caps it further.",
    )
    max_calls_per_turn: int = Field(
        default=4, ge=1, description="Tool calls run per assistant turn; more get a tool error each, unrun."
    )
    format: Literal["hermes"] = Field(
        default="hermes", description="Tool-call format of the model's text: <tool_call>{json}</tool_call>."
    )
    unsubmitted: Literal["last_written", "fail"] = Field(
        default="last_written",
        description="What is scored when a trajectory ends without submit (turn or token budget, no tool call): "
        "the last program written, or nothing (scored as a response without a program).",
    )
    tools: ToolsConfig = Field(default_factory=ToolsConfig, description="The tools.")
    reward_kwargs: dict[str, Any] = Field(
        default_factory=_default_reward_kwargs,
        description="RewardConfig fields of the final reward (rubric_rl.reward.verl.compute_score's "
        "reward_kwargs; 'config' names a YAML file). Default: the milestone rule alone.",
    )

    @classmethod
    def load(cls, data: Any, where: str = "agent config") -> AgentConfig:
        """Validate a mapping (OmegaConf's included); errors name ``where`` and the field."""
        raw = plain(data or {})
        if isinstance(raw, dict) and "config" in raw:
            path = Path(str(raw.pop("config")))
            raw = {**cls._read(path), **raw}
            where = str(path)
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            raise AgentConfigError(f"{where}: {loc + ': ' if loc else ''}{err['msg']}") from None

    @staticmethod
    def _read(path: Path) -> dict[str, Any]:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise AgentConfigError(f"{path}: cannot read the agent config: {e}") from None
        if not isinstance(data, dict):
            raise AgentConfigError(f"{path}: expected a mapping of AgentConfig fields")
        return data
