"""Typed configuration of the reward: which rule, which mix, the hack penalty, masking, and where samples go.

Built once, from a YAML file (``RewardConfig.from_yaml``) or from verl's
``reward.custom_reward_function.reward_kwargs`` (``RewardConfig.from_reward_kwargs``), and passed down; nothing
below reads a raw mapping. A bad combination fails here with a message that names the field, e.g. a
``stitchcuda`` mix over the ``milestone`` rule, or a hack penalty that pays more than failing honestly.

``scoring_hash`` covers only what turns a (Verdict, Judgment) into a score (rule, mix, hack penalty, masking);
a ledger record carries it, so two runs' rewards are comparable exactly when their hashes agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rubric_rl.judge import JudgeConfig, RubricError, load_rubric
from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.executors import ExecutorConfig

# Execution slots per GPU of the reward's executor. An RL batch is mostly samples that fail early or hang, each
# holding a slot for its worker's time but little of the GPU: on an H100 with 16 cores a GRPO-shaped batch (8 tasks
# x 8 responses, hangs included) gave 809 rewards per hour with the executor's 2 slots and 1,108-1,170 with 4,
# the model of slot time per variant predicting both walls (docs/measurements.md, "Where a reward batch's time
# goes").
REWARD_SLOTS_PER_GPU = 4
# The least a stage limit derived from the reference's time gives the reward's candidates (the sandbox's own
# limits.stage_timeout_floor_s, 30 s, is for evaluation runs). In the batch above a hung sample held its slot for
# the 30 s floor, half of the batch's slot time. The floor must stay well above a correct candidate's longest
# silence (its Verdict's diagnostics.longest_silence_s) in the stages it limits: on the H100 host under a reward
# batch (16 x 8 and 8 x 8, 4 and 6 slots) those were at most 0.8 s in a correctness trial but 7.8 s loading the
# candidate, so 20 s keeps 2.5 times the worst seen where 10 s kept 1.3 (docs/measurements.md, "The hang floor and
# the 16 x 8 batch").
REWARD_STAGE_FLOOR_S = 20.0

RuleName = Literal["milestone", "speedup"]
MixName = Literal["stitchcuda", "weighted", "none"]
Baseline = Literal["eager", "compile"]


class RewardConfigError(ValueError):
    """A reward configuration that cannot be used; the message names the field."""


class RuleConfig(BaseModel):
    """The rule reward: what the sandbox's Verdict alone is worth."""

    model_config = ConfigDict(extra="forbid")

    name: RuleName = Field(
        default="speedup",
        description="milestone: CUDA Agent's levels (fail / correct / faster than eager / faster than eager and "
        "torch.compile); speedup: the speedup itself, clipped, 0 unless correct.",
    )
    margin: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="milestone: 'faster' means a speedup strictly above 1 + margin (CUDA Agent: 5%).",
    )
    fail: float = Field(default=-1.0, description="milestone: compile error, incorrect, runtime error or timeout.")
    correct: float = Field(default=1.0, description="milestone: correct, not faster than eager.")
    faster_than_eager: float = Field(default=2.0, description="milestone: correct and faster than eager.")
    faster_than_both: float = Field(
        default=3.0,
        description="milestone: correct and faster than eager and torch.compile. Without a compile timing "
        "(baseline off or failed) this level cannot be reached.",
    )
    baseline: Baseline = Field(
        default="eager",
        description="speedup: over eager PyTorch or over torch.compile; with no compile timing, over eager.",
    )
    clip_min: float = Field(default=0.0, ge=0.0, description="speedup: lower clip of a correct sample's speedup.")
    clip_max: float = Field(
        default=3.0, gt=0.0, description="speedup: upper clip (the cap of the stitchcuda mix's min(speedup, cap))."
    )
    untimed: float = Field(
        default=1.0,
        ge=0.0,
        description="speedup: the value taken for a correct sample that was not timed (performance measurement "
        "off): parity, no evidence of a gain or a loss.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> RuleConfig:
        if self.clip_min >= self.clip_max:
            raise ValueError(f"rule.clip_min: {self.clip_min} must be below rule.clip_max ({self.clip_max})")
        levels = [self.fail, self.correct, self.faster_than_eager, self.faster_than_both]
        if levels != sorted(levels):
            raise ValueError(
                "rule.fail/correct/faster_than_eager/faster_than_both: must not decrease, got " + str(levels)
            )
        return self


class MixConfig(BaseModel):
    """How the rule reward and the rubric judge's total r in [0, 1] combine."""

    model_config = ConfigDict(extra="forbid")

    name: MixName = Field(
        default="stitchcuda",
        description="stitchcuda: (min(speedup, cap) + offset) x (1 + lambda x (r - 0.5)), 0 unless correct or when "
        "the hack gate fired; weighted: alpha x rule + beta x r; none: the rule alone (no judge).",
    )
    offset: float = Field(default=0.3, ge=0.0, description="stitchcuda: added to a correct sample's clipped speedup.")
    lambdas: dict[str, float] = Field(
        default_factory=lambda: {"generate": 1.0, "refine": 0.7},
        description="stitchcuda: lambda per skill (how much the rubric moves the reward); a skill not listed is an "
        "error. In [0, 2], so the multiplier stays non-negative.",
    )
    hack_gate: str = Field(
        default="major_hacking", description="stitchcuda: the rubric gate whose firing zeroes the reward."
    )
    alpha: float = Field(default=1.0, ge=0.0, description="weighted: weight of the rule reward.")
    beta: float = Field(default=1.0, ge=0.0, description="weighted: weight of the rubric total.")

    @model_validator(mode="after")
    def _lambdas(self) -> MixConfig:
        for skill, value in self.lambdas.items():
            if not 0.0 <= value <= 2.0:
                raise ValueError(f"mix.lambdas.{skill}: {value} is outside [0, 2] (the multiplier would go negative)")
        return self

    @property
    def uses_judge(self) -> bool:
        """Whether any sample's reward can depend on a judgment."""
        return self.name == "stitchcuda" or (self.name == "weighted" and self.beta > 0)


class MaskingConfig(BaseModel):
    """What a sample that must not count (an infrastructure or judge failure) is given.

    verl 0.9.1 reads no per-sample mask or weight from a reward: its GRPO advantage is the score minus the mean of
    the prompt's group (over the std), and every score in the group enters both. A masked sample is therefore
    given the mean of its group's unmasked scores: its advantage is 0 and the others' centred advantages are
    unchanged (see docs/reward.md)."""

    model_config = ConfigDict(extra="forbid")

    group_mean: bool = Field(
        default=True,
        description="Give a masked sample its group's mean (needs the group id and size from the reward manager "
        "rubric_rl.reward.verl_manager.RubricRewardManager); False: always the fallback score.",
    )
    group_wait_s: float = Field(
        default=1800.0,
        gt=0,
        description="How long a masked sample waits for the rest of its group to be scored; then the mean of "
        "those scored so far.",
    )
    fallback_score: float = Field(
        default=0.0,
        description="Score of a masked sample whose group has no unmasked score (or that has no group: plain "
        "naive manager, validation, a notebook).",
    )


class ServiceConfig(BaseModel):
    """Where evaluations run: one bounded evaluation service per node, shared by all reward workers."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["auto", "inprocess", "ray"] = Field(
        default="auto",
        description="ray: the executor in a named Ray actor on this node, found by name (started by the first "
        "worker that needs it); inprocess: an executor in this process; auto: ray when Ray is initialised.",
    )
    name: str = Field(default="rubric_rl.eval", description="Actor name prefix; the node id is appended.")
    namespace: str = Field(default="rubric_rl", description="Ray namespace of the service and the group board.")
    lifetime: Literal["owned", "detached"] = Field(
        default="owned",
        description="owned: ends with the process that started it (the run); detached: outlives it until "
        "shutdown_service is called (a cluster shared by several runs).",
    )
    max_inflight: int = Field(
        default=256, ge=1, description="Evaluations the service accepts at once; more callers wait their turn."
    )


class LedgerConfig(BaseModel):
    """The reward ledger: every scored sample as one JSONL RewardRecord."""

    model_config = ConfigDict(extra="forbid")

    dir: Path | None = Field(
        default=None,
        description="Run directory; records go to <dir>/ledger/rewards-<host>-<pid>.jsonl (one file per process, "
        "so writers never interleave). None: no ledger.",
    )


class MetricsConfig(BaseModel):
    """Training-time reward metrics (verl logs extra keys only at validation)."""

    model_config = ConfigDict(extra="forbid")

    window: int = Field(
        default=256,
        ge=1,
        description="Samples per metrics window (set it to train_batch_size x rollout.n for one window per step).",
    )
    wandb: bool = Field(default=False, description="Log each window to Weights & Biases.")
    wandb_project: str = Field(default="rubric-rl", description="wandb project.")
    wandb_group: str | None = Field(default=None, description="wandb group (the trainer's experiment name).")
    wandb_mode: Literal["online", "offline"] = Field(default="online", description="offline: write locally only.")


class RewardConfig(BaseModel):
    """Everything the reward needs."""

    model_config = ConfigDict(extra="forbid")

    rule: RuleConfig = Field(default_factory=RuleConfig, description="The rule reward.")
    mix: MixConfig = Field(default_factory=MixConfig, description="The rubric mix.")
    hack_penalty: float = Field(
        default=-1.0,
        description="The reward of every 'hack' Verdict, whatever else holds; at most the lowest reward an honest "
        "sample can get.",
    )
    masking: MaskingConfig = Field(default_factory=MaskingConfig, description="Infrastructure and judge failures.")
    judge: JudgeConfig = Field(
        default_factory=JudgeConfig, description="The rubric judge (offline heuristic when no endpoint is set)."
    )
    judge_sees_verdict: bool = Field(
        default=False,
        description="True: judge after the evaluation, with the Verdict as evidence; False: judge while the "
        "evaluation runs (the judgment is dropped when the reward does not need it).",
    )
    backend: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="Sandbox backend; auto: cuda where a GPU is visible, else cpu."
    )
    sandbox: dict[str, Any] = Field(
        default_factory=dict,
        description="Further SandboxConfig fields (validated at load; backend is above); limits."
        f"stage_timeout_floor_s is {REWARD_STAGE_FLOOR_S:g} unless set here (the sandbox's own default is for "
        "evaluation runs).",
    )
    executor: dict[str, Any] = Field(
        default_factory=dict,
        description=f"ExecutorConfig fields (validated at load); slots_per_gpu is {REWARD_SLOTS_PER_GPU} unless set "
        "here (the executor's own default is for evaluation runs).",
    )
    deadline_s: float | None = Field(
        default=None, gt=0, description="Bound on one evaluation, queueing included (an infra failure past it)."
    )
    service: ServiceConfig = Field(default_factory=ServiceConfig, description="The evaluation service.")
    ledger: LedgerConfig = Field(default_factory=LedgerConfig, description="The reward ledger.")
    metrics: MetricsConfig = Field(default_factory=MetricsConfig, description="Training-time metrics.")

    @model_validator(mode="after")
    def _consistent(self) -> RewardConfig:
        if self.mix.name == "stitchcuda" and self.rule.name != "speedup":
            raise ValueError(
                f"mix.name: stitchcuda multiplies a clipped speedup, so rule.name must be 'speedup', not "
                f"{self.rule.name!r} (use mix.name 'weighted' or 'none' with the milestone rule)"
            )
        lowest = self.lowest_honest_reward()
        if self.hack_penalty > lowest:
            raise ValueError(
                f"hack_penalty: {self.hack_penalty} would pay more than an honest failure ({lowest}); "
                f"set it to {lowest} or less"
            )
        if "backend" in self.sandbox:
            raise ValueError("sandbox.backend: set the top-level 'backend' instead")
        for section, model, extra in (("sandbox", SandboxConfig, {"backend": "cpu"}), ("executor", ExecutorConfig, {})):
            try:
                model.model_validate({**extra, **getattr(self, section)})
            except ValidationError as e:
                err = e.errors()[0]
                where = ".".join(str(x) for x in err["loc"])
                raise ValueError(f"{section}.{where}: {err['msg']}") from None
        if self.mix.uses_judge and self.mix.name == "stitchcuda":
            try:
                rubric = load_rubric(self.judge.rubric)
            except (RubricError, FileNotFoundError) as e:
                raise ValueError(f"judge.rubric: {e}") from None
            gates = [g.name for g in rubric.gates]
            if self.mix.hack_gate not in gates:
                raise ValueError(
                    f"mix.hack_gate: rubric {rubric.name!r} has no gate {self.mix.hack_gate!r} (gates: {gates})"
                )
        return self

    def lowest_honest_reward(self) -> float:
        """The least a sample that is not a hack can be scored (masking aside)."""
        rule_low = self.rule.fail if self.rule.name == "milestone" else 0.0
        if self.mix.name == "weighted":
            return self.mix.alpha * rule_low
        if self.mix.name == "stitchcuda":
            return 0.0
        return rule_low

    def scoring_hash(self) -> str:
        """sha256 of the fields that turn a (Verdict, Judgment) into a score."""
        payload = self.model_dump(mode="json", include={"rule", "mix", "hack_penalty", "masking"})
        payload["masking"].pop("group_wait_s", None)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    def sandbox_config(self, backend: Literal["cpu", "cuda"]) -> SandboxConfig:
        defaults = {"limits": {"stage_timeout_floor_s": REWARD_STAGE_FLOOR_S}}
        return SandboxConfig.model_validate({**deep_merge(defaults, self.sandbox), "backend": backend})

    def executor_config(self) -> ExecutorConfig:
        return ExecutorConfig.model_validate({"slots_per_gpu": REWARD_SLOTS_PER_GPU, **self.executor})

    @classmethod
    def load(cls, data: Mapping[str, Any], where: str = "reward config") -> RewardConfig:
        """Validate a mapping; any error becomes a RewardConfigError naming ``where`` and the field."""
        try:
            return cls.model_validate(plain(data))
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise RewardConfigError(f"{where}: {loc + ': ' if loc else ''}{msg}") from None

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: Mapping[str, Any] | None = None) -> RewardConfig:
        """A YAML file of RewardConfig fields, with ``overrides`` merged over it (nested mappings merge)."""
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise RewardConfigError(f"{path}: cannot read the reward config: {e}") from None
        if not isinstance(data, dict):
            raise RewardConfigError(f"{path}: expected a mapping of RewardConfig fields")
        return cls.load(deep_merge(data, plain(overrides or {})), where=str(path))

    @classmethod
    def from_reward_kwargs(cls, kwargs: Mapping[str, Any]) -> RewardConfig:
        """verl's ``reward_kwargs``: ``config`` names a YAML file; every other key is a RewardConfig field that
        overrides it (``+reward.custom_reward_function.reward_kwargs.mix.name=weighted``)."""
        data = plain(kwargs)
        path = data.pop("config", None)
        if path is not None:
            return cls.from_yaml(path, data)
        return cls.load(data, where="reward_kwargs")


def plain(value: Any) -> Any:
    """Mappings and sequences (OmegaConf's included) as plain dicts and lists, recursively."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ListConfig":
        return [plain(v) for v in value]
    return value


def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
    return out
