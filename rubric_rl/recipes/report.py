"""What a pre-flight check concluded: findings that each name the config key they are about, and the settings
of the check itself.

A finding is an ``error`` (the run would fail, or waste GPUs, or train on something other than asked), a
``warning`` (the check could not be made here, or the run is legal but probably not what was meant) or an
``info`` line (a number worth seeing before launch: replicas, memory per GPU).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Level = Literal["error", "warning", "info"]
CheckName = Literal["recipe", "keys", "verl", "data", "reward", "judge", "gpus", "memory", "install"]


class Finding(BaseModel):
    """One conclusion of one check."""

    model_config = ConfigDict(frozen=True)

    level: Level
    check: CheckName = Field(description="Which check made it.")
    key: str | None = Field(description="The config key it is about (dotted, as on the command line); None: none.")
    message: str

    def line(self) -> str:
        where = f"{self.key}: " if self.key else ""
        return f"{self.level}: [{self.check}] {where}{self.message}"


class PreflightConfig(BaseModel):
    """Settings of the check itself (not of the training run)."""

    model_config = ConfigDict(extra="forbid")

    gpu_memory_gib: float = Field(
        default=80.0, gt=0, description="Memory of one GPU of the machines the run will get (H100 80 GB: 80)."
    )
    launching: bool = Field(
        default=False,
        description="Checks of this machine's installs (vllm, transfer_queue, torchrun) are errors when launching "
        "here and warnings on a dry run (which is usually made on another machine).",
    )
    judge_timeout_s: float = Field(default=5.0, gt=0, description="Limit of the judge reachability request.")
    assume_model: str | None = Field(
        default=None,
        description="A models.yaml entry (e.g. qwen2.5-32b) used for the memory estimate when the model path has no "
        "readable config.json and its name matches no entry.",
    )
    tokenizer: str | None = Field(
        default=None, description="Tokenizer (path or cached name) for the prompt-length check; None: the model's."
    )
    max_rows: int | None = Field(
        default=None, ge=1, description="Rows read per data file for the prompt-length check; None: all."
    )


class Report(BaseModel):
    """Every finding of one pre-flight run, in the order the checks ran."""

    recipe: str
    entrypoint: str
    findings: list[Finding] = []

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def add(self, level: Level, check: CheckName, key: str | None, message: str) -> None:
        self.findings.append(Finding(level=level, check=check, key=key, message=message))

    def extend(self, findings: list[Finding]) -> None:
        self.findings.extend(findings)
