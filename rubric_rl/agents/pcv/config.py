"""A run definition of the Planner / Coder / Verifier loop (``rollouts/*.yaml``), typed.

A run file names the task set, an endpoint and model per role, the role prompts (files), the loop's budgets, the
device and the concurrency. Relative paths in it are relative to the file. Bad combinations fail at load time
with a message naming the field; nothing past ``load_rollout`` reads raw dictionaries.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rubric_rl.resources import content_dir
from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.executors import ExecutorConfig
from rubric_rl.skills.feedback import FeedbackConfig

Track = Literal["own_kernels", "libraries"]
StructuredOutput = Literal["json_schema", "json_object", "none"]


class RolloutConfigError(ValueError):
    """The run definition is unusable; the message names the file and field."""


class EndpointConfig(BaseModel):
    """An OpenAI-compatible chat endpoint (``vllm serve``, a hosted API) and the client's limits."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="Endpoint, e.g. http://localhost:8000/v1.")
    model: str = Field(min_length=1, description="Model name sent with every request.")
    api_key_env: str = Field(
        default="OPENAI_API_KEY", description="Environment variable holding the API key ('EMPTY' when unset)."
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="Sampling temperature.")
    max_tokens: int = Field(default=8192, ge=16, description="Completion token limit of one answer.")
    seed: int | None = Field(default=None, description="Sampling seed sent with each request; None: unset.")
    timeout_s: float = Field(default=600.0, gt=0, description="Limit of one HTTP request, seconds.")
    max_retries: int = Field(default=4, ge=0, le=20, description="Retries on 429/5xx/timeouts/connection errors.")
    backoff_initial_s: float = Field(default=1.0, gt=0, description="First retry delay (exponential, with jitter).")
    backoff_max_s: float = Field(default=30.0, gt=0, description="Largest retry delay, Retry-After included.")
    concurrency: int = Field(default=8, ge=1, description="Requests in flight at once to this endpoint.")
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra request fields, e.g. {'chat_template_kwargs': {...}}."
    )

    def api_key(self) -> str:
        return os.environ.get(self.api_key_env) or "EMPTY"


class PlannerConfig(BaseModel):
    """The Planner: profiles the reference, asks its LLM for a structured plan, replans on failure or stagnation."""

    model_config = ConfigDict(extra="forbid")

    endpoint: EndpointConfig = Field(description="Where the planner's model is served.")
    system_prompt: Path = Field(description="System prompt file ($placeholders: see prompts.PLANNER_FIELDS).")
    user_prompt: Path = Field(description="User prompt file: $reference, $profile, $device, $history, $schema.")
    structured_output: StructuredOutput = Field(
        default="json_object",
        description="response_format sent: json_schema (the Plan's schema), json_object, or none.",
    )
    repair_attempts: int = Field(
        default=1, ge=0, le=3, description="Follow-ups asking for a valid plan after one that does not validate."
    )
    profile: bool = Field(default=True, description="Profile the reference (torch.profiler) before planning.")
    profile_timeout_s: float = Field(default=300.0, gt=0, description="Limit of the profiling child process.")
    profile_top_ops: int = Field(default=15, ge=1, description="Operators (and kernels) shown to the planner.")
    replan_after_failures: int = Field(
        default=2, ge=1, description="Replan after this many coder turns in a row without a correct program."
    )
    replan_after_stagnant: int = Field(
        default=2, ge=1, description="Replan after this many correct turns in a row that did not improve the best."
    )
    min_improvement: float = Field(
        default=0.02, ge=0, description="A correct turn improves the best when its speedup is this much higher."
    )
    max_replans: int = Field(default=2, ge=0, description="Replans per task at most.")


class CoderConfig(BaseModel):
    """The Coder: the trained model, prompted with the same skill cards it was trained on."""

    model_config = ConfigDict(extra="forbid")

    endpoint: EndpointConfig = Field(description="Where the coder is served (the trained model behind vllm serve).")
    generate_skill: str = Field(default="generate", description="Skill card of the first turn (name or path).")
    refine_skill: str = Field(default="refine", description="Skill card of every later turn (name or path).")
    plan_prompt: Path | None = Field(
        default=None,
        description="File appended to the card's user message with the plan ($plan); None: the card alone, "
        "exactly the training prompt.",
    )


class VerifierConfig(BaseModel):
    """The Verifier: the sandbox's Verdict as feedback, and grounded optimisation advice on success."""

    model_config = ConfigDict(extra="forbid")

    feedback: FeedbackConfig = Field(
        default_factory=FeedbackConfig, description="Bounds of the rendered Verdict (the refine skill's renderer)."
    )
    docs_dir: Path | None = Field(
        default=None, description="Local folder of NVIDIA documentation (.md, .txt, .rst, .html) for BM25 retrieval."
    )
    top_passages: int = Field(default=3, ge=0, description="Passages cited in one optimisation feedback.")
    passage_chars: int = Field(default=700, ge=100, description="Length of one indexed passage, characters.")
    excerpt_chars: int = Field(default=320, ge=40, description="Characters of a passage quoted in the feedback.")
    max_chars: int = Field(default=4500, ge=500, description="Longest feedback, Verdict and advice together.")


class TaskSet(BaseModel):
    """Which tasks the run covers."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="Task source: a KernelBench checkout, a problems .jsonl, or hf:<dataset>.")
    levels: list[int] | None = Field(default=None, description="KernelBench levels to keep; None: all.")
    ids: str | None = Field(default=None, description="Problem-id ranges to keep, e.g. '1-10,15'; None: all.")
    names: list[str] | None = Field(default=None, description="Name patterns (glob or substring) to keep.")
    task_ids: list[str] | None = Field(default=None, description="Task ids ('L3-1') to keep; None: all.")
    limit: int | None = Field(default=None, ge=1, description="The first N tasks after filtering; None: all.")


class Budgets(BaseModel):
    """Limits of one task's loop; the first one reached ends it (recorded as the stop reason)."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int = Field(default=6, ge=1, description="Coder turns per task (the Verifier runs after each).")
    wall_time_s: float = Field(default=3600.0, gt=0, description="Seconds per task, all roles and the sandbox.")
    max_tokens: int = Field(default=400_000, ge=1, description="Prompt plus completion tokens per task, all roles.")
    target_speedup: float | None = Field(
        default=None, gt=0, description="Stop early once a correct program is this much faster than eager."
    )


class RolloutConfig(BaseModel):
    """One run definition: ``rubric-rl rollout FILE --out DIR``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Run name, shown in reports.")
    track: Track = Field(
        default="own_kernels",
        description="Policy track of the results: own_kernels (the default sandbox policy) or libraries (the "
        "sandbox allows cuBLAS/cuDNN...); reports keep the tracks apart.",
    )
    device: Literal["cuda", "cpu"] = Field(default="cuda", description="Sandbox backend and profiling device.")
    concurrency: int = Field(default=4, ge=1, description="Tasks in their loop at once.")
    tasks: TaskSet
    planner: PlannerConfig | None = Field(default=None, description="None: no planner (the coder alone).")
    coder: CoderConfig
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    budgets: Budgets = Field(default_factory=Budgets)
    sandbox: dict[str, Any] = Field(
        default_factory=dict, description="SandboxConfig fields (its YAML form); backend comes from device."
    )
    sandbox_file: Path | None = Field(default=None, description="A sandbox YAML file, read before `sandbox`.")
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig, description="How evaluation is spread.")

    @field_validator("sandbox")
    @classmethod
    def _no_backend(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "backend" in value:
            raise ValueError("backend: set the run's `device` instead")
        return value

    @model_validator(mode="after")
    def _track_matches_policy(self) -> RolloutConfig:
        if self.track == "own_kernels" and _allows_libraries(self.sandbox_config().model_dump()):
            raise ValueError("track: the sandbox allows libraries or extra ATen ops; set track: libraries")
        return self

    def sandbox_config(self) -> SandboxConfig:
        """The sandbox's config: the file's fields, then the inline ones, then the backend."""
        data: dict[str, Any] = {}
        if self.sandbox_file is not None:
            data = yaml.safe_load(self.sandbox_file.read_text()) or {}
        return SandboxConfig.model_validate({**data, **self.sandbox, "backend": self.device})


def _allows_libraries(dumped: Any) -> bool:
    """Whether any ``allowed_libraries`` / ``allowed_aten_ops`` list in the sandbox config is non-empty (searched
    wherever the config nests it)."""
    if isinstance(dumped, dict):
        for key, value in dumped.items():
            if key in ("allowed_libraries", "allowed_aten_ops") and value:
                return True
            if _allows_libraries(value):
                return True
    return False


_PATH_FIELDS = {
    ("planner", "system_prompt"),
    ("planner", "user_prompt"),
    ("coder", "plan_prompt"),
    ("verifier", "docs_dir"),
    ("sandbox_file",),
}


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Relative paths of the file are relative to it; a prompt missing there is looked up in the bundled
    ``rollouts/`` folder, so ``prompts/planner_user.md`` works from anywhere."""
    for path in _PATH_FIELDS:
        node: Any = data
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict) or not isinstance(node.get(path[-1]), str):
            continue
        value = Path(os.path.expanduser(node[path[-1]]))
        if not value.is_absolute():
            local = base / value
            bundled = content_dir("rollouts") / value
            value = local if local.exists() or not bundled.exists() else bundled
        node[path[-1]] = str(value)


def load_rollout(path: Path, overrides: dict[str, Any] | None = None) -> RolloutConfig:
    """The run definition at ``path``; ``overrides`` (dotted keys) win over the file. Errors name the field."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise RolloutConfigError(f"{path}: run definition does not exist") from None
    except yaml.YAMLError as e:
        raise RolloutConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise RolloutConfigError(f"{path}: expected a mapping of RolloutConfig fields")
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    _resolve_paths(data, path.resolve().parent)
    try:
        config = RolloutConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise RolloutConfigError(f"{path}: field {loc + ': ' if loc else ''}{msg}") from None
    _check_files(config, path)
    return config


def _check_files(config: RolloutConfig, path: Path) -> None:
    from rubric_rl.agents.pcv.prompts import load_prompt

    files: list[tuple[str, Path | None, frozenset[str]]] = []
    if config.planner is not None:
        from rubric_rl.agents.pcv.prompts import PLANNER_FIELDS

        files += [
            ("planner.system_prompt", config.planner.system_prompt, PLANNER_FIELDS),
            ("planner.user_prompt", config.planner.user_prompt, PLANNER_FIELDS),
        ]
    files.append(("coder.plan_prompt", config.coder.plan_prompt, frozenset({"plan"})))
    for field, file, allowed in files:
        if file is None:
            continue
        try:
            load_prompt(file, allowed)
        except (OSError, ValueError) as e:
            raise RolloutConfigError(f"{path}: field {field}: {e}") from None
    if config.verifier.docs_dir is not None and not config.verifier.docs_dir.is_dir():
        raise RolloutConfigError(f"{path}: field verifier.docs_dir: {config.verifier.docs_dir} is not a folder")
    from rubric_rl.skills import SkillCardError, load_skill

    for field, card in (
        ("coder.generate_skill", config.coder.generate_skill),
        ("coder.refine_skill", config.coder.refine_skill),
    ):
        try:
            load_skill(card)
        except (FileNotFoundError, SkillCardError) as e:
            raise RolloutConfigError(f"{path}: field {field}: {e}") from None
